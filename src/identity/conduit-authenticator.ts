import { type Authenticator, bearerToken, type Principal } from './principal.js';
import { safeEqual } from './tokens.js';

/** The conduit's gate: one shared bearer, or open when none is configured (loopback only, checked at start). */
export function conduitAuthenticator(token: string | undefined): Authenticator {
  const anonymous: Principal = { id: 'conduit', name: 'conduit', role: 'ops', groups: [] };
  return (request) => {
    if (token === undefined) return anonymous;
    const given = bearerToken(request);
    return given !== undefined && safeEqual(given, token) ? anonymous : undefined;
  };
}
