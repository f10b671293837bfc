/**
 * The stdio supervisor end to end, on both stores: real stdio MCP servers (SDK-built fixtures) run
 * as supervised children of a real gateway, started and stopped through the REST routes, called by
 * SDK agents through the hub (`/mcp/s/{id}`) over real HTTP. Every test ends by checking that no
 * process carrying one of its markers is left.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { processAlive } from '../../src/upstream/stdio/index.js';
import { cleanUp, jsonOf, nsPid, pidsWithMarker, waitFor } from '../fixtures/stdio/index.js';
import { describeEachStore } from '../helpers/stores.js';
import { errorOf, type Harness, startHarness, textOf } from './helpers.js';

/** Real processes on a shared 2-core machine: generous, never a timing assertion. */
const SLOW = { timeout: 90_000 };
describeEachStore('stdio supervisor', (target) => {
  let h: Harness;

  beforeEach(async () => {
    h = await startHarness(target);
  });
  afterEach(async () => {
    const markers = [...h.markers];
    await h.close();
    // Closing the gateway reaped every child: nothing may carry a marker now.
    expect(await cleanUp([], markers)).toEqual({});
  });

  it('starts a server, serves hub calls over one long-lived child, reports state, and stops it', SLOW, async () => {
    const marker = await h.install('files');
    expect((await h.gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    expect(await h.process('files')).toMatchObject({ state: 'stopped', pid: null });

    const started = await h.gw.request('POST', '/api/mcp/servers/files/start');
    expect(started.statusCode, started.body).toBe(200);
    const { process } = started.json();
    expect(process).toMatchObject({ id: 'files', state: 'running', crashes: 0, lastError: null });
    expect(pidsWithMarker(marker)).toEqual([process.pid]);

    const list = (await h.gw.request('GET', '/api/mcp/servers')).json();
    expect(list.servers.find((s: { id: string }) => s.id === 'files').state).toBe('running');

    const agent = await h.agent('files');
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => agent.callTool({ name: 'echo', arguments: { text: `hello ${i}` } })),
    );
    expect(results.map(textOf)).toEqual(Array.from({ length: 20 }, (_, i) => `hello ${i}`));
    // All of them went to the one child.
    const pids = jsonOf(await agent.callTool({ name: 'pids', arguments: {} }));
    expect(pids.pid).toBe(nsPid(process.pid));
    expect(pidsWithMarker(marker)).toEqual([process.pid]);

    // A handshake while it runs uses the running child: no second process, same tools.
    const tested = (await h.gw.request('POST', '/api/mcp/servers/files/test')).json();
    expect(tested.ok).toBe(true);
    expect(tested.discoveredToolsCount).toBeGreaterThan(5);

    const stopped = await h.gw.request('POST', '/api/mcp/servers/files/stop');
    expect(stopped.statusCode, stopped.body).toBe(200);
    expect(stopped.json().process).toMatchObject({ state: 'stopped', pid: null });
    expect(pidsWithMarker(marker)).toEqual([]);

    const logs = (await h.gw.request('GET', '/api/mcp/servers/files/logs')).json();
    const messages = logs.events
      .filter((e: { kind: string }) => e.kind === 'process')
      .map((e: { message: string }) => e.message);
    expect(messages.some((m: string) => m.startsWith('Started (pid'))).toBe(true);
    expect(messages.some((m: string) => m.startsWith('Stopped (pid'))).toBe(true);
    const audit = (await h.gw.request('GET', '/api/audit?server=files&kind=admin')).json();
    expect(JSON.stringify(audit)).toContain('server.start');
  });

  it(
    'a call to a stopped server fails typed and says how to start it; with lazyStart the call starts it',
    SLOW,
    async () => {
      const marker = await h.install('lazy');
      const agent = await h.agent('lazy');
      const refused = await agent.callTool({ name: 'echo', arguments: { text: 'x' } });
      expect(refused.isError).toBe(true);
      const error = errorOf(refused);
      expect(error.code).toBe('upstream_unreachable');
      expect(error.message).toContain('/api/mcp/servers/lazy/start');
      expect(pidsWithMarker(marker)).toEqual([]);

      const patched = await h.gw.request('PATCH', '/api/mcp/servers/lazy/config', { body: { lazyStart: true } });
      expect(patched.statusCode, patched.body).toBe(200);
      expect(patched.json().server.lazyStart).toBe(true);
      expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: 'woke up' } }))).toBe('woke up');
      expect(h.gw.gateway.supervisor.stateOf('lazy')).toBe('running');
      expect(pidsWithMarker(marker)).toHaveLength(1);
    },
  );

  it('a child that exits mid-call: the call fails typed, the supervisor restarts it', SLOW, async () => {
    await h.install('crashy');
    const first = (await h.gw.request('POST', '/api/mcp/servers/crashy/start')).json().process;
    const agent = await h.agent('crashy');
    const crashed = await agent.callTool({ name: 'crash', arguments: { code: 9 } });
    expect(crashed.isError).toBe(true);
    const error = errorOf(crashed);
    expect(error.code).toBe('upstream_unreachable');
    expect(error.message).toContain('exited with code 9');
    expect(processAlive(first.pid)).toBe(false);

    await h.waitForState('crashy', 'running');
    const again = await h.process('crashy');
    expect(again.pid).not.toBe(first.pid);
    expect(again.crashes).toBe(1);
    expect(again.lastError).toContain('exited with code 9');
    expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: 'back' } }))).toBe('back');
    const logs = (await h.gw.request('GET', '/api/mcp/servers/crashy/logs')).json();
    expect(logs.events.some((e: { message: string }) => e.message.includes('Restarting in'))).toBe(true);
  });

  it('gives up after the restart cap: stopped, status failed, lastError', SLOW, async () => {
    const marker = await h.install('broken', ['--exit-at-start=7']);
    const started = await h.gw.request('POST', '/api/mcp/servers/broken/start');
    expect(started.statusCode).toBe(502);
    expect(started.json().error.code).toBe('upstream_unreachable');
    // Two restarts (the test setting), then it stays stopped.
    expect(await waitFor(() => h.gw.gateway.supervisor.view('broken').crashes === 3, 60_000)).toBe(true);
    await h.waitForState('broken', 'stopped');
    // The failed first start already left the record `failed` (its handshake error): wait for the give-up.
    await expect
      .poll(async () => (await h.gw.request('GET', '/api/mcp/servers/broken')).json().lastError, { timeout: 5000 })
      .toContain('Gave up after 3 crashes');
    const server = (await h.gw.request('GET', '/api/mcp/servers/broken')).json();
    expect(server.status).toBe('failed');
    expect(server.state).toBe('stopped');
    expect(server.lastError).toContain('exited with code 7');
    expect(server.lastError).toContain('Gave up after 3 crashes');
    expect(pidsWithMarker(marker)).toEqual([]);
  });

  it('stops a child together with its grandchild', SLOW, async () => {
    const marker = await h.install('family', ['--grandchild']);
    await h.gw.request('POST', '/api/mcp/servers/family/start');
    const agent = await h.agent('family');
    const { pid, grandchild } = jsonOf(await agent.callTool({ name: 'pids', arguments: {} }));
    expect(typeof grandchild).toBe('number');
    // Inside the sandbox the fixture sees its namespace's pids.
    expect(pidsWithMarker(marker).map(nsPid).sort()).toEqual([pid as number, grandchild as number].sort());
    await h.gw.request('POST', '/api/mcp/servers/family/stop');
    expect(pidsWithMarker(marker)).toEqual([]);
  });

  it('SIGKILLs a child that ignores SIGTERM after the grace period', SLOW, async () => {
    const marker = await h.install('deaf', ['--ignore-sigterm', '--grandchild', '--grandchild-ignores-term']);
    await h.gw.request('POST', '/api/mcp/servers/deaf/start');
    const agent = await h.agent('deaf');
    await agent.callTool({ name: 'pids', arguments: {} });
    expect(pidsWithMarker(marker)).toHaveLength(2);
    const stopped = await h.gw.request('POST', '/api/mcp/servers/deaf/stop');
    expect(stopped.json().process.state).toBe('stopped');
    expect(pidsWithMarker(marker)).toEqual([]);
    const logs = (await h.gw.request('GET', '/api/mcp/servers/deaf/logs')).json();
    expect(logs.events.some((e: { message: string }) => e.message.includes('SIGKILL after the grace period'))).toBe(
      true,
    );
  });

  it('a child that floods stdout is ended with a clear lastError, never the gateway', SLOW, async () => {
    await h.install('flood');
    const first = (await h.gw.request('POST', '/api/mcp/servers/flood/start')).json().process;
    const agent = await h.agent('flood');
    const huge = await agent.callTool({ name: 'flood', arguments: { mode: 'huge', bytes: 2 * 1024 * 1024 } });
    expect(huge.isError).toBe(true);
    expect(errorOf(huge).code).toBe('upstream_protocol_error');
    await h.waitForState('flood', 'running');
    const afterHuge = await h.process('flood');
    expect(afterHuge.pid).not.toBe(first.pid);
    expect(afterHuge.lastError).toContain('longer than 1048576 bytes');

    const garbage = await agent.callTool({ name: 'flood', arguments: { mode: 'garbage', lines: 5000 } });
    expect(garbage.isError).toBe(true);
    await h.waitForState('flood', 'running');
    expect((await h.process('flood')).lastError).toContain('not JSON-RPC');
    // The gateway is fine and so is the restarted child.
    expect((await h.gw.request('GET', '/api/mcp/servers')).statusCode).toBe(200);
    expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: 'still here' } }))).toBe('still here');
  });

  it('stderr lines become server events, secret values redacted, rate-limited', SLOW, async () => {
    await h.install('chatty', [], { env: { API_KEY: 'sk-very-secret-value-42' } });
    await h.gw.request('POST', '/api/mcp/servers/chatty/start');
    const agent = await h.agent('chatty');
    const lines = Array.from({ length: 200 }, (_, i) => `line ${i} key=sk-very-secret-value-42`);
    await agent.callTool({ name: 'stderr', arguments: { lines } });
    await expect
      .poll(
        async () =>
          (await h.gw.request('GET', '/api/mcp/servers/chatty/logs?limit=500'))
            .json()
            .events.filter((e: { kind: string }) => e.kind === 'stderr').length,
        { timeout: 5000 },
      )
      .toBeGreaterThanOrEqual(100);
    const events = (await h.gw.request('GET', '/api/mcp/servers/chatty/logs?limit=500')).json().events;
    const stderr = events.filter((e: { kind: string }) => e.kind === 'stderr');
    expect(stderr.some((e: { message: string }) => e.message === 'line 0 key=[redacted]')).toBe(true);
    expect(JSON.stringify(events)).not.toContain('sk-very-secret-value-42');
    // At most 120 per server per minute reach the store.
    expect(stderr.length).toBeLessThanOrEqual(120);
  });

  it('refuses a start beyond stdio.maxRunning with a clear error', SLOW, async () => {
    await h.install('one');
    await h.install('two');
    await h.gw.request('PATCH', '/api/settings', { body: { 'stdio.maxRunning': 1 } });
    expect((await h.gw.request('POST', '/api/mcp/servers/one/start')).statusCode).toBe(200);
    const refused = await h.gw.request('POST', '/api/mcp/servers/two/start');
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error).toMatchObject({ code: 'stdio.max_running', maxRunning: 1, running: 1 });
    expect(refused.json().error.message).toContain('stdio.maxRunning');
    expect(h.gw.gateway.supervisor.stateOf('two')).toBe('stopped');
    await h.gw.request('POST', '/api/mcp/servers/one/stop');
    expect((await h.gw.request('POST', '/api/mcp/servers/two/start')).statusCode).toBe(200);
  });

  it(
    'restart replaces the child; a changed command line restarts it; disable and uninstall stop it',
    SLOW,
    async () => {
      const marker = await h.install('cfg', [], { env: { MODE: 'a' } });
      const first = (await h.gw.request('POST', '/api/mcp/servers/cfg/start')).json().process;
      const restarted = (await h.gw.request('POST', '/api/mcp/servers/cfg/restart')).json().process;
      expect(restarted.state).toBe('running');
      expect(restarted.pid).not.toBe(first.pid);
      expect(processAlive(first.pid)).toBe(false);

      // A change that does not touch command, args or env keeps the child (checked below: one restart only).
      for (const body of [{ trustNewTools: true }, { env: { MODE: 'b' } }]) {
        const changed = await h.gw.request('PATCH', '/api/mcp/servers/cfg/config', { body });
        expect(changed.statusCode, changed.body).toBe(200);
      }
      expect(
        await waitFor(() => {
          const view = h.gw.gateway.supervisor.view('cfg');
          return view.state === 'running' && view.pid !== restarted.pid;
        }, 20_000),
      ).toBe(true);
      const agent = await h.agent('cfg');
      expect(jsonOf(await agent.callTool({ name: 'env', arguments: { name: 'MODE' } })).value).toBe('b');
      const logs = (await h.gw.request('GET', '/api/mcp/servers/cfg/logs')).json();
      const restarts = logs.events.filter((e: { message: string }) => e.message.startsWith('Restarting: its command'));
      expect(restarts).toHaveLength(1);

      const disabled = await h.gw.request('PATCH', '/api/mcp/servers/cfg/config', { body: { enabled: false } });
      expect(disabled.statusCode, disabled.body).toBe(200);
      await h.waitForState('cfg', 'stopped');
      expect(pidsWithMarker(marker)).toEqual([]);
      const refused = await h.gw.request('POST', '/api/mcp/servers/cfg/start');
      expect(refused.json().error.code).toBe('stdio.disabled');

      // Enabling starts it again (no lazyStart); uninstalling stops it.
      const enabled = await h.gw.request('PATCH', '/api/mcp/servers/cfg/config', { body: { enabled: true } });
      expect(enabled.statusCode, enabled.body).toBe(200);
      await h.waitForState('cfg', 'running');
      expect((await h.gw.request('DELETE', '/api/mcp/servers/cfg')).statusCode).toBe(200);
      expect(await waitFor(() => pidsWithMarker(marker).length === 0, 10_000)).toBe(true);
    },
  );

  it(
    'a record read that fails while reconciling a change is tried again: a disable is never dropped',
    SLOW,
    async () => {
      const marker = await h.install('flaky');
      expect((await h.gw.request('POST', '/api/mcp/servers/flaky/start')).statusCode).toBe(200);
      // The supervisor's view of the records fails its next two reads, as a store out of connections does.
      const supervisor = h.gw.gateway.supervisor;
      const records = supervisor.options.records;
      let failures = 2;
      supervisor.options.records = Object.assign(Object.create(records), {
        getRow: async (id: string) => {
          if (failures > 0) {
            failures -= 1;
            throw new Error('sorry, too many clients already');
          }
          return records.getRow(id);
        },
      });
      try {
        const disabled = await h.gw.request('PATCH', '/api/mcp/servers/flaky/config', { body: { enabled: false } });
        expect(disabled.statusCode, disabled.body).toBe(200);
        await h.waitForState('flaky', 'stopped');
        expect(failures).toBe(0);
        expect(pidsWithMarker(marker)).toEqual([]);
        expect(h.gw.logs.join('')).toContain('could not read a changed stdio server record');
      } finally {
        supervisor.options.records = records;
      }
    },
  );

  it('idle shutdown stops an unused server; its next call starts it again', SLOW, async () => {
    const marker = await h.install('sleepy');
    await h.gw.request('PATCH', '/api/mcp/servers/sleepy/config', { body: { idleShutdownS: 1 } });
    await h.gw.request('POST', '/api/mcp/servers/sleepy/start');
    const agent = await h.agent('sleepy');
    expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: 'a' } }))).toBe('a');
    await h.waitForState('sleepy', 'stopped');
    expect(pidsWithMarker(marker)).toEqual([]);
    expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: 'b' } }))).toBe('b');
    expect(h.gw.gateway.supervisor.stateOf('sleepy')).toBe('running');
  });

  it("connects with the record's remembered protocol era: no second probe on later starts", SLOW, async () => {
    await h.install('era', ['--log-methods']);
    // The handshake at install negotiated (one server/discover probe) and remembered the verdict.
    expect((await h.gw.request('GET', '/api/mcp/servers/era')).json().protocolEra).toBe('modern');
    for (let i = 0; i < 2; i++) {
      expect((await h.gw.request('POST', '/api/mcp/servers/era/restart')).statusCode).toBe(200);
      const agent = await h.agent('era');
      expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: `run ${i}` } }))).toBe(`run ${i}`);
    }
    const received = async () =>
      (await h.gw.request('GET', '/api/mcp/servers/era/logs?limit=500'))
        .json()
        .events.filter((e: { kind: string }) => e.kind === 'stderr')
        .map((e: { message: string }) => e.message);
    await expect.poll(async () => (await received()).filter((m: string) => m.endsWith('tools/call')).length).toBe(2);
    const methods = await received();
    expect(methods.filter((m: string) => m === 'fixture received server/discover')).toHaveLength(1);
    expect(methods.filter((m: string) => m === 'fixture received initialize')).toHaveLength(0);
  });

  it('answers 409 for an HTTP server and 404 for an unknown one', SLOW, async () => {
    const http = await h.gw.request('POST', '/api/mcp/install', {
      body: { manifest: { id: 'web', name: 'web', transport: 'streamable-http', url: 'http://127.0.0.2:9/mcp' } },
    });
    expect(http.statusCode).toBe(201);
    const start = await h.gw.request('POST', '/api/mcp/servers/web/start');
    expect(start.statusCode).toBe(409);
    expect(start.json().error.code).toBe('stdio.not_stdio');
    expect((await h.gw.request('POST', '/api/mcp/servers/nope/stop')).statusCode).toBe(404);
    const agentToken = h.agentToken;
    const forbidden = await h.gw.request('POST', '/api/mcp/servers/web/start', { token: agentToken });
    expect(forbidden.statusCode).toBe(403);
  });
});
