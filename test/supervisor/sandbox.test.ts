/**
 * The bubblewrap sandbox around stdio servers, with real processes: a hostile server tries to read,
 * write, signal, connect and fork its way out of its sandbox under a real gateway; every attempt
 * fails and the gateway keeps serving. A gateway killed by SIGKILL takes its sandboxed children with
 * it. `stdio.allowedCommands` refuses a command at install, configure and start.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createGateway } from '../../src/gateway.js';
import { SandboxPlanner } from '../../src/supervisor/sandbox-plan.js';
import { findBwrap } from '../../src/upstream/stdio/index.js';
import { runCli } from '../cli/helpers.js';
import {
  cleanUp,
  FIXTURE_READ_ONLY_PATHS,
  jsonOf,
  newMarker,
  pidsWithMarker,
  TSX_LOADER,
  waitFor,
} from '../fixtures/stdio/index.js';
import { TEST_ADMIN_TOKEN } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Harness, startHarness, textOf } from './helpers.js';

const HOSTILE = fileURLToPath(new URL('../fixtures/stdio/hostile-server.mjs', import.meta.url));
const HOST = fileURLToPath(new URL('../fixtures/stdio/gateway-host.ts', import.meta.url));
const SLOW = { timeout: 120_000 };
const BWRAP = findBwrap() !== undefined;
const ROOT = process.getuid?.() === 0;

type Attempt = { ok: boolean; value?: unknown; error?: string };

describe.skipIf(!BWRAP)('stdio sandbox', () => {
  let h: Harness;
  const folders: string[] = [];

  beforeEach(async () => {
    h = await startHarness(sqliteTarget);
  });

  afterEach(async () => {
    const markers = [...h.markers];
    await h.close();
    const leftovers = await cleanUp([], markers);
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
    expect(leftovers).toEqual({});
  });

  const installHostile = async (id: string, sandbox: Record<string, unknown>, roots: string[] = []) => {
    const marker = newMarker();
    h.markers.push(marker);
    const installed = await h.gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id,
          name: id,
          transport: 'stdio',
          command: process.execPath,
          args: [HOSTILE, `--gatehouse-test-marker=${marker}`],
          toolPolicy: { defaultTier: 'allow' },
          sandbox: { readOnlyPaths: FIXTURE_READ_ONLY_PATHS, ...sandbox },
        },
      },
    });
    expect(installed.statusCode, installed.body).toBe(201);
    if (roots.length > 0) {
      const patched = await h.gw.request('PATCH', `/api/mcp/servers/${id}/config`, { body: { workspaceRoots: roots } });
      expect(patched.statusCode, patched.body).toBe(200);
    }
    await h.gw.request('POST', `/api/mcp/servers/${id}/test`);
    const started = await h.gw.request('POST', `/api/mcp/servers/${id}/start`);
    expect(started.statusCode, started.body).toBe(200);
    return { marker, process: started.json().process };
  };

  const attack = async (id: string, args: Record<string, unknown>): Promise<Record<string, Attempt>> => {
    const agent = await h.agent(id);
    return jsonOf(await agent.callTool({ name: 'attack', arguments: args })) as Record<string, Attempt>;
  };

  it('a hostile server reads, writes, signals and forks nothing of the gateway', SLOW, async () => {
    const settings = await h.gw.request('PATCH', '/api/settings', { body: { 'stdio.limits.processes': 64 } });
    expect(settings.statusCode, settings.body).toBe(200);
    // Another server, so there is another state folder to reach for.
    await h.installPlain('victim');
    expect((await h.gw.request('POST', '/api/mcp/servers/victim/start')).statusCode).toBe(200);
    const victimState = join(h.gw.dataDir, 'stdio-state', 'victim');
    expect(statSync(victimState).mode & 0o777).toBe(0o700);

    const root = mkdtempSync(join(tmpdir(), 'gh-sandbox-root-'));
    folders.push(root);
    chmodSync(root, 0o777); // the child's own uid must be able to write its workspace root
    const { marker, process: view } = await installHostile('hostile', {}, [root]);
    expect(view.sandboxed).toBe(true);
    expect(view.sandbox).toMatchObject({ network: 'host', cwd: root });
    expect(view.sandbox.limits.dataBytes).toBeGreaterThan(0);
    expect(view.sandbox.limits.openFiles).toBeGreaterThan(0);
    if (ROOT) {
      expect(view.sandbox.uid).toBeGreaterThanOrEqual(200_000);
      expect(view.sandbox.limits.processes).toBe(64);
    }
    const hostileState = join(h.gw.dataDir, 'stdio-state', 'hostile');
    expect(statSync(hostileState).mode & 0o777).toBe(0o700);

    const base = new URL(h.base);
    const report = await attack('hostile', {
      gatewayPid: process.pid,
      reads: {
        dataDir: h.gw.dataDir,
        key: join(h.gw.dataDir, 'secret.key'),
        database: join(h.gw.dataDir, 'gatehouse.db'),
        otherState: victimState,
        ownStateOnHost: hostileState,
        workingTree: join(process.cwd(), 'src'),
        shadow: '/etc/shadow',
      },
      writes: {
        usr: '/usr/pwned',
        etc: '/etc/pwned',
        dataDir: join(h.gw.dataDir, 'pwned'),
        tmpOfHost: join(dirname(root), 'pwned-by-sandbox'),
        root: join(root, 'allowed.txt'),
        home: '/home/mcp/allowed.txt',
      },
      connect: { host: base.hostname, port: Number(base.port) },
      escapee: true,
    });

    // Who it is: never root when the gateway is root; its cwd is its first workspace root.
    expect(report.whoami?.ok).toBe(true);
    const who = report.whoami?.value as { uid: number[]; gid: number[]; pid: number; ppid: number; cwd: string };
    if (ROOT) {
      expect(who.uid.every((u) => u === view.sandbox.uid)).toBe(true);
      expect(who.gid.every((g) => g === view.sandbox.uid)).toBe(true);
    }
    expect(who.cwd).toBe(root);
    // Its parent is the sandbox's init, not the gateway: no environment to read; no gateway in /proc.
    expect(who.ppid).toBe(1);
    expect(report.ppid_environ?.ok).toBe(false);
    const parentCmdline = String(report.ppid_cmdline?.value ?? '');
    expect(parentCmdline).not.toContain(h.gw.dataDir);
    expect(parentCmdline).not.toContain(TEST_ADMIN_TOKEN);
    expect(report.gateway_environ?.ok).toBe(false);
    const pids = report.proc_list?.value as number[];
    expect(pids).not.toContain(process.pid);
    expect(pids.length).toBeLessThan(10);
    for (const name of ['dataDir', 'key', 'database', 'otherState', 'ownStateOnHost', 'workingTree', 'shadow']) {
      expect(report[`read:${name}`], name).toMatchObject({ ok: false });
    }
    // (Its /tmp is a tmpfs of its own: a write there lands nowhere on the host.)
    for (const name of ['usr', 'etc', 'dataDir']) {
      expect(report[`write:${name}`], name).toMatchObject({ ok: false });
    }
    expect(existsSync(join(h.gw.dataDir, 'pwned'))).toBe(false);
    expect(existsSync(join(dirname(root), 'pwned-by-sandbox'))).toBe(false);
    // What it may write: its workspace root and its HOME (the state folder).
    expect(report['write:root']).toMatchObject({ ok: true });
    expect(existsSync(join(root, 'allowed.txt'))).toBe(true);
    expect(report['write:home']).toMatchObject({ ok: true });
    expect(existsSync(join(hostileState, 'allowed.txt'))).toBe(true);
    // The gateway's pid does not exist in its namespace.
    expect(report.kill_gateway).toMatchObject({ ok: false, error: 'ESRCH' });
    // Network "host": the control case of the "none" test below.
    expect(report.connect).toMatchObject({ ok: true, value: 'connected' });
    // With network "host" a tool's failed connection is its own business: not typed as a sandbox denial.
    const closedPort = await (await h.agent('hostile')).callTool({
      name: 'reach',
      arguments: { host: '127.0.0.1', port: 1 },
    });
    expect(closedPort.isError).toBe(true);
    expect((await h.process('hostile')).lastError).toBeNull();
    expect(report.escapee?.ok).toBe(true);
    // The setsid grandchild lives, for now.
    expect(pidsWithMarker(marker).length).toBe(2);

    if (ROOT) {
      // A fork bomb stops at the process limit of the server's own uid (the server may not survive it).
      const bombed = await attack('hostile', { forkCount: 100 });
      const bomb = bombed.fork_bomb?.value as { started: number; error: string | null };
      expect(bomb.started).toBeLessThan(64);
      expect(bomb.error).toBe('EAGAIN');
    }

    // The gateway kept serving, and the victim too.
    expect((await h.gw.request('GET', '/api/mcp/servers')).statusCode).toBe(200);
    const victim = await h.agent('victim');
    expect(textOf(await victim.callTool({ name: 'echo', arguments: { text: 'still here' } }))).toBe('still here');

    // The setsid grandchild dies with the sandbox.
    expect((await h.gw.request('POST', '/api/mcp/servers/hostile/stop')).statusCode).toBe(200);
    expect(await waitFor(() => pidsWithMarker(marker, { wrappers: true }).length === 0, 5000)).toBe(true);

    const logs = (await h.gw.request('GET', '/api/mcp/servers/hostile/logs')).json();
    expect(logs.events.some((e: { message: string }) => e.message.includes('in its sandbox (network host'))).toBe(true);
  });

  it('with network "none" a connection fails inside the sandbox', SLOW, async () => {
    // A workspace root its uid cannot write (root's, mode 0700) is said on its log at start.
    const root = mkdtempSync(join(tmpdir(), 'gh-sandbox-closed-'));
    folders.push(root);
    await installHostile('offline', { network: 'none' }, [root]);
    const view = (await h.gw.request('GET', '/api/mcp/servers/offline/process')).json().process;
    expect(view.sandbox.network).toBe('none');
    if (ROOT) {
      const logs = (await h.gw.request('GET', '/api/mcp/servers/offline/logs')).json();
      expect(
        logs.events.some(
          (e: { kind: string; message: string }) =>
            e.kind === 'sandbox' && e.message.includes(`cannot write the workspace root ${root}`),
        ),
      ).toBe(true);
    }
    const base = new URL(h.base);
    const report = await attack('offline', { connect: { host: base.hostname, port: Number(base.port) } });
    expect(report.connect?.ok).toBe(false);
    expect(['ENETUNREACH', 'ECONNREFUSED', 'EHOSTUNREACH']).toContain(report.connect?.error);

    // An ordinary tool that needs the network fails; the operator sees why: typed, and on the log once.
    expect((await h.process('offline')).lastError).toBeNull();
    const agent = await h.agent('offline');
    for (let i = 0; i < 2; i++) {
      const failed = await agent.callTool({
        name: 'reach',
        arguments: { host: base.hostname, port: Number(base.port) },
      });
      expect(failed.isError).toBe(true);
    }
    const lastError = (await h.process('offline')).lastError ?? '';
    expect(lastError.startsWith('sandbox.network_denied: ')).toBe(true);
    expect(lastError).toMatch(/ENETUNREACH|ECONNREFUSED|EHOSTUNREACH/);
    const events = (await h.gw.request('GET', '/api/mcp/servers/offline/logs')).json().events as {
      kind: string;
      message: string;
      data: { code?: string };
    }[];
    const denied = events.filter((e) => e.kind === 'sandbox' && e.data?.code === 'sandbox.network_denied');
    expect(denied).toHaveLength(1);
    expect(denied[0]?.message).toContain('network is off (sandbox.network "none")');
  });

  it(
    'with network "none" a server that connects at start fails typed, and its log says the network is off',
    SLOW,
    async () => {
      const base = new URL(h.base);
      const marker = newMarker();
      h.markers.push(marker);
      const args = [HOSTILE, `--gatehouse-test-marker=${marker}`, `--connect-at-start=${base.hostname}:${base.port}`];
      for (const [id, network] of [
        ['needs-net', 'none'],
        ['has-net', 'host'],
      ] as const) {
        const installed = await h.gw.request('POST', '/api/mcp/install', {
          body: {
            manifest: {
              id,
              name: id,
              transport: 'stdio',
              command: process.execPath,
              args,
              toolPolicy: { defaultTier: 'allow' },
              sandbox: { readOnlyPaths: FIXTURE_READ_ONLY_PATHS, network },
            },
          },
        });
        expect(installed.statusCode, installed.body).toBe(201);
      }
      // The test's own child (not supervised) fails alike, and the record's lastError is typed too.
      const tested = (await h.gw.request('POST', '/api/mcp/servers/needs-net/test')).json();
      expect(tested.error?.code, JSON.stringify(tested)).toBe('sandbox.network_denied');
      const detail = (await h.gw.request('GET', '/api/mcp/servers/needs-net')).json();
      expect(String(detail.lastError).startsWith('sandbox.network_denied: ')).toBe(true);
      // The control: with network "host" the same server reaches the gateway and starts.
      expect((await h.gw.request('POST', '/api/mcp/servers/has-net/start')).statusCode).toBe(200);
      const refused = await h.gw.request('POST', '/api/mcp/servers/needs-net/start');
      expect(refused.statusCode).toBeGreaterThanOrEqual(500);
      const view = await h.process('needs-net');
      expect(view.lastError?.startsWith('sandbox.network_denied: '), view.lastError ?? '').toBe(true);
      expect(view.lastError).toContain('fetching its registry failed');
      const events = (await h.gw.request('GET', '/api/mcp/servers/needs-net/logs')).json().events as {
        kind: string;
        message: string;
      }[];
      expect(
        events.some(
          (e) => e.kind === 'process' && e.message.startsWith('Start failed') && e.message.includes('network is off'),
        ),
      ).toBe(true);
      await h.gw.request('POST', '/api/mcp/servers/needs-net/stop');
      await h.gw.request('POST', '/api/mcp/servers/has-net/stop');
    },
  );

  it(
    'with network "none" a child that prints a sealed env value in its network error leaves it out of lastError',
    SLOW,
    async () => {
      const secret = 'sk-live-0123456789abcdef';
      const marker = newMarker();
      h.markers.push(marker);
      // A Python `requests` failure as printed, the API key in the URL it tried.
      const script = [
        'process.stderr.write(',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the child's own template literal (node -e)
        "  `requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/items?api_key=${process.env.WEATHER_API_KEY} (Caused by NameResolutionError(\"Failed to resolve 'api.example.com' ([Errno -3] Temporary failure in name resolution)\"))\\n`,",
        ');',
        'process.exit(1);',
      ].join('\n');
      const installed = await h.gw.request('POST', '/api/mcp/install', {
        body: {
          manifest: {
            id: 'weather',
            name: 'weather',
            transport: 'stdio',
            command: process.execPath,
            args: ['-e', script, '--', `--gatehouse-test-marker=${marker}`],
            env: { WEATHER_API_KEY: secret },
            toolPolicy: { defaultTier: 'allow' },
            sandbox: { readOnlyPaths: FIXTURE_READ_ONLY_PATHS, network: 'none' },
          },
        },
      });
      expect(installed.statusCode, installed.body).toBe(201);
      // The test's own child: typed, the line quoted, the key not.
      const tested = await h.gw.request('POST', '/api/mcp/servers/weather/test');
      expect(tested.json().error?.code, tested.body).toBe('sandbox.network_denied');
      expect(tested.body).toContain('api_key=[redacted]');
      expect(tested.body).not.toContain(secret);
      const detail = await h.gw.request('GET', '/api/mcp/servers/weather');
      expect(String(detail.json().lastError)).toMatch(/^sandbox\.network_denied: .*api_key=\[redacted\]/);
      expect(detail.body).not.toContain(secret);
      // The supervised child: a failed start, the same.
      const refused = await h.gw.request('POST', '/api/mcp/servers/weather/start');
      expect(refused.statusCode).toBeGreaterThanOrEqual(500);
      expect(refused.body).not.toContain(secret);
      const view = await h.process('weather');
      expect(view.lastError?.startsWith('sandbox.network_denied: '), view.lastError ?? '').toBe(true);
      expect(view.lastError).toContain('api_key=[redacted]');
      expect(view.lastError).not.toContain(secret);
      for (const path of [
        '/api/mcp/servers/weather',
        '/api/mcp/servers/weather/process',
        '/api/mcp/servers/weather/logs',
      ]) {
        expect((await h.gw.request('GET', path)).body, path).not.toContain(secret);
      }
      await h.gw.request('POST', '/api/mcp/servers/weather/stop');
    },
  );

  it('servers test warns of a workspace root the child cannot write, over REST and in the CLI', SLOW, async () => {
    const open = mkdtempSync(join(tmpdir(), 'gh-sandbox-open-'));
    const closed = mkdtempSync(join(tmpdir(), 'gh-sandbox-closed-'));
    folders.push(open, closed);
    chmodSync(open, 0o777);
    chmodSync(closed, 0o500); // read-only for everyone but root (its owner when the gateway is root)
    await h.installPlain('roots');
    const setRoots = async (roots: string[]) => {
      const patched = await h.gw.request('PATCH', '/api/mcp/servers/roots/config', { body: { workspaceRoots: roots } });
      expect(patched.statusCode, patched.body).toBe(200);
    };
    type Answer = {
      ok: boolean;
      error: { code: string } | null;
      warnings: { code: string; message: string; details: { root: string; missing: boolean } }[];
    };
    const test = async () => {
      const tested = await h.gw.request('POST', '/api/mcp/servers/roots/test');
      expect(tested.statusCode, tested.body).toBe(200);
      return tested.json() as Answer;
    };

    await setRoots([open, closed]);
    const answer = await test();
    // The handshake works (it may read the closed root); the child's uid cannot write it.
    expect(answer.ok, JSON.stringify(answer)).toBe(true);
    expect(answer.warnings).toHaveLength(1);
    expect(answer.warnings[0]).toMatchObject({
      code: 'stdio.workspace_root_unwritable',
      details: { root: closed, missing: false },
    });
    expect(answer.warnings[0]?.message).toContain('chown or chmod');

    const cli = await runCli(['servers', 'test', 'roots'], {
      GATEHOUSE_URL: h.base,
      GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN,
    });
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(`warning  stdio.workspace_root_unwritable: The workspace root ${closed} is read-only`);

    // Writable again, and a root that does not exist (the sandbox cannot mount it: the test fails, and says why).
    chmodSync(closed, 0o777);
    const missing = join(open, 'not-created');
    await setRoots([open, closed, missing]);
    const again = await test();
    expect(again.ok).toBe(false);
    expect(again.warnings.map((w) => w.details)).toEqual([{ root: missing, missing: true, uid: expect.anything() }]);
    expect(again.warnings[0]?.message).toContain('does not exist');
  });

  it(
    'stdio.allowedCommands refuses a command at install, configure and start; sandbox is admin-only',
    SLOW,
    async () => {
      const manifest = { id: 'shell', name: 'shell', transport: 'stdio', command: '/bin/sh', args: ['-c', 'exit 0'] };
      const refused = await h.gw.request('POST', '/api/mcp/install', { body: { manifest } });
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.json().error.code).toBe('stdio.command_not_allowed');
      // A lookalike path is not the allowed name.
      const lookalike = await h.gw.request('POST', '/api/mcp/install', {
        body: { manifest: { ...manifest, id: 'fake-node', command: join(tmpdir(), 'node') } },
      });
      expect(lookalike.json().error?.code).toBe('stdio.command_not_allowed');

      const marker = await h.installPlain('plain');
      const changed = await h.gw.request('PATCH', '/api/mcp/servers/plain/config', { body: { command: 'bash' } });
      expect(changed.statusCode).toBe(403);
      expect(changed.json().error.code).toBe('stdio.command_not_allowed');

      // Narrowing the list (audited) stops the next start, with an event on the server's log.
      const narrowed = await h.gw.request('PATCH', '/api/settings', { body: { 'stdio.allowedCommands': ['npx'] } });
      expect(narrowed.statusCode, narrowed.body).toBe(200);
      const start = await h.gw.request('POST', '/api/mcp/servers/plain/start');
      expect(start.statusCode).toBe(403);
      expect(start.json().error.code).toBe('stdio.command_not_allowed');
      expect(pidsWithMarker(marker)).toEqual([]);
      const logs = (await h.gw.request('GET', '/api/mcp/servers/plain/logs')).json();
      expect(logs.events.some((e: { kind: string; message: string }) => e.kind === 'sandbox')).toBe(true);
      const audit = (await h.gw.request('GET', '/api/audit?kind=admin')).json();
      expect(JSON.stringify(audit)).toContain('stdio.allowedCommands');
      await h.gw.request('PATCH', '/api/settings', { body: { 'stdio.allowedCommands': ['node'] } });

      // The escape hatch and the sandbox fields are the admin's: an operator is refused.
      const operator = (await h.gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'op' } })).json()
        .token as string;
      const byOperator = await h.gw.request('PATCH', '/api/mcp/servers/plain/config', {
        body: { sandbox: { mode: 'off' } },
        token: operator,
      });
      expect(byOperator.statusCode).toBe(403);
      const byAdmin = await h.gw.request('PATCH', '/api/mcp/servers/plain/config', {
        body: { sandbox: { mode: 'off' } },
      });
      expect(byAdmin.statusCode, byAdmin.body).toBe(200);
      const started = await h.gw.request('POST', '/api/mcp/servers/plain/start');
      expect(started.statusCode, started.body).toBe(200);
      expect(started.json().process).toMatchObject({ sandboxed: false, sandbox: null });
      await h.gw.request('POST', '/api/mcp/servers/plain/stop');
    },
  );
});

describe('stdio sandbox without bubblewrap', () => {
  it('refuses to start with an error that says how to install it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gh-no-bwrap-'));
    try {
      const settings = { current: async () => (await import('../../src/settings/keys.js')).DEFAULT_SETTINGS };
      const planner = new SandboxPlanner({
        mode: 'on',
        uidBase: 200_000,
        dataDir,
        settings: settings as never,
        findBwrap: () => undefined,
      });
      const refused = await planner.prepare('x', 'node', {}).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: 'stdio.sandbox_unavailable' });
      expect((refused as Error).message).toContain('apt-get install bubblewrap');
      expect((refused as Error).message).toContain('GATEHOUSE_STDIO_SANDBOX=off');
      // Off for this server (the admin's escape hatch), or off for the gateway: no bubblewrap needed.
      expect((await planner.prepare('x', 'node', { sandbox: { mode: 'off' } })).sandbox).toBeUndefined();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!BWRAP)('a sandboxed child and a gateway killed by SIGKILL', () => {
  it('no process of the fixture remains, before or after the next start', SLOW, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gh-sandbox-kill-'));
    const marker = newMarker();
    try {
      const host = spawn(process.execPath, ['--import', TSX_LOADER, HOST, dataDir, marker, 'sandbox=on'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      host.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
      });
      const signal = await new Promise((resolve) => host.on('close', (_code, s) => resolve(s)));
      expect(signal, out).toBe('SIGKILL');
      // `--die-with-parent`: the sandbox (deaf server, grandchild) went with its gateway.
      expect(await waitFor(() => pidsWithMarker(marker, { wrappers: true }).length === 0, 5000)).toBe(true);
      const gateway = await createGateway(
        loadConfig({
          env: {
            NODE_ENV: 'test',
            GATEHOUSE_DATA_DIR: dataDir,
            GATEHOUSE_SECRET_KEY: 'a1'.repeat(32),
            GATEHOUSE_LOG_LEVEL: 'silent',
            GATEHOUSE_LIST_TIMEOUT_MS: '20000',
          },
        }),
      );
      await gateway.supervisor.stop('orphan').catch(() => {});
      await gateway.app.close();
      expect(pidsWithMarker(marker, { wrappers: true })).toEqual([]);
    } finally {
      const leftovers = await cleanUp([], [marker]);
      rmSync(dataDir, { recursive: true, force: true });
      expect(leftovers).toEqual({});
    }
  });
});

/** The project whose node_modules hold them (the real folder behind the worktree's link). */
const PROJECT = dirname(FIXTURE_READ_ONLY_PATHS[FIXTURE_READ_ONLY_PATHS.length - 1] as string);

/** Real third-party servers, when installed as devDependencies (they are skipped otherwise): their bin. */
function packageBin(name: string): string | undefined {
  const folder = join(PROJECT, 'node_modules', name);
  try {
    const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { bin?: unknown };
    const bin = typeof manifest.bin === 'string' ? manifest.bin : Object.values(manifest.bin ?? {})[0];
    return typeof bin === 'string' ? join(folder, bin) : undefined;
  } catch {
    return undefined;
  }
}
const FILESYSTEM = packageBin('@modelcontextprotocol/server-filesystem');
const MEMORY = packageBin('@modelcontextprotocol/server-memory');
if (!FILESYSTEM || !MEMORY) {
  process.stderr.write(
    'sandbox.test: @modelcontextprotocol/server-filesystem and/or server-memory are not installed; their tests are skipped\n',
  );
}
/** The memory server keeps its graph in its HOME, the state folder (its package folder is read-only). */
const MEMORY_ENV = { MEMORY_FILE_PATH: '/home/mcp/memory.jsonl' };

describe.skipIf(!BWRAP)('real third-party servers, sandboxed', () => {
  let h: Harness;
  const folders: string[] = [];
  beforeEach(async () => {
    h = await startHarness(sqliteTarget);
  });
  afterEach(async () => {
    await h.close();
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  const install = async (
    id: string,
    command: string,
    args: string[],
    roots: string[] = [],
    env: Record<string, string> = {},
    readOnlyPaths: string[] = [],
  ) => {
    const response = await h.gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id,
          name: id,
          transport: 'stdio',
          command,
          args,
          toolPolicy: { defaultTier: 'allow' },
          env,
          sandbox: { readOnlyPaths: [...FIXTURE_READ_ONLY_PATHS, ...readOnlyPaths] },
        },
      },
    });
    expect(response.statusCode, response.body).toBe(201);
    if (roots.length > 0) {
      await h.gw.request('PATCH', `/api/mcp/servers/${id}/config`, { body: { workspaceRoots: roots } });
    }
    const started = await h.gw.request('POST', `/api/mcp/servers/${id}/start`);
    expect(started.statusCode, started.body).toBe(200);
    expect(started.json().process.sandboxed).toBe(true);
  };

  it.skipIf(!FILESYSTEM)('@modelcontextprotocol/server-filesystem works on its workspace root', SLOW, async () => {
    const root = mkdtempSync(join(tmpdir(), 'gh-fs-root-'));
    folders.push(root);
    chmodSync(root, 0o777);
    await install('files', process.execPath, [FILESYSTEM as string, root], [root]);
    const agent = await h.agent('files');
    await agent.callTool({ name: 'write_file', arguments: { path: join(root, 'a.txt'), content: 'hello' } });
    expect(existsSync(join(root, 'a.txt'))).toBe(true);
    const read = await agent.callTool({ name: 'read_text_file', arguments: { path: join(root, 'a.txt') } });
    expect(textOf(read)).toContain('hello');
  });

  it.skipIf(!MEMORY)('@modelcontextprotocol/server-memory keeps its graph in its state folder', SLOW, async () => {
    await install('memory', process.execPath, [MEMORY as string], [], MEMORY_ENV);
    const agent = await h.agent('memory');
    await agent.callTool({
      name: 'create_entities',
      arguments: { entities: [{ name: 'gatehouse', entityType: 'project', observations: ['sandboxed'] }] },
    });
    const graph = await agent.callTool({ name: 'read_graph', arguments: {} });
    expect(JSON.stringify(graph)).toContain('sandboxed');
    // Written where it may write: its state folder on the host.
    expect(existsSync(join(h.gw.dataDir, 'stdio-state', 'memory', 'memory.jsonl'))).toBe(true);
  });

  it.skipIf(!MEMORY)('npx runs a locally installed package, network "host", nothing downloaded', SLOW, async () => {
    // `--prefix` points npx at the project whose node_modules hold the package (mounted read-only).
    await install(
      'npx-memory',
      'npx',
      ['--prefix', PROJECT, '--no', '@modelcontextprotocol/server-memory'],
      [],
      MEMORY_ENV,
      [join(PROJECT, 'package.json')],
    );
    const agent = await h.agent('npx-memory');
    const graph = await agent.callTool({ name: 'read_graph', arguments: {} });
    expect(graph.isError).not.toBe(true);
  });
});
