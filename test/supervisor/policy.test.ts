/**
 * A supervised stdio server goes through the same policy, approvals, pinning and audit as an HTTP
 * upstream: a gated tool waits for an operator and then runs once on the running child; a blocked
 * tool never reaches it; every start is followed by a handshake that compares the tools with their
 * pins, so a command change that brings other tools quarantines the new and the changed ones.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { cleanUp, fixtureSpec, jsonOf, pidsWithMarker } from '../fixtures/stdio/index.js';
import { describeEachStore } from '../helpers/stores.js';
import { errorOf, type Harness, startHarness, textOf } from './helpers.js';

/** Real processes on a shared 2-core machine: generous, never a timing assertion. */
const SLOW = { timeout: 90_000 };
describeEachStore('stdio supervisor: policy, approvals, pins, audit', (target) => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness(target);
  });
  afterEach(async () => {
    const markers = [...h.markers];
    await h.close();
    expect(await cleanUp([], markers)).toEqual({});
  });

  it(
    'gated calls wait for approval and then run once on the running child; blocked calls never reach it',
    SLOW,
    async () => {
      await h.install('tools', [], {
        toolPolicy: { allow: ['echo'], gated: ['env'], blocked: ['crash'], defaultTier: 'blocked' },
      });
      const started = (await h.gw.request('POST', '/api/mcp/servers/tools/start')).json().process;
      const agent = await h.agent('tools');

      const blocked = await agent.callTool({ name: 'crash', arguments: { code: 1 } });
      expect(errorOf(blocked).code).toBe('tool.blocked');
      expect(h.gw.gateway.supervisor.view('tools')).toMatchObject({ state: 'running', pid: started.pid, crashes: 0 });

      const pending = (await agent.callTool({ name: 'env', arguments: { name: 'HOME' } })).structuredContent as {
        status: string;
        approval_id: string;
      };
      expect(pending.status).toBe('pending_approval');
      const approved = await h.gw.request('POST', `/api/approvals/${pending.approval_id}/approve`, { body: {} });
      expect(approved.json()).toMatchObject({ status: 'approved' });
      const done = (
        await agent.callTool({
          name: 'gatehouse__approval_status',
          arguments: { approval_id: pending.approval_id, wait_s: 10 },
        })
      ).structuredContent as { status: string; result: unknown };
      expect(done.status).toBe('executed');
      expect(jsonOf(done.result)).toMatchObject({ visible: true });
      // It ran on the supervised child, not on a process of its own.
      expect(h.gw.gateway.supervisor.view('tools').pid).toBe(started.pid);

      expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: 'audited' } }))).toBe('audited');
      await h.gw.gateway.audit.flush();
      const audit = (await h.gw.request('GET', '/api/audit?server=tools&kind=call&limit=50')).json();
      const verdicts = JSON.stringify(audit);
      expect(verdicts).toContain('"verdict":"blocked"');
      expect(verdicts).toContain('"verdict":"gated"');
      expect(verdicts).toContain('"verdict":"allow"');
    },
  );

  it('prompts and resources of a stdio server are served through its supervised connection', SLOW, async () => {
    const marker = await h.installPlain('extras');
    const detail = (await h.gw.request('GET', '/api/mcp/servers/extras')).json();
    expect(detail.discoveredPrompts.map((p: { name: string }) => p.name)).toEqual(['greet']);
    expect(detail.discoveredResources.map((r: { uri: string }) => r.uri)).toEqual(['fixture://motd']);
    const agent = await h.agent('extras');
    // Stopped and not lazy: a typed refusal that names the way to start it.
    await expect(agent.getPrompt({ name: 'greet', arguments: { name: 'Ada' } })).rejects.toThrow(/is stopped/);
    await h.gw.request('POST', '/api/mcp/servers/extras/start');
    const prompt = await agent.getPrompt({ name: 'greet', arguments: { name: 'Ada' } });
    expect(prompt.messages[0]?.content).toEqual({ type: 'text', text: 'Hello, Ada.' });
    const resource = await agent.readResource({ uri: 'fixture://motd' });
    expect(resource.contents[0]).toMatchObject({ uri: 'fixture://motd', text: 'message of the day' });
    expect(pidsWithMarker(marker)).toHaveLength(1);
  });

  it(
    'a restart on another command compares the new tools with the pins: new and changed tools are quarantined',
    SLOW,
    async () => {
      await h.installPlain('pinned');
      expect((await h.gw.request('POST', '/api/mcp/servers/pinned/start')).statusCode).toBe(200);
      const agent = await h.agent('pinned');
      expect(textOf(await agent.callTool({ name: 'echo', arguments: { text: 'plain' } }))).toBe('plain');

      expect((await h.gw.request('GET', '/api/mcp/servers/pinned')).json().protocolEra).toBe('modern');
      // The same id now runs the richer fixture: `echo` is unchanged, `add` changed, `pids` is new.
      const marker = h.markers[0] as string;
      const spec = fixtureSpec(marker);
      const patched = await h.gw.request('PATCH', '/api/mcp/servers/pinned/config', {
        body: { command: spec.command, args: spec.args },
      });
      expect(patched.statusCode, patched.body).toBe(200);
      await expect
        .poll(
          async () => {
            const pins = (await h.gw.request('GET', '/api/mcp/servers/pinned/pins')).json();
            return JSON.stringify(pins);
          },
          { timeout: 30_000 },
        )
        .toContain('"pids"');
      expect(h.gw.gateway.supervisor.stateOf('pinned')).toBe('running');
      // The era remembered for the old program was dropped with it, and learned afresh from the new one.
      const logs = (await h.gw.request('GET', '/api/mcp/servers/pinned/logs')).json().events;
      expect(logs[0]).toMatchObject({ kind: 'handshake', data: { ok: true } });

      const fresh = await h.agent('pinned');
      expect(textOf(await fresh.callTool({ name: 'echo', arguments: { text: 'still pinned' } }))).toBe('still pinned');
      const added = await fresh.callTool({ name: 'pids', arguments: {} });
      expect(errorOf(added).code).toBe('tool.quarantined');
      const changed = await fresh.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
      expect(errorOf(changed).code).toBe('tool.quarantined');
    },
  );
});
