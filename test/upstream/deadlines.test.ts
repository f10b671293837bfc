/**
 * Deadlines cover connect and operation; the caller's signal cancels; the upstream is told.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Canceller } from '../../src/cancellation.js';
import { Deadline } from '../../src/upstream/deadline.js';
import { startHostileServer } from '../fixtures/hostile-servers.js';
import { startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { Cleanup, eventually, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

/** Runs `work` and measures it, the clock started before any of it runs. */
async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await work();
  return { value, ms: performance.now() - start };
}

describe('deadlines', () => {
  it('times out a connect that never gets an answer, within the list deadline', async () => {
    const hostile = cleanup.add(await startHostileServer({ mode: 'never-answers', fromStart: true }));
    const pool = cleanup.add(makePool({ listTimeoutMs: 300 }));
    const { value: error, ms } = await timed(() =>
      expectFailure(pool.listTools({ url: hostile.url }), 'upstream_timeout', { timeoutMs: 300 }),
    );
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(2_000);
    expect(error.status).toBe(504);
  });

  it('times out a call the upstream never answers, connect included in the budget', async () => {
    const hostile = cleanup.add(await startHostileServer({ mode: 'never-answers' }));
    const pool = cleanup.add(makePool({ callTimeoutMs: 300 }));
    const { ms } = await timed(() => expectFailure(pool.callTool({ url: hostile.url }, 'x', {}), 'upstream_timeout'));
    expect(ms).toBeLessThan(2_000);
  });

  it('times out a shared pooled connect for a late caller without failing the connect for others', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ callTimeoutMs: 2_000 }));
    const controller = new AbortController();
    const first = pool.callTool({ url: fixture.url }, 'echo', { text: 'kept' });
    const second = pool.callTool({ url: fixture.url }, 'echo', { text: 'gone' }, { signal: controller.signal });
    controller.abort();
    await expectFailure(second, 'upstream_timeout', { reason: 'cancelled' });
    expect((await first).content).toEqual([{ type: 'text', text: 'kept' }]);
    expect(fixture.sessionsOpened).toBe(1);
  });

  it.each([
    ['2025-era', () => startLegacyServer()],
    ['modern', () => startModernServer()],
  ])('stops a %s call at the deadline and tells the upstream to stop', async (_, start) => {
    const fixture = cleanup.add(await start());
    const pool = cleanup.add(makePool({ callTimeoutMs: 1_000 }));
    // Connected first, so the deadline is sure to fire while the tool runs.
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'warm up' });
    const { ms } = await timed(() =>
      expectFailure(pool.callTool({ url: fixture.url }, 'slow', { ms: 20_000 }), 'upstream_timeout', {
        timeoutMs: 1_000,
      }),
    );
    expect(ms).toBeGreaterThanOrEqual(990);
    expect(ms).toBeLessThan(3_000);
    await eventually(() => fixture.stats.cancelled === 1);
  });
});

describe('caller cancellation', () => {
  it.each([
    ['2025-era, pooled', () => startLegacyServer(), 'pooled'],
    ['2025-era, fresh', () => startLegacyServer(), 'fresh'],
    ['modern, pooled', () => startModernServer(), 'pooled'],
    ['modern, fresh', () => startModernServer(), 'fresh'],
  ] as const)('%s: aborts the upstream request when the caller goes away', async (_, start, sessionMode) => {
    const fixture = cleanup.add(await start());
    const pool = cleanup.add(makePool({ sessionMode, callTimeoutMs: 10_000 }));
    const controller = new AbortController();
    const call = pool.callTool({ url: fixture.url }, 'slow', { ms: 20_000 }, { signal: controller.signal });
    await eventually(() => fixture.stats.calls.slow === 1);
    const { ms } = await timed(() => {
      controller.abort();
      return expectFailure(call, 'upstream_timeout', { reason: 'cancelled' });
    });
    expect(ms).toBeLessThan(1_000);
    // The SDK's cancellation reached the upstream: its handler saw the abort.
    await eventually(() => fixture.stats.cancelled === 1);
  });

  it('fails at once, without contacting the upstream, when the signal is already aborted', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool());
    await expectFailure(
      pool.callTool({ url: fixture.url }, 'echo', { text: 'x' }, { signal: AbortSignal.abort() }),
      'upstream_timeout',
      { reason: 'cancelled' },
    );
    expect(fixture.log.records).toHaveLength(0);
  });

  it('runs withClient work on a connected client and cancels it through the signal it hands out', async () => {
    const fixture = cleanup.add(await startModernServer());
    const pool = cleanup.add(makePool());
    // withClient results come back as the function returned them.
    const names = await pool.withClient({ url: fixture.url }, 5_000, async (client, signal) => {
      const { tools } = await client.request({ method: 'tools/list', params: {} }, { signal });
      return tools.map((t) => t.name);
    });
    expect(names).toContain('echo');
    const { ms } = await timed(() =>
      expectFailure(
        pool.withClient({ url: fixture.url }, 1_000, (client, signal) =>
          client.callTool({ name: 'slow', arguments: { ms: 20_000 } }, { signal }),
        ),
        'upstream_timeout',
        { timeoutMs: 1_000 },
      ),
    );
    expect(ms).toBeLessThan(3_000);
    await eventually(() => fixture.stats.cancelled === 1);
  });
});

describe('the Deadline itself', () => {
  it('runs what waits on its expiry once, after its signal, unless forgotten; race rejects with its error', async () => {
    const caller = new AbortController();
    const deadline = new Deadline(60_000, caller.signal);
    const order: string[] = [];
    deadline.signal.addEventListener('abort', () => order.push('signal'));
    deadline.onAbort(() => order.push('first'));
    const forget = deadline.onAbort(() => order.push('forgotten'));
    deadline.onAbort(() => order.push('second'));
    forget();
    const raced = deadline.race(new Promise(() => {}));
    caller.abort();
    caller.abort();
    await expect(raced).rejects.toMatchObject({ code: 'upstream_timeout', details: { reason: 'cancelled' } });
    expect(order).toEqual(['signal', 'first', 'second']);
    expect(deadline.expired).toBe('cancelled');
    deadline.dispose();
  });

  it('follows a caller that is a Canceller, and makes no AbortSignal of its own until asked', async () => {
    const caller = new Canceller();
    const deadline = new Deadline(60_000, caller);
    const raced = deadline.race(new Promise(() => {}));
    caller.abort();
    await expect(raced).rejects.toMatchObject({ code: 'upstream_timeout', details: { reason: 'cancelled' } });
    expect(deadline.aborted).toBe(true);
    expect(deadline.reason).toMatchObject({ code: 'upstream_timeout' });
    // Asked for after the fact, its signal is already aborted with the same error.
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.signal.reason).toBe(deadline.reason);
    deadline.dispose();
  });

  it('lets a race that settled first go, and fires on time', async () => {
    const deadline = new Deadline(20);
    await expect(deadline.race(Promise.resolve('done'))).resolves.toBe('done');
    const fired = new Promise<string>((resolve) => deadline.onAbort(() => resolve(deadline.expired ?? 'none')));
    await expect(fired).resolves.toBe('timeout');
    await expect(deadline.race(Promise.resolve('late'))).rejects.toMatchObject({
      code: 'upstream_timeout',
      details: { timeoutMs: 20 },
    });
    deadline.dispose();
  });
});
