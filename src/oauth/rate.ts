/**
 * Per-address limits of the unauthenticated OAuth endpoints (`/token` and `/revoke`, `/register`, the
 * consent answer). On PostgreSQL they are counted in the store by the fleet's leased-block limiter, so
 * every replica draws on one count per address and endpoint (its error bound: never over the limit,
 * at most (replicas − 1) × (block − 1) refused early); on SQLite, one process, in memory.
 */
import { GatehouseError, isGatehouseError } from '../errors.js';
import { FleetCallLimiter } from '../policy/fleet-limits.js';
import { CallLimiter } from '../policy/limits.js';
import type { Store } from '../store/db.js';

/** Requests per minute per client address. */
export const OAUTH_LIMITS = { token: 120, register: 20, consent: 30 } as const;
export type OAuthEndpoint = keyof typeof OAUTH_LIMITS;

export class EndpointLimiter {
  private readonly counter: Pick<CallLimiter, 'acquire'> | Pick<FleetCallLimiter, 'acquire'>;

  constructor(store: Store) {
    this.counter = store.kind === 'postgres' ? new FleetCallLimiter({ store }) : new CallLimiter();
  }

  /** Counts one request of `address` at `endpoint`; throws `rate_limited` once this minute's allowance is used. */
  async take(endpoint: OAuthEndpoint, address: string): Promise<void> {
    const perMinute = OAUTH_LIMITS[endpoint];
    try {
      // Keys never collide with token ids (`oauth:` is no token id's prefix); nothing stays in flight.
      const release = await this.counter.acquire(
        { id: `oauth:${endpoint}:${address}`, rateLimit: perMinute },
        perMinute,
      );
      release();
    } catch (error) {
      if (!isGatehouseError(error) || error.code !== 'rate_limited') throw error;
      throw new GatehouseError('rate_limited', 'Too many OAuth requests from this address; retry in a minute.');
    }
  }
}
