/**
 * Legacy HTTP+SSE upstreams (the 2024-11-05 transport) through the pool: a real SDK v1
 * `SSEServerTransport` server on 127.0.0.2, reached through a real egress guard, so the guard's
 * address rules, its response cap and the pool's deadlines apply as they do to Streamable HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createEgressGuard } from '../../src/egress/index.js';
import { listen } from '../fixtures/http.js';
import { startSseServer } from '../fixtures/sse-server.js';
import { eventually } from '../helpers/eventually.js';
import { Cleanup, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const HOST = '127.0.0.2';

function guardedPool(options: { maxResponseBytes?: number; listTimeoutMs?: number } = {}) {
  const guard = cleanup.add(
    createEgressGuard({
      allowHttp: true,
      testPublicAddresses: [HOST],
      ...(options.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}),
    }),
  );
  // `exchange` given: a Streamable HTTP target would take the direct path; an SSE one must not.
  return cleanup.add(
    makePool({
      fetch: guard.fetch,
      exchange: guard.exchange,
      ...(options.listTimeoutMs ? { listTimeoutMs: options.listTimeoutMs } : {}),
    }),
  );
}

describe('HTTP+SSE upstreams', () => {
  it('lists and calls over one event stream, sending the target’s headers on the stream and every POST', async () => {
    const fixture = cleanup.add(await startSseServer({ host: HOST }));
    const pool = guardedPool();
    const target = { url: fixture.url, transport: 'sse' as const, headers: { 'X-Tenant': 'alice' } };
    const { tools } = await pool.listTools(target);
    expect(tools.map((t) => t.name).sort()).toEqual(['add', 'chatty', 'echo', 'slow']);
    for (let i = 0; i < 5; i++) {
      expect((await pool.callTool(target, 'echo', { text: `${i}` })).content).toEqual([{ type: 'text', text: `${i}` }]);
    }
    const added = await pool.callTool(target, 'add', { a: 2, b: 3 });
    expect(added.structuredContent).toEqual({ sum: 5 });

    expect(fixture.sessionsOpened).toBe(1);
    // Initialized as a 2025-era server: no 2026-07-28 probe, one initialize.
    expect(fixture.log.count('server/discover')).toBe(0);
    expect(fixture.log.count('initialize')).toBe(1);
    expect(fixture.log.count('tools/call')).toBe(6);
    expect(pool.stats().directCalls).toBe(0);
    for (const record of fixture.log.records) expect(record.headers['x-tenant']).toBe('alice');
    expect(fixture.log.records[0]?.headers.accept).toContain('text/event-stream');
  });

  it('is another pool key than the same URL over Streamable HTTP', async () => {
    const fixture = cleanup.add(await startSseServer({ host: HOST }));
    const pool = guardedPool();
    await pool.listTools({ url: fixture.url, transport: 'sse' });
    // The Streamable HTTP attempt at the same URL is its own connection, and fails as that transport does.
    await expect(pool.listTools({ url: fixture.url })).rejects.toMatchObject({ code: expect.any(String) });
    expect((await pool.callTool({ url: fixture.url, transport: 'sse' }, 'echo', { text: 'still' })).content).toEqual([
      { type: 'text', text: 'still' },
    ]);
    expect(fixture.sessionsOpened).toBe(1);
  });

  it('goes through the egress guard: a private address is refused', async () => {
    const fixture = cleanup.add(await startSseServer({ host: '127.0.0.1' }));
    const pool = guardedPool();
    await expectFailure(pool.listTools({ url: fixture.url, transport: 'sse' }), 'private_network_blocked');
    expect(fixture.sessionsOpened).toBe(0);
  });

  it('caps what the stream carries with the guard’s response cap', async () => {
    const fixture = cleanup.add(await startSseServer({ host: HOST }));
    const pool = guardedPool({ maxResponseBytes: 64 * 1024 });
    const target = { url: fixture.url, transport: 'sse' as const };
    expect((await pool.callTool(target, 'echo', { text: 'small' })).content).toEqual([{ type: 'text', text: 'small' }]);
    const failed = await pool.callTool(target, 'echo', { text: 'x'.repeat(128 * 1024) }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failed).toMatchObject({ code: expect.stringMatching(/^upstream_/) });
    // The connection the cap ended is replaced: the next call opens a new stream and succeeds.
    expect((await pool.callTool(target, 'echo', { text: 'again' })).content).toEqual([{ type: 'text', text: 'again' }]);
    expect(fixture.sessionsOpened).toBe(2);
  });

  it('fails with upstream_timeout when the stream never names its endpoint, and leaves no connect pending', async () => {
    const silent = cleanup.add(
      await listen((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': waiting\n\n');
      }, HOST),
    );
    const pool = guardedPool({ listTimeoutMs: 300 });
    await expectFailure(pool.listTools({ url: `${silent.origin}/sse`, transport: 'sse' }), 'upstream_timeout');
    await eventually(() => expect(pool.stats().connecting).toBe(0));
  });

  it('reconnects after the upstream dropped the stream', async () => {
    const fixture = cleanup.add(await startSseServer({ host: HOST }));
    const pool = guardedPool();
    const target = { url: fixture.url, transport: 'sse' as const };
    await pool.callTool(target, 'echo', { text: 'one' });
    fixture.dropStreams();
    await eventually(() => expect(pool.stats().open).toBe(0));
    expect((await pool.callTool(target, 'echo', { text: 'two' })).content).toEqual([{ type: 'text', text: 'two' }]);
    expect(fixture.sessionsOpened).toBe(2);
  });
});
