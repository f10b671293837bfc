/**
 * The gateway's authenticator: bearer → SHA-256 → the live token cache. The
 * cache is rebuilt only when the store's `tokens` version moves, so a revoked
 * token is refused on the next request of every process. Looking up a hash
 * leaks nothing about the token (no prefix comparison of the secret itself).
 */
import type { Store } from '../store/db.js';
import type { TokenRecord, TokenStore } from '../store/tokens.js';
import { type Authenticator, bearerToken, type TokenPrincipal } from './principal.js';
import { hashToken } from './tokens.js';

function toPrincipal(record: TokenRecord): TokenPrincipal {
  return {
    id: record.id,
    name: record.name,
    role: record.role,
    groups: record.groups,
    rateLimit: record.rateLimit,
    maxConcurrent: record.maxConcurrent,
    maxSessions: record.maxSessions,
    toolView: record.toolView,
  };
}

export function tokenAuthenticator(store: Store, tokens: TokenStore): Authenticator {
  let cache: { version: string; byHash: Map<string, TokenPrincipal> } | undefined;
  const reload = async (version: string) => {
    const records = await tokens.activeByHash();
    cache = { version, byHash: new Map([...records].map(([hash, record]) => [hash, toPrincipal(record)])) };
    return cache.byHash;
  };
  // Synchronous while the cache is current (every request but the first after a token change).
  return (request) => {
    const token = bearerToken(request);
    if (token === undefined) return undefined;
    const version = store.version('tokens');
    if (cache?.version === version) return cache.byHash.get(hashToken(token));
    return reload(version).then((byHash) => byHash.get(hashToken(token)));
  };
}
