/**
 * Per-address limits of the endpoints anyone may call unauthenticated (OAuth's, the dashboard sign-in): each
 * endpoint draws on its own allowance per client address, so a burst at one never starves another. On
 * PostgreSQL they are counted in the store by the fleet's leased-block limiter, so every replica draws on one
 * count per address and endpoint (its error bound: never over the limit, at most (replicas − 1) × (block − 1)
 * refused early); on SQLite, one process, in memory.
 */
import { GatehouseError, isGatehouseError } from '../errors.js';
import type { Store } from '../store/db.js';
import { FleetCallLimiter } from './fleet-limits.js';
import { CallLimiter } from './limits.js';

export class AddressLimiter<Endpoint extends string> {
  private readonly counter: Pick<CallLimiter, 'acquire'> | Pick<FleetCallLimiter, 'acquire'>;

  /**
   * `perMinute`: each endpoint's requests per minute per address; `prefix` keeps the counts apart from token
   * ids' and from other limiters' (no token id contains a colon); `what` names the requests in the refusal.
   */
  constructor(
    store: Store,
    private readonly perMinute: Readonly<Record<Endpoint, number>>,
    private readonly prefix: string,
    private readonly what: string,
  ) {
    this.counter = store.kind === 'postgres' ? new FleetCallLimiter({ store }) : new CallLimiter();
  }

  /**
   * Counts one request of `address` at `endpoint`; throws `rate_limited` with `{retryAfterS}` (sent as
   * `Retry-After`) once this minute's allowance is used.
   */
  async take(endpoint: Endpoint, address: string): Promise<void> {
    const perMinute = this.perMinute[endpoint];
    try {
      // Nothing stays in flight: the count is of requests, not of concurrent ones.
      const release = await this.counter.acquire(
        { id: `${this.prefix}:${endpoint}:${address}`, rateLimit: perMinute },
        perMinute,
      );
      release();
    } catch (error) {
      if (!isGatehouseError(error) || error.code !== 'rate_limited') throw error;
      const retryAfterS = Number((error.details as { retryAfterS?: unknown } | undefined)?.retryAfterS) || 60;
      throw new GatehouseError(
        'rate_limited',
        `Too many ${this.what} from this address at this endpoint; retry in ${retryAfterS} s.`,
        { retryAfterS },
      );
    }
  }
}
