/**
 * OAuth access tokens on the MCP surfaces: a JWT signed by Gatehouse's own authorization server, for
 * exactly the endpoint it is presented to (`aud` = that endpoint's public URL), mapped to a principal
 * (the person's grant to the client, role `agent`, groups narrowed to those consented). A verified
 * token is cached by its hash until its `exp`; the cache is dropped whenever the store's `tokens`
 * or `users` version moves (a grant, family, access token or signing-in token revoked; a user disabled), so the hot path
 * is one hash and one map lookup. Nothing else accepts these tokens: off an MCP surface they are no one.
 */

import { SIGNING_ALG, type SigningKeys } from '../oauth/keys.js';
import { surfacePath } from '../oauth/resources.js';
import { ACCESS_TOKEN_TYPE } from '../oauth/server.js';
import type { Store } from '../store/db.js';
import { parseJson } from '../store/json.js';
import { jose } from './jose.js';
import { type Authenticator, bearerToken, type TokenPrincipal } from './principal.js';
import { hashToken } from './tokens.js';
import { isUserRole, type PrincipalUser } from './users.js';

export interface OAuthPrincipal extends TokenPrincipal {
  oauth: {
    grantId: string;
    clientId: string;
    subject: string;
    /** The refresh family the presented access token belongs to, and that token's own id (`jti`): identifiers, no secret. */
    familyId: string;
    accessTokenId: string;
  };
}

export type RefusalReason = 'invalid' | 'expired' | 'audience' | 'revoked';

export interface OAuthAuthenticatorOptions {
  store: Store;
  keys: SigningKeys;
  /** The public URL: the issuer, and the prefix of every audience. */
  base(): string;
  /** Told once per refused token (per reason) so the audit trail has it without a row per request. */
  onRefused?(reason: RefusalReason, detail: { clientId?: string; subject?: string; audience?: string }): void;
}

interface Verified {
  principal: OAuthPrincipal;
  audience: string;
  /** Seconds since the epoch. */
  exp: number;
  jti: string;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const CACHE_MAX = 10_000;

export interface OAuthTokenVerifier {
  authenticate: Authenticator;
  /** Signature, issuer and lifetime only (for revocation of an access token). */
  verifySignature(token: string): Promise<{ jti: string; exp: number } | undefined>;
}

export function oauthAuthenticator(options: OAuthAuthenticatorOptions): OAuthTokenVerifier {
  const { store, keys } = options;
  let cache: { version: string; verified: Map<string, Verified>; refused: Map<string, RefusalReason> } | undefined;
  const current = () => {
    // Revocations bump `tokens`; a user disabled or regrouped bumps `users`.
    const version = `${store.version('tokens')}|${store.version('users')}`;
    if (cache?.version !== version) cache = { version, verified: new Map(), refused: new Map() };
    if (cache.verified.size > CACHE_MAX) cache.verified.clear();
    if (cache.refused.size > CACHE_MAX) cache.refused.clear();
    return cache;
  };

  const refuse = (
    c: NonNullable<typeof cache>,
    hash: string,
    reason: RefusalReason,
    detail: Parameters<NonNullable<OAuthAuthenticatorOptions['onRefused']>>[1] = {},
  ) => {
    if (c.refused.get(hash) !== reason) {
      c.refused.set(hash, reason);
      options.onRefused?.(reason, detail);
    }
    return undefined;
  };

  const verifySignature = async (token: string) => {
    const { errors: joseErrors, jwtVerify } = await jose();
    try {
      const { payload } = await jwtVerify(
        token,
        (header) => keys.verifying(header.kid).then((k) => k ?? new Uint8Array()),
        {
          issuer: options.base(),
          algorithms: [SIGNING_ALG],
          typ: ACCESS_TOKEN_TYPE,
          requiredClaims: ['exp', 'jti', 'aud', 'sub'],
        },
      );
      return payload;
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) return 'expired' as const;
      return undefined;
    }
  };

  const load = async (token: string, hash: string, c: NonNullable<typeof cache>): Promise<Verified | RefusalReason> => {
    const payload = await verifySignature(token);
    if (payload === undefined) return 'invalid';
    if (payload === 'expired') return 'expired';
    const { grant, fam, jti, exp, aud } = payload as {
      grant?: unknown;
      fam?: unknown;
      jti: string;
      exp: number;
      aud: unknown;
    };
    if (typeof grant !== 'string' || typeof fam !== 'string' || typeof aud !== 'string') return 'invalid';
    const row = await store.db
      .selectFrom('oauth_grants')
      .innerJoin('oauth_families', 'oauth_families.grant_id', 'oauth_grants.id')
      .select([
        'oauth_grants.id',
        'oauth_grants.subject',
        'oauth_grants.subject_name',
        'oauth_grants.client_id',
        'oauth_grants.client_name',
        'oauth_grants.groups',
        'oauth_grants.revoked_at',
        'oauth_families.revoked_at as family_revoked',
      ])
      .where('oauth_grants.id', '=', grant)
      .where('oauth_families.id', '=', fam)
      .executeTakeFirst();
    if (!row || row.revoked_at !== null || row.family_revoked !== null) return 'revoked';
    const revokedJti = await store.db
      .selectFrom('oauth_revoked_access')
      .select('jti')
      .where('jti', '=', jti)
      .executeTakeFirst();
    if (revokedJti) return 'revoked';
    let groups = parseJson<string[]>(row.groups, []);
    let user: PrincipalUser | undefined;
    // A person who signed in with a token stops being one when that token is revoked; a user when disabled.
    if (row.subject.startsWith('token:')) {
      const person = await store.db
        .selectFrom('tokens')
        .select('revoked_at')
        .where('id', '=', row.subject.slice(6))
        .executeTakeFirst();
      if (!person || person.revoked_at !== null) return 'revoked';
    } else if (row.subject.startsWith('user:')) {
      const person = await store.db
        .selectFrom('users')
        .select(['id', 'name', 'role', 'groups', 'disabled'])
        .where('id', '=', row.subject.slice(5))
        .executeTakeFirst();
      if (!person || person.disabled || !isUserRole(person.role)) return 'revoked';
      const current = parseJson<string[]>(person.groups, []);
      // Consented groups the user has since left are no longer theirs to lend.
      groups = groups.filter((g) => current.includes(g));
      user = { id: person.id, name: person.name, role: person.role, groups: current };
    }
    const verified: Verified = {
      audience: aud,
      exp,
      jti,
      principal: {
        id: row.id,
        name: `${row.client_name} for ${row.subject_name}`,
        role: 'agent',
        groups,
        ...(user ? { user } : {}),
        rateLimit: null,
        maxConcurrent: null,
        maxSessions: null,
        oauth: { grantId: row.id, clientId: row.client_id, subject: row.subject, familyId: fam, accessTokenId: jti },
      },
    };
    // Cached only in the generation it was checked in: a revocation meanwhile started a new one.
    if (current() === c) c.verified.set(hash, verified);
    return verified;
  };

  const decide = (verified: Verified | RefusalReason, expected: string, hash: string, c: NonNullable<typeof cache>) => {
    if (typeof verified === 'string') return refuse(c, hash, verified);
    if (verified.exp * 1000 <= Date.now()) {
      c.verified.delete(hash);
      return refuse(c, hash, 'expired', {
        clientId: verified.principal.oauth.clientId,
        subject: verified.principal.oauth.subject,
      });
    }
    if (verified.audience !== expected) {
      return refuse(c, hash, 'audience', {
        clientId: verified.principal.oauth.clientId,
        subject: verified.principal.oauth.subject,
        audience: verified.audience,
      });
    }
    return verified.principal;
  };

  const authenticate: Authenticator = (request) => {
    const token = bearerToken(request);
    if (token === undefined || !JWT_SHAPE.test(token)) return undefined;
    const path = surfacePath(request.url);
    if (!path) return undefined;
    const expected = `${options.base()}${path}`;
    const c = current();
    const hash = hashToken(token);
    const hit = c.verified.get(hash);
    if (hit) return decide(hit, expected, hash, c);
    const known = c.refused.get(hash);
    // Unverifiable ones are tried again: a kid another replica just rotated in is found on a later reload.
    if (known && known !== 'invalid') return undefined;
    return load(token, hash, c).then((verified) => decide(verified, expected, hash, c));
  };

  return {
    authenticate,
    async verifySignature(token) {
      if (!JWT_SHAPE.test(token)) return undefined;
      const payload = await verifySignature(token);
      if (payload === undefined || payload === 'expired') return undefined;
      return { jti: String(payload.jti), exp: Number(payload.exp) };
    },
  };
}

/** Static tokens first (their cache is one map lookup); a JWT-shaped bearer none of them knows is tried as OAuth. */
export function eitherAuthenticator(first: Authenticator, second: Authenticator): Authenticator {
  return (request) => {
    const found = first(request);
    if (found instanceof Promise) return found.then((p) => p ?? second(request));
    return found ?? second(request);
  };
}
