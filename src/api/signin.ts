/**
 * Dashboard sign-in: with a token (the session is its owner, or the token itself when nobody owns it)
 * or with the configured OpenID Connect provider (users provisioned on first sign-in). A session is a
 * cookie (HttpOnly, SameSite=Lax, Secure unless the public address is loopback) plus a CSRF token the
 * dashboard echoes in `x-gatehouse-csrf` on state-changing requests; logout revokes it in the store.
 * An OIDC sign-in is bound to the browser that started it (a nonce cookie on `/auth/oidc`, as an upstream
 * connect is on `/oauth`): a callback URL replayed in another browser signs nobody in (login CSRF).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { isLoopbackHost } from '../config.js';
import { GatehouseError, isGatehouseError } from '../errors.js';
import {
  CSRF_COOKIE,
  CSRF_HEADER,
  hashToken,
  type Principal,
  readCookie,
  SESSION_COOKIE,
  safeEqual,
  tokenSignInPrincipal,
  userPrincipal,
} from '../identity/index.js';
import { mapClaims, type OidcClient, randomSecret } from '../identity/oidc.js';
import { takeLeftGroups } from '../identity/user-lifecycle.js';
import { AddressLimiter } from '../policy/address-limits.js';
import type { Store } from '../store/db.js';
import { nowIso } from '../store/json.js';
import { SESSION_TTL_MS, type SessionStore } from '../store/sessions.js';
import type { TokenStore } from '../store/tokens.js';
import type { UserStore } from '../store/users.js';
import {
  browserNonceHash,
  browserNonceOf,
  clearBrowserCookie,
  newBrowserNonce,
  OIDC_SIGN_IN_BINDING,
  setBrowserCookie,
} from '../upstream-auth/browser.js';
import { defineRoute, type RouteDeclaration } from './route.js';

/**
 * Sign-in attempts per minute per client address: a person types a token a few times, a script hammering the
 * route (each attempt is a store read) is held off. Tokens are 192-bit: this is about load, not guessing.
 */
const SIGN_IN_PER_MINUTE = 120;

/** An OIDC sign-in must come back within this long. */
const LOGIN_TTL_MS = 10 * 60 * 1000;

export interface SignInDeps {
  store: Store;
  sessions: SessionStore;
  users: UserStore;
  tokens: TokenStore;
  audit: AuditLog;
  /** Where a person's mapped role and groups changing is told (their agents' open sessions end). */
  events: Pick<EventHub, 'publish'>;
  oidc: OidcClient | undefined;
  /** The address clients use (GATEHOUSE_PUBLIC_URL, else the bound address). */
  baseUrl: () => string;
}

/** Only a path on this gateway: never an absolute or protocol-relative URL (no open redirect). */
const returnPath = z
  .string()
  .max(500)
  .regex(/^\/(?![/\\])[^\s]*$/, 'must be a path on this gateway')
  .default('/');

function cookieAttributes(baseUrl: string): string {
  const url = new URL(baseUrl);
  const secure = url.protocol === 'https:' || !isLoopbackHost(url.hostname);
  return `Path=/; SameSite=Lax; Max-Age=${Math.floor(SESSION_TTL_MS / 1000)}${secure ? '; Secure' : ''}`;
}

function setSessionCookies(reply: FastifyReply, baseUrl: string, secret: string, csrf: string): void {
  const attrs = cookieAttributes(baseUrl);
  reply.header('set-cookie', [`${SESSION_COOKIE}=${secret}; HttpOnly; ${attrs}`, `${CSRF_COOKIE}=${csrf}; ${attrs}`]);
}

function clearSessionCookies(reply: FastifyReply, baseUrl: string): void {
  const attrs = cookieAttributes(baseUrl).replace(/Max-Age=\d+/, 'Max-Age=0');
  reply.header('set-cookie', [`${SESSION_COOKIE}=; HttpOnly; ${attrs}`, `${CSRF_COOKIE}=; ${attrs}`]);
}

function describePrincipal(p: Principal) {
  return {
    id: p.id,
    name: p.name,
    role: p.role,
    // The groups the session acts with: a token's sign-in may hold fewer than its owner (`tokenSignInPrincipal`).
    groups: [...p.groups],
    ...(p.user ? { user: { id: p.user.id, name: p.user.name, role: p.user.role } } : {}),
  };
}

export function signInRoutes(deps: SignInDeps): RouteDeclaration[] {
  const { sessions, users, tokens, audit, oidc } = deps;
  const redirectUri = () => `${deps.baseUrl()}/auth/oidc/callback`;
  const limits = new AddressLimiter(deps.store, { signIn: SIGN_IN_PER_MINUTE }, 'signin', 'sign-in attempts');

  /** The session a request's cookie names, with a valid CSRF header (logout is a state change too). */
  const currentSession = async (request: FastifyRequest, checkCsrf: boolean) => {
    const secret = readCookie(request, SESSION_COOKIE);
    const session = secret ? await sessions.findBySecret(secret) : undefined;
    if (session && checkCsrf) {
      const sent = request.headers[CSRF_HEADER];
      if (typeof sent !== 'string' || !safeEqual(hashToken(sent), session.csrfHash)) {
        throw new GatehouseError('auth.csrf_failed');
      }
    }
    return session;
  };

  return [
    defineRoute({
      method: 'GET',
      url: '/auth/session',
      summary: 'Who the session cookie signs in (if anyone), and how one may sign in here.',
      scope: 'system',
      access: 'public',
      mcp: { exclude: 'browser sign-in, not an agent operation' },
      async handler({ request }) {
        const principal = request.session ? request.principal : undefined;
        return {
          signedIn: principal !== undefined,
          ...(principal ? { principal: describePrincipal(principal), expiresAt: request.session?.expiresAt } : {}),
          oidc: oidc ? { issuer: oidc.settings.issuer, start: '/auth/oidc/start' } : null,
        };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/auth/session',
      summary: 'Sign in with a token: opens a dashboard session (cookie) as its owner, or as the token itself.',
      scope: 'system',
      access: 'public',
      mcp: { exclude: 'browser sign-in, not an agent operation' },
      body: z.strictObject({ token: z.string().min(1).max(500) }),
      async handler({ body, reply, request }) {
        await limits.take('signIn', request.ip);
        const record = await tokens.activeWithHash(hashToken(body.token));
        if (!record) throw new GatehouseError('unauthorized', 'That token is not valid here.');
        let principal: Principal;
        if (record.userId) {
          const owner = await users.get(record.userId);
          if (!owner || owner.disabled) throw new GatehouseError('unauthorized', 'That token’s owner is disabled.');
          // The owner, within what the token may do: an agent's token never opens its owner's admin session,
          // nor the groups its owner has and it has not.
          principal = tokenSignInPrincipal(owner, record);
        } else if (record.role === 'admin' || record.role === 'operator') {
          principal = { id: record.id, name: record.name, role: record.role, groups: record.groups };
        } else {
          throw new GatehouseError('forbidden', 'Only admin and operator tokens, or tokens a user owns, sign in here.');
        }
        // The token is kept on the session: revoking it ends the session, and its role bounds the session's.
        const opened = await sessions.create({ userId: record.userId, tokenId: record.id });
        if (record.userId) await users.touch(record.userId);
        await audit.recordAdmin({
          action: 'session.create',
          actor: principal,
          data: { via: 'token', token: record.id },
        });
        setSessionCookies(reply, deps.baseUrl(), opened.secret, opened.csrf);
        return { signedIn: true, principal: describePrincipal(principal), csrf: opened.csrf };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/auth/logout',
      summary: 'Sign out: the session is revoked in the store (on every replica) and its cookies cleared.',
      scope: 'system',
      access: 'public',
      mcp: { exclude: 'browser sign-in, not an agent operation' },
      async handler({ request, reply }) {
        const session = await currentSession(request, true);
        if (session) {
          await sessions.revoke(session.id);
          await audit.recordAdmin({
            action: 'session.revoke',
            actor: request.principal,
            data: { session: session.id },
          });
        }
        clearSessionCookies(reply, deps.baseUrl());
        return { signedOut: session !== undefined };
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/auth/oidc/start',
      summary: 'Starts a sign-in at the OpenID Connect provider (authorization code + PKCE S256).',
      scope: 'system',
      access: 'public',
      mcp: { exclude: 'browser sign-in, not an agent operation' },
      query: z.strictObject({ returnTo: returnPath }),
      async handler({ query, reply }) {
        if (!oidc) throw new GatehouseError('oidc.not_configured');
        const state = randomSecret();
        const nonce = randomSecret();
        const verifier = randomSecret();
        const url = await oidc.authorizationUrl({ state, nonce, verifier, redirectUri: redirectUri() });
        // The browser starting the sign-in holds this nonce (cookie); only its hash is stored with the flow.
        const browser = newBrowserNonce();
        const stateHash = hashToken(state);
        const now = Date.now();
        await deps.store.db
          .insertInto('oidc_logins')
          .values({
            state_hash: stateHash,
            verifier,
            nonce,
            return_to: query.returnTo,
            created_at: new Date(now).toISOString(),
            expires_at: new Date(now + LOGIN_TTL_MS).toISOString(),
            browser_hash: browser.hash,
          })
          .execute();
        setBrowserCookie(reply, deps.baseUrl(), stateHash, browser.nonce, LOGIN_TTL_MS / 1000, OIDC_SIGN_IN_BINDING);
        return reply.redirect(url, 302);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/auth/oidc/callback',
      summary:
        'Where the provider sends the browser back: the code is exchanged, the ID token verified, a session opened.',
      scope: 'system',
      access: 'public',
      mcp: { exclude: 'browser sign-in, not an agent operation' },
      query: z.looseObject({
        code: z.string().min(1).max(4000).optional(),
        state: z.string().min(1).max(500).optional(),
        error: z.string().max(200).optional(),
      }),
      async handler({ query, reply, request }) {
        const failed = (code: string) => reply.redirect(`/?signin_error=${encodeURIComponent(code)}`, 302);
        if (!oidc) return failed('oidc.not_configured');
        if (!query.state) return failed('oidc.failed');
        // The browser's cookie for this flow is used once, whatever the answer.
        const sentNonce = browserNonceOf(request, query.state, OIDC_SIGN_IN_BINDING);
        clearBrowserCookie(reply, deps.baseUrl(), query.state, OIDC_SIGN_IN_BINDING);
        // The state is single-use: deleted as it is read, so a replayed callback finds nothing.
        const login = await deps.store.db
          .deleteFrom('oidc_logins')
          .where('state_hash', '=', hashToken(query.state))
          .returningAll()
          .executeTakeFirst();
        if (!login || login.expires_at <= nowIso()) return failed('oidc.failed');
        // Only the browser that started the sign-in completes it (login CSRF): a callback URL someone else's
        // sign-in produced, opened here, is refused before its code is redeemed, and that flow is used up.
        // A row the previous release wrote has no binding (null) and is refused the same way.
        if (
          login.browser_hash === null ||
          sentNonce === undefined ||
          !safeEqual(browserNonceHash(sentNonce), login.browser_hash)
        ) {
          request.log.warn({ code: 'oidc.browser_mismatch' }, 'oidc sign-in refused: not the browser that started it');
          return failed('oidc.browser_mismatch');
        }
        if (query.error || !query.code) return failed('oidc.failed');
        try {
          const claims = await oidc.signIn({
            code: query.code,
            verifier: login.verifier,
            nonce: login.nonce,
            redirectUri: redirectUri(),
          });
          const externalId = `${oidc.settings.issuer}#${claims.sub}`;
          const mapped = mapClaims(claims, oidc.settings);
          const name =
            [claims.name, claims.preferred_username, claims.email, claims.sub].find(
              (v): v is string => typeof v === 'string' && v.length > 0,
            ) ?? 'user';
          const email = typeof claims.email === 'string' ? claims.email.slice(0, 320) : null;
          let user = await users.findByExternalId(externalId);
          const mapping = Object.keys(oidc.settings.roleMap).length > 0;
          if (!user) {
            user = await users.create({
              name: name.slice(0, 100),
              email,
              role: mapped.role,
              groups: mapped.groups,
              source: 'oidc',
              externalId,
            });
            await audit.recordAdmin({
              action: 'user.create',
              actor: userPrincipal(user),
              data: { id: user.id, role: user.role, via: 'oidc' },
            });
          } else if (mapping) {
            // The provider's groups are the truth for a mapped deployment: role and groups follow them.
            const before = user;
            user = (await users.update(user.id, { role: mapped.role, groups: mapped.groups })) ?? user;
            const fields = [
              ...(before.role !== user.role ? ['role'] : []),
              ...(JSON.stringify([...before.groups].sort()) !== JSON.stringify([...user.groups].sort())
                ? ['groups']
                : []),
            ];
            // Groups the provider took from the person leave their tokens too.
            for (const id of await takeLeftGroups(tokens, user.id, before.groups, user.groups)) {
              await deps.events.publish('token.changed', { id, change: 'updated', fields: ['groups'] });
            }
            if (fields.length > 0)
              await deps.events.publish('user.changed', { id: user.id, change: 'updated', fields });
          }
          if (user.disabled) return failed('user.disabled');
          const opened = await sessions.create({ userId: user.id });
          await users.touch(user.id);
          await audit.recordAdmin({ action: 'session.create', actor: userPrincipal(user), data: { via: 'oidc' } });
          setSessionCookies(reply, deps.baseUrl(), opened.secret, opened.csrf);
          return reply.redirect(login.return_to, 302);
        } catch (error) {
          request.log.info({ code: isGatehouseError(error) ? error.code : 'internal_error' }, 'oidc sign-in failed');
          return failed(isGatehouseError(error) ? error.code : 'oidc.failed');
        }
      },
    }),
  ];
}
