/**
 * Rate limits across replicas: three gateways on one PostgreSQL schema, an agent token limited to
 * 30 calls per minute, 120 calls spread round-robin over the three. The fleet admits at most 30
 * (none over: the stated bound) and refuses at most (replicas − 1) × (leaseSize − 1) of the 30 that
 * other replicas leased and did not use. A 60-s window boundary in the middle of the burst would
 * start a new allowance, so the burst is kept inside one window.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { FleetCallLimiter, leaseSize } from '../../src/policy/fleet-limits.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freshStore, POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

describe.skipIf(!POSTGRES_AVAILABLE)('rate limits across replicas [postgres]', () => {
  const gateways: TestGateway[] = [];
  const clients: Client[] = [];
  let upstream: McpFixture;
  let place: Awaited<ReturnType<typeof postgresTarget.fresh>>;

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    for (const gw of gateways.splice(0)) await gw.close().catch(() => {});
    await upstream?.close();
    await place?.cleanup();
  });

  it("holds a token's 30 calls per minute across three gateways", async () => {
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    place = await postgresTarget.fresh();
    for (let i = 0; i < 3; i++) gateways.push(await startTestGateway(postgresTarget, {}, {}, place));
    const [first] = gateways;
    await first!.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } });
    await first!.request('PATCH', '/api/mcp/servers/files/tools', { body: { allow: ['echo'] } });
    expect((await first!.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    const limit = 30;
    const agent = (
      await first!.request('POST', '/api/tokens', { body: { role: 'agent', name: 'limited', rateLimit: limit } })
    ).json();
    for (const gw of gateways)
      clients.push(await connectAgent(`${await gw.listen()}/mcp`, agent.token, { era: 'modern' }));

    // Not across a window boundary (a new minute is a new allowance): start early in a minute.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 50));

    let admitted = 0;
    let refused = 0;
    for (let round = 0; round < 40; round++) {
      // Each round, one call on every replica at once.
      const results = await Promise.all(
        clients.map((client, i) => client.callTool({ name: 'files__echo', arguments: { text: `${round}-${i}` } })),
      );
      for (const result of results) {
        const status = (result.structuredContent as { status?: string; error?: { code: string } } | undefined)?.error
          ?.code;
        if (status === 'rate_limited') refused++;
        else if (!result.isError) admitted++;
      }
    }
    expect(admitted + refused).toBe(120);
    expect(admitted).toBeLessThanOrEqual(limit);
    expect(admitted).toBeGreaterThanOrEqual(limit - (gateways.length - 1) * (leaseSize(limit) - 1));
    expect(upstream.stats.calls.echo).toBe(admitted);
  });

  it('shares one allowance per window between limiters, with an honest retry hint, and a new one next window', async () => {
    const base = await freshStore(postgresTarget);
    try {
      let t = 6_000_000; // the start of a window
      const limiters = [0, 1].map(() => new FleetCallLimiter({ store: base.store, now: () => t }));
      const agent = { id: 'tok_a', rateLimit: 5, maxConcurrent: null };
      const outcomes: Array<'ok' | 'refused'> = [];
      for (let i = 0; i < 10; i++) {
        try {
          (await limiters[i % 2]!.acquire(agent, 600))();
          outcomes.push('ok');
        } catch (error) {
          expect(error).toBeInstanceOf(GatehouseError);
          expect((error as GatehouseError).details).toEqual({ retryAfterS: 60, reason: 'rate' });
          outcomes.push('refused');
        }
      }
      expect(outcomes.filter((o) => o === 'ok')).toHaveLength(5); // leases of 1: nothing left unused
      t += 45_000;
      await expect(limiters[0]!.acquire(agent, 600)).rejects.toMatchObject({ details: { retryAfterS: 15 } });
      t += 15_000; // the next window
      for (let i = 0; i < 5; i++) (await limiters[i % 2]!.acquire(agent, 600))();
      await expect(limiters[1]!.acquire(agent, 600)).rejects.toMatchObject({ code: 'rate_limited' });
      // Without its store, a replica limits on its own rather than stopping every call.
      await base.store.close();
      const alone = new FleetCallLimiter({ store: base.store, now: () => t });
      (await alone.acquire({ id: 'tok_b', rateLimit: 1 }, 600))();
      await expect(alone.acquire({ id: 'tok_b', rateLimit: 1 }, 600)).rejects.toMatchObject({ code: 'rate_limited' });
    } finally {
      await base.cleanup().catch(() => {});
    }
  });
});
