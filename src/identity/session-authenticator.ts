/**
 * Dashboard sessions as principals. A request with a bearer token is the token's (API clients, the
 * dashboard that keeps sending it); a request without one may carry the session cookie. A session is
 * its user (role from the user), or — opened with a token nobody owns — that token. Unsafe methods
 * signed in by cookie must echo the session's CSRF token in a header (the dashboard reads it from the
 * non-HttpOnly `gatehouse_csrf` cookie): a cross-site form cannot.
 */
import type { FastifyRequest } from 'fastify';
import { GatehouseError } from '../errors.js';
import type { Store } from '../store/db.js';
import type { SessionRecord, SessionStore } from '../store/sessions.js';
import type { TokenRecord, TokenStore } from '../store/tokens.js';
import type { UserStore } from '../store/users.js';
import { signInGroupsOf, signInRoleOf } from './owner-role.js';
import { type Authenticator, bearerToken, type Principal, type Role } from './principal.js';
import { hashToken, safeEqual } from './tokens.js';
import type { User } from './users.js';

export const SESSION_COOKIE = 'gatehouse_session';
export const CSRF_COOKIE = 'gatehouse_csrf';
export const CSRF_HEADER = 'x-gatehouse-csrf';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** One cookie's value from the Cookie header (no dependency for a two-cookie need). */
export function readCookie(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (typeof header !== 'string') return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      return value.length > 0 && value.length <= 256 ? value : undefined;
    }
  }
  return undefined;
}

export function userPrincipal(user: User): Principal {
  return {
    id: user.id,
    name: user.name,
    role: user.role,
    groups: user.groups,
    user: { id: user.id, name: user.name, role: user.role, groups: user.groups },
  };
}

/**
 * A person signed in with a token they own: the person, within what that token may do (`signInRoleOf`,
 * `signInGroupsOf`). `user` is narrowed too, so that what a member may do "within its groups" stays within the token's.
 */
export function tokenSignInPrincipal(user: User, token: { role: Role; groups: readonly string[] }): Principal {
  const groups = signInGroupsOf(token.role, token.groups, user.groups);
  return { ...userPrincipal({ ...user, groups }), role: signInRoleOf(token.role, user.role) };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The dashboard session this request was signed in by (cookie), if any. */
    session?: SessionRecord;
  }
}

export interface SessionDeps {
  store: Store;
  sessions: SessionStore;
  users: UserStore;
  tokens: TokenStore;
}

/** Sessions read at most once per change of sessions, users or tokens (any replica's change moves the version). */
export function sessionAuthenticator(deps: SessionDeps): Authenticator {
  let cache:
    | {
        version: string;
        byHash: Map<string, SessionRecord | null>;
        users: Map<string, User>;
        tokens: Map<string, TokenRecord | null>;
      }
    | undefined;
  const versionNow = () =>
    `${deps.store.version('sessions')}|${deps.store.version('users')}|${deps.store.version('tokens')}`;

  const resolve = async (request: FastifyRequest, secret: string): Promise<Principal | undefined> => {
    const version = versionNow();
    if (cache?.version !== version) {
      cache = { version, byHash: new Map(), users: await deps.users.all(), tokens: new Map() };
    }
    const hash = hashToken(secret);
    let session = cache.byHash.get(hash);
    if (session === undefined) {
      session = (await deps.sessions.findBySecret(secret)) ?? null;
      if (cache.byHash.size > 10_000) cache.byHash.clear();
      cache.byHash.set(hash, session);
    }
    if (!session || session.expiresAt <= new Date().toISOString()) return undefined;
    let principal: Principal | undefined;
    // The token a session was opened with, if any: revoked, it ends the session.
    let token: TokenRecord | null | undefined;
    if (session.tokenId) {
      token = cache.tokens.get(session.tokenId);
      if (token === undefined) {
        token = (await deps.tokens.get(session.tokenId)) ?? null;
        if (cache.tokens.size > 10_000) cache.tokens.clear();
        cache.tokens.set(session.tokenId, token);
      }
    }
    if (session.tokenId && !token) return undefined;
    if (session.userId) {
      const user = cache.users.get(session.userId);
      if (!user || user.disabled) return undefined;
      // Opened with a token the user owns: the user, within what that token may do.
      principal = token ? tokenSignInPrincipal(user, token) : userPrincipal(user);
    } else if (token) {
      principal = { id: token.id, name: token.name, role: token.role, groups: token.groups };
    }
    if (!principal) return undefined;
    if (!SAFE_METHODS.has(request.method)) {
      const sent = request.headers[CSRF_HEADER];
      if (typeof sent !== 'string' || !safeEqual(hashToken(sent), session.csrfHash)) {
        throw new GatehouseError('auth.csrf_failed');
      }
    }
    request.session = session;
    return principal;
  };

  return (request) => {
    const secret = readCookie(request, SESSION_COOKIE);
    if (secret === undefined) return undefined;
    const config = request.routeOptions.config as
      | { mcpEndpoint?: boolean; gatehouse?: { access?: unknown } }
      | undefined;
    // MCP endpoints take bearer tokens only: a browser's cookie must never make an agent call.
    if (config?.mcpEndpoint) return undefined;
    // A public route that changes state (sign-in, logout) checks what it needs itself; no cookie principal there.
    if (config?.gatehouse?.access === 'public' && !SAFE_METHODS.has(request.method)) return undefined;
    return resolve(request, secret);
  };
}

/** A bearer header wins (API clients, agents); without one, the session cookie. */
export function combinedAuthenticator(bearer: Authenticator, session: Authenticator): Authenticator {
  return (request) => (bearerToken(request) !== undefined ? bearer(request) : session(request));
}
