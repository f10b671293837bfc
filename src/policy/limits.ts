/**
 * Per-token call limits for the MCP surfaces: a rate (calls per minute) and a
 * concurrency cap (calls in flight).
 *
 * Rate: a token bucket per token — capacity `limit` calls, refilled
 * continuously at `limit` per minute, in integer units so the arithmetic is
 * exact. O(1) time and memory per call. A burst of `limit` calls is admitted at
 * once, the long-run rate never exceeds `limit` per minute, and no 60-second
 * span admits more than 2 × `limit`. The retry hint is honest: the whole
 * seconds until one call's worth has refilled. A token's own `rateLimit` wins
 * over the default (`hub.rateLimit`); `maxConcurrent` null means no cap.
 * A refused call consumes nothing.
 *
 * Memory is bounded by the tokens active in the last minute: an entry whose
 * bucket is full again and has no call in flight is indistinguishable from a
 * fresh one, so the sweep (at most once per `sweepEveryMs`, run by `acquire`)
 * drops it without losing anything.
 *
 * PER PROCESS: the state lives in this process's memory — the limiter of SQLite (one process).
 * On PostgreSQL the gateway uses `FleetCallLimiter` (`fleet-limits.ts`), whose rate holds for the
 * fleet, and which falls back to this one when its store cannot be reached.
 */

import { GatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';

/** Ends the call's hold on its concurrency slot. Idempotent: calling it again does nothing. */
export type Release = () => void;

/** What the limiter needs of a caller: `TokenPrincipal` fits; a principal without limits uses the default. */
export type LimitedPrincipal = Pick<Principal, 'id'> & {
  rateLimit?: number | null | undefined;
  maxConcurrent?: number | null | undefined;
};

export interface CallLimiterOptions {
  /** Milliseconds since some epoch; injectable for tests. */
  now?: () => number;
  /** Rate window (default 60 000 ms: limits are per minute). */
  windowMs?: number;
  /** How often stale entries are swept, at most (default 60 000 ms). */
  sweepEveryMs?: number;
  /** The retry hint for a concurrency refusal, in seconds (default 1). */
  concurrencyRetryS?: number;
}

/**
 * A bucket in integer units, so the arithmetic (and the retry hint) is exact: one call costs `windowMs`
 * units, the capacity is `limit × windowMs`, and every millisecond refills `limit` units.
 */
interface Entry {
  credit: number;
  /** The limit the bucket was last refilled for. */
  limit: number;
  updatedAt: number;
  inFlight: number;
}

export class CallLimiter {
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly windowMs: number;
  private readonly sweepEveryMs: number;
  private readonly concurrencyRetryS: number;
  private lastSweep: number;

  constructor(options: CallLimiterOptions = {}) {
    this.now = options.now ?? Date.now;
    this.windowMs = options.windowMs ?? 60_000;
    this.sweepEveryMs = options.sweepEveryMs ?? 60_000;
    this.concurrencyRetryS = options.concurrencyRetryS ?? 1;
    this.lastSweep = this.now();
  }

  /**
   * Admits one call for `principal` or throws `rate_limited` with `{retryAfterS, reason}` (`reason` is
   * `rate` or `concurrency`). A refused call consumes nothing. Call the returned `Release` when the call ends.
   */
  acquire(principal: LimitedPrincipal, defaultPerMinute: number): Release {
    const now = this.now();
    if (now - this.lastSweep >= this.sweepEveryMs) this.sweep(now);

    const limit = positiveInt(principal.rateLimit) ?? positiveInt(defaultPerMinute) ?? 1;
    const maxConcurrent = positiveInt(principal.maxConcurrent);
    let entry = this.entries.get(principal.id);
    if (!entry) {
      entry = { credit: limit * this.windowMs, limit, updatedAt: now, inFlight: 0 };
      this.entries.set(principal.id, entry);
    } else {
      this.refill(entry, limit, now);
    }

    if (maxConcurrent !== undefined && entry.inFlight >= maxConcurrent) {
      throw new GatehouseError(
        'rate_limited',
        `This token already has ${entry.inFlight} calls in flight (its limit is ${maxConcurrent}); retry when one ends.`,
        { retryAfterS: this.concurrencyRetryS, reason: 'concurrency' },
      );
    }
    if (entry.credit < this.windowMs) {
      const waitMs = Math.ceil((this.windowMs - entry.credit) / limit);
      const retryAfterS = Math.max(1, Math.ceil(waitMs / 1000));
      throw new GatehouseError(
        'rate_limited',
        `This token's limit of ${limit} calls per minute is reached; retry in ${retryAfterS} s.`,
        { retryAfterS, reason: 'rate' },
      );
    }

    entry.credit -= this.windowMs;
    entry.inFlight += 1;
    const held = entry;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      held.inFlight -= 1;
    };
  }

  /** Tokens currently tracked (for tests and diagnostics). */
  get size(): number {
    return this.entries.size;
  }

  /** Drops every entry that is full again and idle; returns how many were dropped. */
  sweep(now: number = this.now()): number {
    this.lastSweep = now;
    let dropped = 0;
    for (const [id, entry] of this.entries) {
      if (entry.inFlight > 0) continue;
      const full = entry.credit + (now - entry.updatedAt) * entry.limit >= entry.limit * this.windowMs;
      if (full) {
        this.entries.delete(id);
        dropped += 1;
      }
    }
    return dropped;
  }

  private refill(entry: Entry, limit: number, now: number): void {
    const elapsed = Math.max(0, now - entry.updatedAt);
    // A changed limit (PATCH /api/tokens) applies at once: the calls already used this window stay used,
    // so a raised limit frees the difference now and a lowered one leaves at most its new allowance.
    const refilled = Math.min(entry.limit * this.windowMs, entry.credit + elapsed * entry.limit);
    entry.credit = Math.max(0, Math.min(limit * this.windowMs, refilled + (limit - entry.limit) * this.windowMs));
    entry.limit = limit;
    entry.updatedAt = now;
  }
}

function positiveInt(value: number | null | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 1 ? Math.floor(value) : undefined;
}
