/**
 * Per-address limits of the unauthenticated OAuth endpoints (`AddressLimiter`): `/authorize` (the consent
 * page's loads), `/token`, `/revoke`, `/register` and the consent answer each draw on their own allowance, so
 * a burst at one never starves another (a client revoking tokens does not lock itself out of refreshing them).
 */
import type { Config } from '../config.js';
import { AddressLimiter } from '../policy/address-limits.js';
import type { Store } from '../store/db.js';

/** Requests per minute per client address, for the endpoints whose limit is not a setting. */
export const OAUTH_LIMITS = { register: 20, consent: 30 } as const;
export type OAuthEndpoint = 'authorize' | 'token' | 'revoke' | keyof typeof OAUTH_LIMITS;

export type OAuthLimitSettings = Pick<
  Config,
  'oauthAuthorizeRateLimit' | 'oauthTokenRateLimit' | 'oauthRevokeRateLimit'
>;

/** The OAuth endpoints' limits (`AddressLimiter`): the consent answer and registration fixed, the others settings. */
export class EndpointLimiter extends AddressLimiter<OAuthEndpoint> {
  constructor(store: Store, settings: OAuthLimitSettings) {
    super(
      store,
      {
        ...OAUTH_LIMITS,
        authorize: settings.oauthAuthorizeRateLimit,
        token: settings.oauthTokenRateLimit,
        revoke: settings.oauthRevokeRateLimit,
      },
      'oauth',
      'OAuth requests',
    );
  }
}
