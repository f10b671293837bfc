/**
 * Per-address limits of the unauthenticated OAuth endpoints: `/authorize` (the consent page's loads),
 * `/token`, `/revoke`, `/register` and the consent answer each draw on their own allowance, so a burst at
 * one never starves another (a client revoking tokens does not lock itself out of refreshing them). On
 * PostgreSQL they are counted in the store by the fleet's leased-block limiter, so every replica draws on
 * one count per address and endpoint (its error bound: never over the limit, at most (replicas − 1) ×
 * (block − 1) refused early); on SQLite, one process, in memory.
 */
import type { Config } from '../config.js';
import { GatehouseError, isGatehouseError } from '../errors.js';
import { FleetCallLimiter } from '../policy/fleet-limits.js';
import { CallLimiter } from '../policy/limits.js';
import type { Store } from '../store/db.js';

/** Requests per minute per client address, for the endpoints whose limit is not a setting. */
export const OAUTH_LIMITS = { register: 20, consent: 30 } as const;
export type OAuthEndpoint = 'authorize' | 'token' | 'revoke' | keyof typeof OAUTH_LIMITS;

export type OAuthLimitSettings = Pick<
  Config,
  'oauthAuthorizeRateLimit' | 'oauthTokenRateLimit' | 'oauthRevokeRateLimit'
>;

export class EndpointLimiter {
  private readonly counter: Pick<CallLimiter, 'acquire'> | Pick<FleetCallLimiter, 'acquire'>;
  private readonly perMinute: Record<OAuthEndpoint, number>;

  constructor(store: Store, settings: OAuthLimitSettings) {
    this.counter = store.kind === 'postgres' ? new FleetCallLimiter({ store }) : new CallLimiter();
    this.perMinute = {
      ...OAUTH_LIMITS,
      authorize: settings.oauthAuthorizeRateLimit,
      token: settings.oauthTokenRateLimit,
      revoke: settings.oauthRevokeRateLimit,
    };
  }

  /**
   * Counts one request of `address` at `endpoint`; throws `rate_limited` with `{retryAfterS}` (sent as
   * `Retry-After`) once this minute's allowance is used.
   */
  async take(endpoint: OAuthEndpoint, address: string): Promise<void> {
    const perMinute = this.perMinute[endpoint];
    try {
      // Keys never collide with token ids (`oauth:` is no token id's prefix); nothing stays in flight.
      const release = await this.counter.acquire(
        { id: `oauth:${endpoint}:${address}`, rateLimit: perMinute },
        perMinute,
      );
      release();
    } catch (error) {
      if (!isGatehouseError(error) || error.code !== 'rate_limited') throw error;
      const retryAfterS = Number((error.details as { retryAfterS?: unknown } | undefined)?.retryAfterS) || 60;
      throw new GatehouseError(
        'rate_limited',
        `Too many OAuth requests from this address at this endpoint; retry in ${retryAfterS} s.`,
        { retryAfterS },
      );
    }
  }
}
