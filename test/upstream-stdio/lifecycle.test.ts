/**
 * The stdio spawner with real SDK-built stdio servers: start → list → call → stop, environment
 * isolation, stderr lines, spawn failures, and process-group reaping (grandchildren, SIGTERM
 * ignorers, descendants that left the group). Every test scans `/proc` for its marker afterwards.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import {
  connectStdio,
  listGroupPids,
  liveStdioChildren,
  processAlive,
  processGroupAlive,
  procStartTime,
  type StdioChild,
  spawnStdio,
} from '../../src/upstream/stdio/index.js';
import { cleanUp, fixtureSpec, jsonOf, newMarker, pidsWithMarker, waitFor } from '../fixtures/stdio/index.js';

const markers: string[] = [];
const children: StdioChild[] = [];

function marker(): string {
  const m = newMarker();
  markers.push(m);
  return m;
}

async function connect(flags: string[] = [], extra: Parameters<typeof fixtureSpec>[2] = {}) {
  const connection = await connectStdio(fixtureSpec(marker(), flags, extra), { timeoutMs: 20_000 });
  children.push(connection.child);
  return connection;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  return jsonOf(await client.callTool({ name, arguments: args }));
}

afterEach(async () => {
  // Whatever a test did, nothing it started may outlive it (and a failing test leaves nothing either).
  expect(await cleanUp(children, markers)).toEqual({});
});

describe('start, list, call, stop', () => {
  it('serves tools from a real stdio server and stops cleanly', async () => {
    const { client, child, era } = await connect();
    expect(era.kind).toBe('modern');
    expect(child.pid).toBeGreaterThan(1);
    expect(child.pgid).toBe(child.pid);
    expect(child.procStartTime).toBe(procStartTime(child.pid));
    expect(child.running).toBe(true);
    expect(liveStdioChildren().some((c) => c.pid === child.pid)).toBe(true);

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'add', 'env', 'pids']));
    const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    expect(echoed.content).toEqual([{ type: 'text', text: 'hello' }]);
    const added = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    expect(added.structuredContent).toEqual({ sum: 5 });
    // It runs in its own process group, as its leader.
    const pids = await call(client, 'pids');
    expect(pids.pid).toBe(child.pid);
    expect(listGroupPids(child.pgid)).toContain(child.pid);

    const info = await child.stop(2000);
    expect(info).toMatchObject({ pid: child.pid, reason: 'stopped', killed: false, survivors: 0 });
    expect(info.lastError).toBeUndefined();
    expect(child.lastError).toBeUndefined();
    expect(processGroupAlive(child.pgid)).toBe(false);
    expect(processAlive(child.pid)).toBe(false);
    expect(liveStdioChildren().some((c) => c.pid === child.pid)).toBe(false);
    // Idempotent: the same exit, at once.
    expect(await child.stop()).toBe(info);
    expect(await child.exited).toBe(info);
    expect(child.exitInfo).toBe(info);
  });

  it('closing the client stops the child (transport.close)', async () => {
    const { client, child } = await connect();
    await client.close();
    const info = await child.exited;
    expect(info.reason).toBe('stopped');
    expect(processGroupAlive(child.pgid)).toBe(false);
  });

  it('calls onExit once with the final exit', async () => {
    const exits: unknown[] = [];
    const { child } = await connect([], { onExit: (info) => exits.push(info) });
    const info = await child.stop(1000);
    await child.stop(1000);
    expect(exits).toEqual([info]);
  });
});

describe('environment', () => {
  it("never lets a child see Gatehouse's own variables, only the allowlist and the declared env", async () => {
    const planted = {
      GATEHOUSE_SECRET_KEY: 'sentinel-secret-key-0123456789',
      MCP_TOOL_TOKEN: 'sentinel-tool-token',
      MCP_SECRET_GITHUB: 'sentinel-secret-ref',
      DATABASE_URL: 'postgres://sentinel@db/x',
    };
    const saved = Object.fromEntries(Object.keys(planted).map((k) => [k, process.env[k]]));
    Object.assign(process.env, planted);
    try {
      const { client } = await connect([], { env: { DECLARED_VAR: 'declared-value', API_KEY: 'k' } });
      for (const name of Object.keys(planted)) {
        expect(await call(client, 'env', { name }), name).toEqual({ visible: false, value: null });
      }
      expect(await call(client, 'env', { name: 'DECLARED_VAR' })).toEqual({ visible: true, value: 'declared-value' });
      const { names } = (await call(client, 'env_names')) as { names: string[] };
      const allowed = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'DECLARED_VAR', 'API_KEY'];
      expect(names.filter((n) => !allowed.includes(n))).toEqual([]);
      expect(names).toContain('PATH');
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  it('refuses an env name that cannot be passed, without echoing the value', async () => {
    const error = await spawnStdio(fixtureSpec(marker(), [], { env: { 'BAD=NAME': 'secret-value' } })).catch((e) => e);
    expect(error).toBeInstanceOf(GatehouseError);
    expect(error.code).toBe('validation_error');
    expect(JSON.stringify(error.toBody())).not.toContain('secret-value');
    const nul = await spawnStdio(fixtureSpec(marker(), [], { env: { OK: 'a\0b' } })).catch((e) => e);
    expect(nul.code).toBe('validation_error');
  });
});

describe('spawn failures and early exits', () => {
  it('a missing command is upstream_unreachable, typed', async () => {
    const error = await spawnStdio({
      command: '/nonexistent/gatehouse-no-such-binary',
      args: [],
      env: {},
      label: 'missing',
    }).catch((e) => e);
    expect(error).toBeInstanceOf(GatehouseError);
    expect(error.code).toBe('upstream_unreachable');
    expect(error.details).toMatchObject({ reason: 'spawn_failed', errno: 'ENOENT' });
    const viaConnect = await connectStdio(
      { command: '/nonexistent/gatehouse-no-such-binary', args: [], env: {}, label: 'missing' },
      { timeoutMs: 5000 },
    ).catch((e) => e);
    expect(viaConnect.code).toBe('upstream_unreachable');
  });

  it('a missing cwd is upstream_unreachable', async () => {
    const error = await spawnStdio(fixtureSpec(marker(), [], { cwd: '/nonexistent/dir' })).catch((e) => e);
    expect(error.code).toBe('upstream_unreachable');
  });

  it('a server that exits before answering fails the connect typed, with its exit in lastError', async () => {
    const spec = fixtureSpec(marker(), ['--exit-at-start=7', '--era=legacy']);
    const error = await connectStdio(spec, { timeoutMs: 15_000, era: { kind: 'legacy' } }).catch((e) => e);
    expect(error).toBeInstanceOf(GatehouseError);
    expect(error.code).toBe('upstream_unreachable');
    expect(error.details).toMatchObject({ reason: 'child_exited', exitCode: 7 });
    expect(error.message).toContain('exited with code 7');
  });

  it('delivers stderr as lines, capped, and keeps the last ones', async () => {
    const lines: string[] = [];
    const { client, child } = await connect(['--stderr=3'], {
      onStderrLine: (line) => lines.push(line),
      maxStderrLineBytes: 64,
    });
    await call(client, 'stderr', { lines: ['hello from stderr', 'y'.repeat(500)] });
    expect(await waitFor(() => lines.length >= 5, 2000)).toBe(true);
    expect(lines.slice(0, 3)).toEqual(['fixture stderr line 0', 'fixture stderr line 1', 'fixture stderr line 2']);
    expect(lines[3]).toBe('hello from stderr');
    expect(lines[4]).toBe(`${'y'.repeat(64)} [truncated]`);
    expect(child.recentStderr()).toEqual(lines);
  });

  it("redacts the declared env's values in stderr lines, kept and delivered (the tail can become lastError)", async () => {
    const secret = 'sk-live-0123456789abcdef';
    const lines: string[] = [];
    const { client, child } = await connect([], {
      env: { API_KEY: secret, SHORT: 'abc' },
      onStderrLine: (line) => lines.push(line),
    });
    const printed = `Max retries exceeded with url: /v1/items?api_key=${secret} (Temporary failure in name resolution) abc`;
    await call(client, 'stderr', { lines: [printed] });
    expect(await waitFor(() => lines.length >= 1, 2000)).toBe(true);
    const expected =
      'Max retries exceeded with url: /v1/items?api_key=[redacted] (Temporary failure in name resolution) abc';
    expect(child.recentStderr()).toEqual([expected]);
    expect(lines).toEqual([expected]);
  });
});

describe('process-group reaping', () => {
  it('stops a grandchild with its parent', async () => {
    const m = marker();
    const connection = await connectStdio(fixtureSpec(m, ['--grandchild']), { timeoutMs: 20_000 });
    children.push(connection.child);
    const { grandchild } = (await call(connection.client, 'pids')) as { grandchild: number };
    expect(grandchild).toBeGreaterThan(1);
    expect(processAlive(grandchild)).toBe(true);
    expect(listGroupPids(connection.child.pgid).sort()).toEqual([connection.child.pid, grandchild].sort());
    expect(pidsWithMarker(m).length).toBe(2);

    const info = await connection.child.stop(2000);
    expect(info.survivors).toBe(0);
    expect(processAlive(grandchild)).toBe(false);
    expect(pidsWithMarker(m)).toEqual([]);
  });

  it('reaps what a child left behind when it exits by itself', async () => {
    const m = marker();
    const connection = await connectStdio(fixtureSpec(m, ['--grandchild']), { timeoutMs: 20_000 });
    children.push(connection.child);
    const { grandchild } = (await call(connection.client, 'pids')) as { grandchild: number };
    await connection.client.callTool({ name: 'crash', arguments: { code: 9 } }).catch(() => {});
    const info = await connection.child.exited;
    expect(info.reason).toBe('exited');
    expect(info.code).toBe(9);
    expect(info.lastError).toContain('exited with code 9');
    expect(processAlive(grandchild)).toBe(false);
    expect(pidsWithMarker(m)).toEqual([]);
  });

  it('SIGKILLs a child that ignores SIGTERM after the grace period', async () => {
    const { child } = await connect(['--ignore-sigterm']);
    const started = Date.now();
    const info = await child.stop(300);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(info).toMatchObject({ killed: true, signal: 'SIGKILL', survivors: 0, reason: 'stopped' });
    expect(processGroupAlive(child.pgid)).toBe(false);
  });

  it('a second stop with a shorter grace brings the SIGKILL forward', async () => {
    const { child } = await connect(['--ignore-sigterm']);
    const started = Date.now();
    const patient = child.stop(60_000);
    const hurried = child.stop(200);
    expect(await hurried).toBe(await patient);
    expect(Date.now() - started).toBeLessThan(5000);
    expect((await patient).killed).toBe(true);
  });

  it('SIGKILLs a grandchild that ignores SIGTERM even when its parent obeys', async () => {
    const m = marker();
    const connection = await connectStdio(fixtureSpec(m, ['--grandchild', '--grandchild-ignores-term']), {
      timeoutMs: 20_000,
    });
    children.push(connection.child);
    const { grandchild } = (await call(connection.client, 'pids')) as { grandchild: number };
    const info = await connection.child.stop(300);
    expect(info.killed).toBe(true);
    expect(info.survivors).toBe(0);
    expect(processAlive(grandchild)).toBe(false);
    expect(pidsWithMarker(m)).toEqual([]);
  });

  it('also ends a descendant that left the process group (setsid)', async () => {
    const m = marker();
    const connection = await connectStdio(fixtureSpec(m), { timeoutMs: 20_000 });
    children.push(connection.child);
    // A descendant in its own session: not reachable through the group, only through the tree.
    const { pid } = (await call(connection.client, 'spawn_escapee')) as { pid: number };
    expect(processAlive(pid)).toBe(true);
    expect(listGroupPids(connection.child.pgid)).not.toContain(pid);
    await connection.child.stop(300);
    expect(await waitFor(() => !processAlive(pid), 2000)).toBe(true);
    expect(pidsWithMarker(m)).toEqual([]);
  });
});
