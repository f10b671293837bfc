/**
 * The session pool against a real 2025-era sessionful server (where a session is visible) and a
 * modern one: reuse, fresh mode, shared connects, header isolation, 404 recovery, idle and LRU.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { Cleanup, eventually, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

describe('pooled mode', () => {
  it('reuses one upstream session across 20 calls', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool());
    for (let i = 0; i < 20; i++) {
      expect((await pool.callTool({ url: fixture.url }, 'echo', { text: `${i}` })).content).toEqual([
        { type: 'text', text: `${i}` },
      ]);
    }
    expect(fixture.sessionsOpened).toBe(1);
    expect(fixture.log.count('initialize')).toBe(1);
    expect(fixture.log.count('tools/call')).toBe(20);
    // Every call carried the same session id.
    const ids = new Set(fixture.log.withMethod('tools/call').map((r) => r.headers['mcp-session-id']));
    expect(ids.size).toBe(1);
    expect(pool.stats()).toEqual({ open: 1, connecting: 0, eraByUrl: 1, directCalls: 0 });
  });

  it('shares one connect between concurrent first calls', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool());
    const calls = Array.from({ length: 10 }, (_, i) => pool.callTool({ url: fixture.url }, 'echo', { text: `${i}` }));
    expect(pool.stats().connecting).toBe(1);
    const results = await Promise.all(calls);
    expect(results.map((r) => (r.content[0] as { text: string }).text)).toEqual(
      Array.from({ length: 10 }, (_, i) => `${i}`),
    );
    expect(fixture.log.count('server/discover')).toBe(1);
    expect(fixture.log.count('initialize')).toBe(1);
    expect(fixture.sessionsOpened).toBe(1);
    expect(pool.stats().connecting).toBe(0);
  });

  it('keeps the headers of one key on that key’s connection only', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool());
    const alice = { url: fixture.url, headers: { Authorization: 'Bearer alice-token', 'X-Tenant': 'alice' } };
    const bob = { url: fixture.url, headers: { authorization: 'Bearer bob-token', 'x-tenant': 'bob' } };
    for (let i = 0; i < 5; i++) {
      await Promise.all([pool.callTool(alice, 'echo', { text: 'a' }), pool.callTool(bob, 'echo', { text: 'b' })]);
    }
    await pool.listTools(alice);
    await pool.close();

    expect(fixture.sessionsOpened).toBe(2);
    const sessionsOf: Record<string, Set<string>> = { alice: new Set(), bob: new Set() };
    for (const record of fixture.log.records) {
      const tenant = record.headers['x-tenant'];
      // Every request — probe, initialize, calls, the GET stream, the closing DELETE — carried one
      // tenant's headers, both of them, and nothing of the other tenant.
      expect(tenant === 'alice' || tenant === 'bob').toBe(true);
      expect(record.headers.authorization).toBe(`Bearer ${tenant}-token`);
      const session = record.headers['mcp-session-id'];
      if (session) sessionsOf[tenant!]!.add(session);
    }
    expect(sessionsOf.alice!.size).toBe(1);
    expect(sessionsOf.bob!.size).toBe(1);
    expect([...sessionsOf.alice!][0]).not.toBe([...sessionsOf.bob!][0]);
    expect(fixture.log.count('HTTP DELETE')).toBe(2);
  });

  it('treats header names case-insensitively when keying', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool());
    await pool.callTool({ url: fixture.url, headers: { 'X-Key': 'k', 'X-Other': 'o' } }, 'echo', { text: '1' });
    await pool.callTool({ url: fixture.url, headers: { 'x-other': 'o', 'x-key': 'k' } }, 'echo', { text: '2' });
    expect(fixture.sessionsOpened).toBe(1);
    await pool.callTool({ url: fixture.url, headers: { 'x-other': 'o', 'x-key': 'K' } }, 'echo', { text: '3' });
    expect(fixture.sessionsOpened).toBe(2);
  });

  it('recovers transparently when the upstream forgets the session (404)', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool());
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'before' });
    const [before] = fixture.log.withMethod('tools/call');
    await fixture.forgetSessions();

    const after = await pool.callTool({ url: fixture.url }, 'echo', { text: 'after' });
    expect(after.content).toEqual([{ type: 'text', text: 'after' }]);
    expect(fixture.sessionsOpened).toBe(2);
    // The first attempt carried the forgotten session and got 404; the retry ran on a new session.
    const calls = fixture.log.withMethod('tools/call');
    expect(calls).toHaveLength(3);
    expect(calls[1]!.headers['mcp-session-id']).toBe(before!.headers['mcp-session-id']);
    expect(calls[1]!.status).toBe(404);
    expect(calls[2]!.headers['mcp-session-id']).not.toBe(before!.headers['mcp-session-id']);
    expect(fixture.stats.calls.echo).toBe(2);
  });

  it('retires a connection whose GET stream can no longer reach its session', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool());
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'before' });
    expect(pool.stats().open).toBe(1);
    await fixture.forgetSessions();
    // The SDK reconnects the dropped GET stream after ~1 s, gets 404, and reports it.
    await eventually(() => pool.stats().open === 0, 5_000);
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'after' });
    expect(fixture.log.withMethod('tools/call').every((r) => r.status === undefined)).toBe(true);
    expect(fixture.sessionsOpened).toBe(2);
  });

  it('closes a connection idle for poolIdleMs and ends its session', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ poolIdleMs: 100 }));
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'a' });
    expect(fixture.openSessions).toBe(1);
    await eventually(() => pool.stats().open === 0 && fixture.openSessions === 0);
    expect(fixture.log.count('HTTP DELETE')).toBe(1);
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'b' });
    expect(fixture.sessionsOpened).toBe(2);
  });

  it('does not close a connection while a call is using it, however idle the pool is', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ poolIdleMs: 30 }));
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'warm' });
    // The idle timer fires during this call and must leave the busy connection alone.
    const slow = await pool.callTool({ url: fixture.url }, 'slow', { ms: 150 });
    expect(slow.content).toEqual([{ type: 'text', text: 'slept 150ms' }]);
    expect(fixture.sessionsOpened).toBe(1);
    await eventually(() => fixture.openSessions === 0);
  });

  it('keeps at most poolMaxSize connections, closing the least recently used', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ poolMaxSize: 2 }));
    const key = (k: string) => ({ url: fixture.url, headers: { 'x-key': k } });
    await pool.callTool(key('a'), 'echo', { text: 'a' });
    await pool.callTool(key('b'), 'echo', { text: 'b' });
    await pool.callTool(key('a'), 'echo', { text: 'a again' }); // a is now the most recent
    await pool.callTool(key('c'), 'echo', { text: 'c' }); // evicts b
    expect(pool.stats().open).toBe(2);
    await eventually(() => fixture.openSessions === 2);
    expect(fixture.sessionsOpened).toBe(3);

    await pool.callTool(key('a'), 'echo', { text: 'a still pooled' });
    expect(fixture.sessionsOpened).toBe(3);
    await pool.callTool(key('b'), 'echo', { text: 'b reconnects' });
    expect(fixture.sessionsOpened).toBe(4);
  });

  it('closes everything on close() and refuses later work', async () => {
    const legacy = cleanup.add(await startLegacyServer());
    const modern = cleanup.add(await startModernServer());
    const pool = makePool();
    await pool.callTool({ url: legacy.url }, 'echo', { text: 'x' });
    await pool.callTool({ url: modern.url }, 'echo', { text: 'x' });
    expect(pool.stats().open).toBe(2);
    await pool.close();
    expect(pool.stats().open).toBe(0);
    expect(legacy.openSessions).toBe(0);
    await expectFailure(pool.callTool({ url: legacy.url }, 'echo', { text: 'x' }), 'upstream_unreachable', {
      reason: 'pool_closed',
    });
  });
});

describe('fresh mode', () => {
  it('opens and ends one session per call', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    for (let i = 0; i < 20; i++) await pool.callTool({ url: fixture.url }, 'echo', { text: `${i}` });
    expect(fixture.sessionsOpened).toBe(20);
    expect(fixture.log.count('initialize')).toBe(20);
    await eventually(() => fixture.openSessions === 0 && fixture.log.count('HTTP DELETE') === 20);
    expect(pool.stats().open).toBe(0);
  });

  it('connects per call to a modern upstream too, without re-probing', async () => {
    const fixture = cleanup.add(await startModernServer());
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => pool.callTool({ url: fixture.url }, 'add', { a: i, b: 1 })),
    );
    expect(results.map((r) => r.structuredContent)).toEqual([1, 2, 3, 4, 5].map((sum) => ({ sum })));
    // Concurrent first connects may each probe; the verdict is then remembered.
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'later' });
    expect(fixture.log.count('server/discover')).toBeLessThanOrEqual(5);
    const probesSoFar = fixture.log.count('server/discover');
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'later still' });
    expect(fixture.log.count('server/discover')).toBe(probesSoFar);
  });
});
