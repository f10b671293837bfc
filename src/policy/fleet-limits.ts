/**
 * Per-token rate limits that hold for a fleet of replicas on one PostgreSQL store.
 *
 * The rate is counted per token and fixed window (`windowMs`, one minute) in `rate_windows`; a
 * replica does not ask the store per call but leases a block of calls at a time (`leaseSize`:
 * about 5 % of the limit, 1 to 50 calls) and admits calls from its lease locally, so the store sees
 * one small transaction per block. The counter never passes the limit, so:
 *
 *   ERROR BOUND: the fleet admits at most `limit` calls per token per window (none over), and may
 *   refuse up to (replicas − 1) × (leaseSize − 1) calls of a window that other replicas leased and
 *   did not use. As with any fixed window, two windows back to back let through at most 2 × `limit`
 *   in a 60-second span that straddles them.
 *
 * The concurrency cap (`maxConcurrent`) stays per replica. A store that cannot be reached falls
 * back to this replica's own limiter (`CallLimiter`) for that call, so the hub keeps working.
 */

import { GatehouseError } from '../errors.js';
import type { Logger } from '../logging.js';
import type { Store } from '../store/db.js';
import { CallLimiter, type LimitedPrincipal, type Release } from './limits.js';

export interface FleetCallLimiterOptions {
  store: Store;
  logger?: Logger;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
  /** Rate window (default 60 000 ms: limits are per minute). */
  windowMs?: number;
  /** The retry hint for a concurrency refusal, in seconds (default 1). */
  concurrencyRetryS?: number;
}

interface Entry {
  /** The window this entry's lease belongs to (its start, ms). */
  window: number;
  /** Calls leased from the store and not yet admitted here. */
  remaining: number;
  /** The store has no calls left for this window. */
  exhausted: boolean;
  /** A lease on its way: callers that found nothing left wait for it rather than ask again. */
  pending?: Promise<void> | undefined;
  inFlight: number;
}

/** Calls a replica leases at once: about 5 % of the limit, 1 to 50. */
export function leaseSize(limit: number): number {
  return Math.max(1, Math.min(50, Math.ceil(limit / 20)));
}

export class FleetCallLimiter {
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly windowMs: number;
  private readonly concurrencyRetryS: number;
  private readonly fallback: CallLimiter;
  /** Windows before this one have been pruned from the store by this replica. */
  private prunedBefore = 0;
  private sweptWindow = 0;

  constructor(private readonly options: FleetCallLimiterOptions) {
    this.now = options.now ?? Date.now;
    this.windowMs = options.windowMs ?? 60_000;
    this.concurrencyRetryS = options.concurrencyRetryS ?? 1;
    this.fallback = new CallLimiter({
      now: this.now,
      windowMs: this.windowMs,
      concurrencyRetryS: this.concurrencyRetryS,
    });
  }

  /**
   * Admits one call for `principal` or throws `rate_limited` (`{retryAfterS, reason}`), as
   * `CallLimiter.acquire` does; answers at once while this replica's lease lasts, and after one store
   * transaction when it must lease more. A refused call consumes nothing.
   */
  acquire(principal: LimitedPrincipal, defaultPerMinute: number): Release | Promise<Release> {
    const entry = this.entryFor(principal.id);
    this.checkConcurrency(entry, principal);
    if (entry.remaining > 0) return this.admit(entry);
    return this.acquireLeased(principal, defaultPerMinute, entry);
  }

  /** Tokens currently tracked (for tests and diagnostics). */
  get size(): number {
    return this.entries.size;
  }

  private async acquireLeased(principal: LimitedPrincipal, defaultPerMinute: number, entry: Entry): Promise<Release> {
    const limit = positiveInt(principal.rateLimit) ?? positiveInt(defaultPerMinute) ?? 1;
    for (;;) {
      const window = this.windowOf(this.now());
      if (entry.window !== window) this.reset(entry, window);
      this.checkConcurrency(entry, principal);
      if (entry.remaining > 0) return this.admit(entry);
      if (entry.exhausted) {
        const retryAfterS = Math.max(1, Math.ceil((window + this.windowMs - this.now()) / 1000));
        throw new GatehouseError(
          'rate_limited',
          `This token's limit of ${limit} calls per minute is reached; retry in ${retryAfterS} s.`,
          { retryAfterS, reason: 'rate' },
        );
      }
      entry.pending ??= this.lease(principal.id, entry, limit, window).finally(() => {
        entry.pending = undefined;
      });
      try {
        await entry.pending;
      } catch (error) {
        this.options.logger?.warn({ err: error }, 'rate limit store unavailable; limiting this replica alone');
        return this.fallback.acquire(principal, defaultPerMinute);
      }
    }
  }

  /** Takes up to one lease of calls for `tokenId` in `window` from the store, atomically across replicas. */
  private async lease(tokenId: string, entry: Entry, limit: number, window: number): Promise<void> {
    const block = leaseSize(limit);
    const granted = await this.options.store.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('rate_windows')
        .values({ token_id: tokenId, window_start: window, used: 0 })
        .onConflict((oc) => oc.columns(['token_id', 'window_start']).doNothing())
        .execute();
      const row = await trx
        .selectFrom('rate_windows')
        .select('used')
        .where('token_id', '=', tokenId)
        .where('window_start', '=', window)
        .forUpdate()
        .executeTakeFirstOrThrow();
      const used = Number(row.used);
      const grant = Math.max(0, Math.min(block, limit - used));
      if (grant > 0) {
        await trx
          .updateTable('rate_windows')
          .set({ used: used + grant })
          .where('token_id', '=', tokenId)
          .where('window_start', '=', window)
          .execute();
      }
      return grant;
    });
    if (entry.window !== window) return; // the window ended meanwhile: this lease is void
    if (granted > 0) entry.remaining += granted;
    else entry.exhausted = true;
    if (window > this.prunedBefore) {
      this.prunedBefore = window;
      // Windows before the previous one are of no use to anyone; one delete per window per replica.
      void this.options.store.db
        .deleteFrom('rate_windows')
        .where('window_start', '<', window - this.windowMs)
        .execute()
        .catch(() => {});
    }
  }

  private entryFor(id: string): Entry {
    const window = this.windowOf(this.now());
    if (window !== this.sweptWindow) this.sweep(window);
    let entry = this.entries.get(id);
    if (!entry) {
      entry = { window, remaining: 0, exhausted: false, inFlight: 0 };
      this.entries.set(id, entry);
    } else if (entry.window !== window) this.reset(entry, window);
    return entry;
  }

  private reset(entry: Entry, window: number): void {
    entry.window = window;
    entry.remaining = 0;
    entry.exhausted = false;
  }

  /** Drops the entries of past windows with nothing in flight (memory bounded by the tokens of this window). */
  private sweep(window: number): void {
    this.sweptWindow = window;
    for (const [id, entry] of this.entries) {
      if (entry.window !== window && entry.inFlight === 0 && !entry.pending) this.entries.delete(id);
    }
  }

  private checkConcurrency(entry: Entry, principal: LimitedPrincipal): void {
    const maxConcurrent = positiveInt(principal.maxConcurrent);
    if (maxConcurrent !== undefined && entry.inFlight >= maxConcurrent) {
      throw new GatehouseError(
        'rate_limited',
        `This token already has ${entry.inFlight} calls in flight (its limit is ${maxConcurrent}); retry when one ends.`,
        { retryAfterS: this.concurrencyRetryS, reason: 'concurrency' },
      );
    }
  }

  private admit(entry: Entry): Release {
    entry.remaining -= 1;
    entry.inFlight += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      entry.inFlight -= 1;
    };
  }

  private windowOf(now: number): number {
    return Math.floor(now / this.windowMs) * this.windowMs;
  }
}

function positiveInt(value: number | null | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 1 ? Math.floor(value) : undefined;
}
