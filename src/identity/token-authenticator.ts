/**
 * The gateway's authenticator: bearer → SHA-256 → the live token cache. The
 * cache is rebuilt only when the store's `tokens` (or `users`) version moves, so
 * a revoked token — or one whose owner was disabled — is refused on the next
 * request of every process. Looking up a hash leaks nothing about the token (no
 * prefix comparison of the secret itself).
 */
import type { Store } from '../store/db.js';
import type { TokenRecord, TokenStore } from '../store/tokens.js';
import type { UserStore } from '../store/users.js';
import { roleWithinOwner } from './owner-role.js';
import { type Authenticator, bearerToken, type TokenPrincipal } from './principal.js';
import { hashToken } from './tokens.js';
import type { User } from './users.js';

function toPrincipal(record: TokenRecord, owner: User | undefined): TokenPrincipal {
  return {
    id: record.id,
    name: record.name,
    role: owner ? roleWithinOwner(record.role, owner.role) : record.role,
    groups: record.groups,
    rateLimit: record.rateLimit,
    maxConcurrent: record.maxConcurrent,
    maxSessions: record.maxSessions,
    ...(owner ? { user: { id: owner.id, name: owner.name, role: owner.role, groups: owner.groups } } : {}),
    toolView: record.toolView,
  };
}

export function tokenAuthenticator(store: Store, tokens: TokenStore, users?: UserStore): Authenticator {
  let cache: { version: string; byHash: Map<string, TokenPrincipal> } | undefined;
  const versionNow = () => (users ? `${store.version('tokens')}|${store.version('users')}` : store.version('tokens'));
  const reload = async (version: string) => {
    const [records, people] = await Promise.all([tokens.activeByHash(), users ? users.all() : new Map<string, User>()]);
    const byHash = new Map<string, TokenPrincipal>();
    for (const [hash, record] of records) {
      const owner = record.userId ? people.get(record.userId) : undefined;
      // A token whose owner is disabled (or gone) acts for nobody: refused like a revoked one.
      if (record.userId && (!owner || owner.disabled)) continue;
      byHash.set(hash, toPrincipal(record, owner));
    }
    cache = { version, byHash };
    return byHash;
  };
  // Synchronous while the cache is current (every request but the first after a token change).
  return (request) => {
    const token = bearerToken(request);
    if (token === undefined) return undefined;
    const version = versionNow();
    if (cache?.version === version) return cache.byHash.get(hashToken(token));
    return reload(version).then((byHash) => byHash.get(hashToken(token)));
  };
}
