import { describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import type { TokenPrincipal } from '../../src/identity/index.js';
import { CallLimiter } from '../../src/policy/limits.js';

/** A clock the test moves by hand, passed to the limiter as its `now`. */
function manualClock(start = 1_000_000) {
  let t = start;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

function token(id: string, limits: Partial<Pick<TokenPrincipal, 'rateLimit' | 'maxConcurrent'>> = {}): TokenPrincipal {
  return { id, name: id, role: 'agent', groups: ['default'], rateLimit: null, maxConcurrent: null, ...limits };
}

function refusal(fn: () => unknown): GatehouseError {
  try {
    fn();
  } catch (error) {
    if (error instanceof GatehouseError) return error;
    throw error;
  }
  throw new Error('expected a refusal, but the call was admitted');
}

describe('CallLimiter: rate', () => {
  it('refuses the N+1th call within a minute with an honest retry hint, and admits after it', () => {
    const clock = manualClock();
    const limiter = new CallLimiter({ now: clock.now });
    const agent = token('tok_a', { rateLimit: 3 });
    for (let i = 0; i < 3; i++) limiter.acquire(agent, 600)();
    const refused = refusal(() => limiter.acquire(agent, 600));
    expect(refused.code).toBe('rate_limited');
    expect(refused.status).toBe(429);
    expect(refused.details).toEqual({ retryAfterS: 20, reason: 'rate' }); // one call refills every 60/3 s
    expect(refused.message).toMatch(/3 calls per minute/);

    clock.advance(19_000);
    const stillRefused = refusal(() => limiter.acquire(agent, 600));
    expect(stillRefused.details?.retryAfterS).toBe(1);
    clock.advance(1_000); // exactly the hinted wait
    expect(() => limiter.acquire(agent, 600)).not.toThrow();
    expect(() => limiter.acquire(agent, 600)).toThrow(GatehouseError);

    // After a full window the whole allowance is back, and no more.
    clock.advance(60_000);
    for (let i = 0; i < 3; i++) limiter.acquire(agent, 600)();
    expect(() => limiter.acquire(agent, 600)).toThrow(/per minute/);
  });

  it("uses the token's own limit over the default, and the default when it has none", () => {
    const clock = manualClock();
    const limiter = new CallLimiter({ now: clock.now });
    const strict = token('tok_strict', { rateLimit: 2 });
    limiter.acquire(strict, 100);
    limiter.acquire(strict, 100);
    expect(refusal(() => limiter.acquire(strict, 100)).code).toBe('rate_limited');

    const generous = token('tok_generous', { rateLimit: 5 });
    for (let i = 0; i < 5; i++) limiter.acquire(generous, 2);
    expect(refusal(() => limiter.acquire(generous, 2)).details?.retryAfterS).toBe(12);

    const plain = token('tok_plain');
    limiter.acquire(plain, 2);
    limiter.acquire(plain, 2);
    expect(refusal(() => limiter.acquire(plain, 2)).details).toEqual({ retryAfterS: 30, reason: 'rate' });
  });

  it('keeps tokens independent of each other', () => {
    const limiter = new CallLimiter({ now: manualClock().now });
    const a = token('tok_a', { rateLimit: 1 });
    const b = token('tok_b', { rateLimit: 1 });
    limiter.acquire(a, 600);
    expect(() => limiter.acquire(b, 600)).not.toThrow();
    expect(() => limiter.acquire(a, 600)).toThrow(GatehouseError);
  });

  it('applies a changed limit from the next call on', () => {
    const clock = manualClock();
    const limiter = new CallLimiter({ now: clock.now });
    limiter.acquire(token('tok_a', { rateLimit: 1 }), 600);
    expect(() => limiter.acquire(token('tok_a', { rateLimit: 1 }), 600)).toThrow(GatehouseError);
    // Raised to 5/min: the call already made stays counted, the other four are free at once.
    for (let i = 0; i < 4; i++) limiter.acquire(token('tok_a', { rateLimit: 5 }), 600);
    expect(refusal(() => limiter.acquire(token('tok_a', { rateLimit: 5 }), 600)).details?.retryAfterS).toBe(12);
    // Lowered: the allowance is capped at the new capacity at once.
    clock.advance(60_000);
    limiter.acquire(token('tok_a', { rateLimit: 2 }), 600);
    limiter.acquire(token('tok_a', { rateLimit: 2 }), 600);
    expect(() => limiter.acquire(token('tok_a', { rateLimit: 2 }), 600)).toThrow(GatehouseError);
  });
});

describe('CallLimiter: concurrency', () => {
  it('refuses past maxConcurrent until a release, with a small retry hint', () => {
    const limiter = new CallLimiter({ now: manualClock().now });
    const agent = token('tok_c', { maxConcurrent: 2 });
    const first = limiter.acquire(agent, 600);
    limiter.acquire(agent, 600);
    const refused = refusal(() => limiter.acquire(agent, 600));
    expect(refused.code).toBe('rate_limited');
    expect(refused.details).toEqual({ retryAfterS: 1, reason: 'concurrency' });
    first();
    expect(() => limiter.acquire(agent, 600)).not.toThrow();
    expect(() => limiter.acquire(agent, 600)).toThrow(/in flight/);
  });

  it('treats release as idempotent', () => {
    const limiter = new CallLimiter({ now: manualClock().now });
    const agent = token('tok_c', { maxConcurrent: 2 });
    const first = limiter.acquire(agent, 600);
    limiter.acquire(agent, 600);
    first();
    first();
    first();
    limiter.acquire(agent, 600); // takes the one slot the release freed
    expect(refusal(() => limiter.acquire(agent, 600)).details?.reason).toBe('concurrency');
  });

  it('has no concurrency cap when maxConcurrent is null, and a concurrency refusal costs no rate', () => {
    const clock = manualClock();
    const limiter = new CallLimiter({ now: clock.now });
    const open = token('tok_open');
    for (let i = 0; i < 50; i++) limiter.acquire(open, 600); // never released: still admitted
    const capped = token('tok_capped', { rateLimit: 2, maxConcurrent: 1 });
    const held = limiter.acquire(capped, 600);
    for (let i = 0; i < 10; i++)
      expect(refusal(() => limiter.acquire(capped, 600)).details?.reason).toBe('concurrency');
    held();
    expect(() => limiter.acquire(capped, 600)).not.toThrow(); // the second of two calls per minute
  });
});

describe('CallLimiter: memory', () => {
  it('sweeps idle tokens whose allowance is full again, keeping busy and recent ones', () => {
    const clock = manualClock();
    const limiter = new CallLimiter({ now: clock.now, sweepEveryMs: 60_000 });
    for (let i = 0; i < 1000; i++) limiter.acquire(token(`tok_${i}`), 600)();
    const busy = limiter.acquire(token('tok_busy'), 600); // still in flight
    expect(limiter.size).toBe(1001);

    clock.advance(30_000);
    limiter.acquire(token('tok_recent', { rateLimit: 1 }), 600)();
    expect(limiter.size).toBe(1002); // no sweep before sweepEveryMs

    clock.advance(30_000);
    limiter.acquire(token('tok_trigger'), 600)(); // this acquire runs the sweep first
    // Dropped: the 1000 idle ones (full again). Kept: busy (in flight), recent (refilling), trigger (just used).
    expect(limiter.size).toBe(3);

    // A swept token starts fresh with its full allowance: sweeping lost nothing.
    const returning = token('tok_7', { rateLimit: 2 });
    limiter.acquire(returning, 600)();
    limiter.acquire(returning, 600)();
    expect(() => limiter.acquire(returning, 600)).toThrow(GatehouseError);

    expect(limiter.size).toBe(4);
    clock.advance(120_000);
    expect(limiter.sweep()).toBe(3); // busy stays while its call is in flight
    expect(limiter.size).toBe(1);
    busy();
    expect(limiter.sweep()).toBe(1);
    expect(limiter.size).toBe(0);
  });
});
