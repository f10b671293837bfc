/**
 * Gatehouse's own OAuth 2.1 authorization server, over the shared store (so replicas agree):
 * authorization code with PKCE S256 only, resource indicators (RFC 8707: a token is for exactly one
 * MCP endpoint), short-lived JWT access tokens, rotating refresh tokens with reuse detection (a replay
 * revokes the whole family), revocation (RFC 7009). Consent is per (person, client, resource, scope).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { jose } from '../identity/jose.js';
import { safeEqual } from '../identity/tokens.js';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';
import type { SettingsService } from '../settings/service.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import type { OAuthAuditor } from './audit.js';
import type { ClientDirectory, OAuthClient } from './clients.js';
import { oauthError } from './errors.js';
import { SIGNING_ALG, type SigningKeys } from './keys.js';
import { redirectUriMatches } from './redirects.js';
import { BASE_SCOPE, groupsAsked, parseScope, resourcePath, resourceUrl, scopeKnown } from './resources.js';

const CODE_TTL_MS = 60_000;
/** How long the consent page's pending request stays valid. */
const REQUEST_TTL_MS = 10 * 60_000;
export const ACCESS_TOKEN_TYPE = 'at+jwt';

export interface Person {
  /** `user:<id>` (a token's owner), or `token:<id>` (an admin or operator token with no owner). */
  subject: string;
  name: string;
  groups: readonly string[];
  /** The token the person signed in with. */
  tokenId?: string;
}

/** A validated authorization request, carried sealed through the consent page. */
export interface PendingAuthorization {
  clientId: string;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  resource: string;
  scope: string[];
  /** Bound to the browser's CSRF cookie (its SHA-256). */
  nonceHash: string;
  /** The person the browser's dashboard session named when the page was shown (re-checked on the answer). */
  person?: Person;
  /** That session: the answer counts as signed in only while it is live (not logged out, not expired). */
  sessionId?: string;
  exp: number;
}

export type AuthorizeOutcome =
  /** No trustworthy redirect URI: the error is shown, never redirected. */
  | { kind: 'error'; status: number; error: string; description: string }
  | { kind: 'redirect'; location: string }
  | { kind: 'consent'; client: OAuthClient; pending: PendingAuthorization; sealed: string };

export interface TokenAnswer {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

export interface AuthorizationServerDeps {
  store: Store;
  sealKey: SealKey;
  keys: SigningKeys;
  clients: ClientDirectory;
  settings: SettingsService;
  audit: OAuthAuditor;
  /** The public URL (the issuer), per request: it may depend on the bound port. */
  base(): string;
  /**
   * Told whenever grants, families or access tokens are revoked (authenticators drop their caches); with the
   * family or access token, what was opened with it ends too (`identity/ended-access.ts`).
   */
  revoked(ended?: { family: string } | { accessToken: string }): Promise<void>;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest('hex');
const s256 = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');
const secret = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;
const PKCE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export class AuthorizationServer {
  constructor(private readonly deps: AuthorizationServerDeps) {}

  /** `GET /authorize`: checks the request; the client and redirect URI first, since errors go to the redirect URI only once it is trusted. */
  async authorize(query: Record<string, string | undefined>, nonce: string): Promise<AuthorizeOutcome> {
    const settings = await this.deps.settings.current();
    const clientId = query.client_id;
    if (!clientId) return pageError('invalid_request', 'client_id is missing.');
    let client: OAuthClient;
    try {
      client = await this.deps.clients.find(clientId, settings['oauth.clientMetadataDocuments']);
    } catch (error) {
      this.deps.audit({ action: 'oauth.authorize', outcome: 'invalid_client', clientId });
      return pageError('invalid_client', (error as Error).message, 400);
    }
    const redirectUri = query.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
    if (!redirectUri || !redirectUriMatches(redirectUri, client.redirectUris)) {
      this.deps.audit({
        action: 'oauth.authorize',
        outcome: 'invalid_request',
        clientId,
        data: { reason: 'redirect_uri' },
      });
      return pageError('invalid_request', 'The redirect_uri is not one registered for this client.');
    }
    const state = query.state;
    const fail = (error: string, description: string): AuthorizeOutcome => {
      this.deps.audit({ action: 'oauth.authorize', outcome: error, clientId });
      return {
        kind: 'redirect',
        location: this.redirectWith(redirectUri, { error, error_description: description, state }),
      };
    };
    if (query.response_type !== 'code')
      return fail('unsupported_response_type', 'Only response_type=code is supported.');
    if (query.code_challenge_method !== 'S256')
      return fail('invalid_request', 'PKCE with code_challenge_method=S256 is required.');
    if (!query.code_challenge || !PKCE_CHALLENGE.test(query.code_challenge))
      return fail('invalid_request', 'code_challenge must be a base64url SHA-256.');
    const base = this.deps.base();
    const resource = query.resource ?? resourceUrl(base, '/mcp');
    const path = resourcePath(resource, base);
    if (!path) return fail('invalid_target', 'The resource is not an MCP endpoint of this Gatehouse.');
    const scope = parseScope(query.scope);
    if (!scopeKnown(scope) || !scope.includes(BASE_SCOPE))
      return fail('invalid_scope', `Gatehouse understands the scope "${BASE_SCOPE}" and "group:<name>".`);
    const pending: PendingAuthorization = {
      clientId,
      redirectUri,
      state,
      codeChallenge: query.code_challenge,
      resource: resourceUrl(base, path),
      scope,
      nonceHash: digest(nonce),
      exp: Date.now() + REQUEST_TTL_MS,
    };
    return { kind: 'consent', client, pending, sealed: this.sealPending(pending) };
  }

  /** Opens the consent form's sealed request; undefined when it was tampered with, expired or not this browser's. */
  openPending(sealed: string, nonce: string | undefined): PendingAuthorization | undefined {
    try {
      const pending = JSON.parse(
        unseal(this.deps.sealKey, sealed, aadFor(['oauth-authorize'])),
      ) as PendingAuthorization;
      if (pending.exp < Date.now() || nonce === undefined || !safeEqual(pending.nonceHash, digest(nonce)))
        return undefined;
      return pending;
    } catch {
      return undefined;
    }
  }

  /** The grant already consented to for this request, if any (consent is remembered). */
  async rememberedGrant(pending: PendingAuthorization, person: Person): Promise<string | undefined> {
    const row = await this.deps.store.db
      .selectFrom('oauth_grants')
      .select('id')
      .where('subject', '=', person.subject)
      .where('client_id', '=', pending.clientId)
      .where('resource', '=', pending.resource)
      .where('scope', '=', pending.scope.join(' '))
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row?.id;
  }

  /**
   * Whether `person`'s remembered consent answers `pending` without asking again: a live grant for the same
   * client, endpoint and scope that already holds every group this approval would lend. One that would lend
   * more (the person now signs in holding groups the consent did not lend, say through their own session where
   * they consented with a narrower token) is asked again: a silent redirect never widens a grant.
   */
  async rememberedConsent(pending: PendingAuthorization, person: Person): Promise<boolean> {
    const row = await this.deps.store.db
      .selectFrom('oauth_grants')
      .select('groups')
      .where('subject', '=', person.subject)
      .where('client_id', '=', pending.clientId)
      .where('resource', '=', pending.resource)
      .where('scope', '=', pending.scope.join(' '))
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (!row) return false;
    const lent = parseJson<string[]>(row.groups, []);
    return groupsLent(pending, person).every((group) => lent.includes(group));
  }

  /** The person approved: records (or reuses) the grant and answers the redirect carrying a one-time code. */
  async approve(pending: PendingAuthorization, person: Person, client: OAuthClient): Promise<string> {
    const groups = groupsLent(pending, person);
    const db = this.deps.store.db;
    let grantId = await this.rememberedGrant(pending, person);
    if (grantId) {
      await db
        .updateTable('oauth_grants')
        .set({ groups: JSON.stringify(groups), client_name: client.name })
        .where('id', '=', grantId)
        .execute();
    } else {
      grantId = `og_${randomUUID()}`;
      await db
        .insertInto('oauth_grants')
        .values({
          id: grantId,
          subject: person.subject,
          subject_name: person.name,
          client_id: pending.clientId,
          client_name: client.name,
          resource: pending.resource,
          scope: pending.scope.join(' '),
          groups: JSON.stringify(groups),
          created_at: nowIso(),
          last_used_at: null,
          revoked_at: null,
        })
        .execute();
    }
    const code = secret('gh_code_');
    // Housekeeping on the way: codes are single-use and live a minute; an hour later they prove nothing.
    await db
      .deleteFrom('oauth_codes')
      .where('expires_at', '<', new Date(Date.now() - 3_600_000).toISOString())
      .execute();
    await db
      .insertInto('oauth_codes')
      .values({
        hash: digest(code),
        grant_id: grantId,
        client_id: pending.clientId,
        redirect_uri: pending.redirectUri,
        resource: pending.resource,
        code_challenge: pending.codeChallenge,
        family_id: `of_${randomUUID()}`,
        expires_at: new Date(Date.now() + CODE_TTL_MS).toISOString(),
        used_at: null,
      })
      .execute();
    this.deps.audit({
      action: 'oauth.consent',
      outcome: 'ok',
      subject: person.subject,
      subjectName: person.name,
      clientId: pending.clientId,
      resource: pending.resource,
      data: { grant: grantId, groups },
    });
    return this.redirectWith(pending.redirectUri, { code, state: pending.state });
  }

  deny(pending: PendingAuthorization, person: Person | undefined): string {
    this.deps.audit({
      action: 'oauth.consent',
      outcome: 'access_denied',
      subject: person?.subject,
      subjectName: person?.name,
      clientId: pending.clientId,
      resource: pending.resource,
    });
    return this.redirectWith(pending.redirectUri, {
      error: 'access_denied',
      error_description: 'The request was denied.',
      state: pending.state,
    });
  }

  /** `POST /token`. */
  async token(body: Record<string, string | undefined>): Promise<TokenAnswer> {
    const grantType = body.grant_type;
    try {
      if (grantType === 'authorization_code') return await this.exchangeCode(body);
      if (grantType === 'refresh_token') return await this.refresh(body);
      throw oauthError('oauth.unsupported_grant_type', grantType ? undefined : 'grant_type is missing.');
    } catch (error) {
      this.deps.audit({
        action: `oauth.token.${grantType === 'refresh_token' ? 'refresh' : 'code'}`,
        outcome: (error as { code?: string }).code?.replace(/^oauth\./, '') ?? 'server_error',
        clientId: body.client_id,
      });
      throw error;
    }
  }

  private async exchangeCode(body: Record<string, string | undefined>): Promise<TokenAnswer> {
    const { code, client_id: clientId, redirect_uri: redirectUri, code_verifier: verifier } = body;
    if (!code || !clientId || !verifier)
      throw oauthError('oauth.invalid_request', 'code, client_id and code_verifier are required.');
    if (!PKCE_VERIFIER.test(verifier))
      throw oauthError('oauth.invalid_grant', 'The code_verifier is not a valid PKCE verifier.');
    const db = this.deps.store.db;
    const row = await db.selectFrom('oauth_codes').selectAll().where('hash', '=', digest(code)).executeTakeFirst();
    if (!row) throw oauthError('oauth.invalid_grant', 'Unknown authorization code.');
    if (row.used_at !== null) {
      // RFC 6749 §4.1.2: a code used twice revokes what it was exchanged for.
      await this.revokeFamily(row.family_id, 'code_reused');
      throw oauthError(
        'oauth.invalid_grant',
        'The authorization code was already used; the tokens issued for it are revoked.',
      );
    }
    if (row.client_id !== clientId) throw oauthError('oauth.invalid_grant', 'The code was issued to another client.');
    if (Date.parse(row.expires_at) < Date.now())
      throw oauthError('oauth.invalid_grant', 'The authorization code expired.');
    if (redirectUri !== undefined && redirectUri !== row.redirect_uri)
      throw oauthError('oauth.invalid_grant', 'The redirect_uri differs from the authorization request.');
    if (body.resource !== undefined && body.resource !== row.resource)
      throw oauthError('oauth.invalid_target', 'The resource differs from the authorization request.');
    if (!safeEqual(s256(verifier), row.code_challenge))
      throw oauthError('oauth.invalid_grant', 'The code_verifier does not match the code_challenge.');
    await this.claimOnce('oauth_codes', row, 'code_reused', 'The authorization code was already used.');
    const grant = await this.activeGrant(row.grant_id);
    await db
      .insertInto('oauth_families')
      .values({ id: row.family_id, grant_id: grant.id, created_at: nowIso(), revoked_at: null, revoked_reason: null })
      // A replay racing this exchange may have written the family already, born revoked: it stays so.
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    const answer = await this.issue(grant, row.family_id);
    this.deps.audit({
      action: 'oauth.token.code',
      outcome: 'ok',
      subject: grant.subject,
      subjectName: grant.subject_name,
      clientId,
      resource: grant.resource,
    });
    return answer;
  }

  /**
   * Single use across replicas: only the update that flips `used_at` wins; the loser's family is
   * revoked (a second presentation is a replay, whichever replica it reached).
   */
  private async claimOnce(
    table: 'oauth_codes' | 'oauth_refresh_tokens',
    row: { hash: string; family_id: string },
    reason: 'code_reused' | 'refresh_replay',
    message: string,
  ): Promise<void> {
    const claimed = await this.deps.store.db
      .updateTable(table)
      .set({ used_at: nowIso() })
      .where('hash', '=', row.hash)
      .where('used_at', 'is', null)
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) === 1) return;
    await this.revokeFamily(row.family_id, reason);
    throw oauthError('oauth.invalid_grant', message);
  }

  private async refresh(body: Record<string, string | undefined>): Promise<TokenAnswer> {
    const { refresh_token: token, client_id: clientId } = body;
    if (!token || !clientId) throw oauthError('oauth.invalid_request', 'refresh_token and client_id are required.');
    const db = this.deps.store.db;
    const row = await db
      .selectFrom('oauth_refresh_tokens')
      .innerJoin('oauth_families', 'oauth_families.id', 'oauth_refresh_tokens.family_id')
      .innerJoin('oauth_grants', 'oauth_grants.id', 'oauth_families.grant_id')
      .select([
        'oauth_refresh_tokens.hash',
        'oauth_refresh_tokens.family_id',
        'oauth_refresh_tokens.expires_at',
        'oauth_refresh_tokens.used_at',
        'oauth_families.revoked_at as family_revoked',
        'oauth_grants.id as grant_id',
        'oauth_grants.client_id',
        'oauth_grants.revoked_at as grant_revoked',
      ])
      .where('oauth_refresh_tokens.hash', '=', digest(token))
      .executeTakeFirst();
    if (!row) throw oauthError('oauth.invalid_grant', 'Unknown refresh token.');
    if (row.client_id !== clientId)
      throw oauthError('oauth.invalid_grant', 'The refresh token was issued to another client.');
    if (row.family_revoked !== null || row.grant_revoked !== null)
      throw oauthError('oauth.invalid_grant', 'The refresh token was revoked.');
    if (row.used_at !== null) {
      await this.revokeFamily(row.family_id, 'refresh_replay');
      throw oauthError(
        'oauth.invalid_grant',
        'The refresh token was already used; every token of its family is revoked.',
      );
    }
    if (Date.parse(row.expires_at) < Date.now()) throw oauthError('oauth.invalid_grant', 'The refresh token expired.');
    const grant = await this.activeGrant(row.grant_id);
    if (body.resource !== undefined && body.resource !== grant.resource)
      throw oauthError('oauth.invalid_target', 'A refresh token renews access to its own resource only.');
    if (body.scope !== undefined && parseScope(body.scope).some((w) => !grant.scope.split(' ').includes(w))) {
      throw oauthError('oauth.invalid_scope', 'A refresh may not widen the scope.');
    }
    await this.claimOnce(
      'oauth_refresh_tokens',
      row,
      'refresh_replay',
      'The refresh token was already used; every token of its family is revoked.',
    );
    const answer = await this.issue(grant, row.family_id);
    this.deps.audit({
      action: 'oauth.token.refresh',
      outcome: 'ok',
      subject: grant.subject,
      subjectName: grant.subject_name,
      clientId,
      resource: grant.resource,
    });
    return answer;
  }

  /** `POST /revoke` (RFC 7009): always 200; a refresh token ends its family, an access token its own jti. */
  async revoke(
    body: Record<string, string | undefined>,
    verifyAccess: (token: string) => Promise<{ jti: string; exp: number } | undefined>,
  ): Promise<void> {
    const token = body.token;
    if (!token) throw oauthError('oauth.invalid_request', 'token is missing.');
    const db = this.deps.store.db;
    const refresh = await db
      .selectFrom('oauth_refresh_tokens')
      .innerJoin('oauth_families', 'oauth_families.id', 'oauth_refresh_tokens.family_id')
      .innerJoin('oauth_grants', 'oauth_grants.id', 'oauth_families.grant_id')
      .select(['oauth_refresh_tokens.family_id', 'oauth_grants.client_id'])
      .where('oauth_refresh_tokens.hash', '=', digest(token))
      .executeTakeFirst();
    if (refresh) {
      if (body.client_id !== undefined && body.client_id !== refresh.client_id)
        throw oauthError('oauth.invalid_client', 'The token was issued to another client.');
      await this.revokeFamily(refresh.family_id, 'revoked');
      this.deps.audit({
        action: 'oauth.revoke',
        outcome: 'ok',
        clientId: refresh.client_id,
        data: { token: 'refresh_token' },
      });
      return;
    }
    const access = await verifyAccess(token);
    if (access) {
      await db
        .insertInto('oauth_revoked_access')
        .values({ jti: access.jti, expires_at: new Date(access.exp * 1000).toISOString() })
        .onConflict((oc) => oc.column('jti').doNothing())
        .execute();
      await db.deleteFrom('oauth_revoked_access').where('expires_at', '<', nowIso()).execute();
      await this.deps.revoked({ accessToken: access.jti });
      this.deps.audit({
        action: 'oauth.revoke',
        outcome: 'ok',
        clientId: body.client_id,
        data: { token: 'access_token' },
      });
    }
  }

  /** Revokes a grant (the person's or an admin's decision): its families, and every access token through them. */
  async revokeGrant(id: string): Promise<boolean> {
    const db = this.deps.store.db;
    const at = nowIso();
    const result = await db
      .updateTable('oauth_grants')
      .set({ revoked_at: at })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    await db
      .updateTable('oauth_families')
      .set({ revoked_at: at, revoked_reason: 'grant_revoked' })
      .where('grant_id', '=', id)
      .where('revoked_at', 'is', null)
      .execute();
    await this.deps.revoked();
    return Number(result.numUpdatedRows) === 1;
  }

  private async revokeFamily(familyId: string, reason: string): Promise<void> {
    const db = this.deps.store.db;
    const existing = await db.selectFrom('oauth_families').select('id').where('id', '=', familyId).executeTakeFirst();
    if (existing) {
      await db
        .updateTable('oauth_families')
        .set({ revoked_at: nowIso(), revoked_reason: reason })
        .where('id', '=', familyId)
        .where('revoked_at', 'is', null)
        .execute();
    } else {
      // A replayed code whose first exchange has not written its family yet: the family is born revoked.
      const code = await db
        .selectFrom('oauth_codes')
        .select('grant_id')
        .where('family_id', '=', familyId)
        .executeTakeFirst();
      if (code) {
        await db
          .insertInto('oauth_families')
          .values({
            id: familyId,
            grant_id: code.grant_id,
            created_at: nowIso(),
            revoked_at: nowIso(),
            revoked_reason: reason,
          })
          .onConflict((oc) => oc.column('id').doUpdateSet({ revoked_at: nowIso(), revoked_reason: reason }))
          .execute();
      }
    }
    this.deps.audit({ action: 'oauth.family_revoked', outcome: reason, data: { family: familyId } });
    await this.deps.revoked({ family: familyId });
  }

  private async activeGrant(id: string) {
    const grant = await this.deps.store.db
      .selectFrom('oauth_grants')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!grant || grant.revoked_at !== null) throw oauthError('oauth.invalid_grant', 'The grant was revoked.');
    return grant;
  }

  private async issue(
    grant: { id: string; subject: string; client_id: string; resource: string; scope: string },
    familyId: string,
  ): Promise<TokenAnswer> {
    const settings = await this.deps.settings.current();
    const ttl = Math.min(300, settings['oauth.accessTokenTtlSeconds']);
    const { kid, key } = await this.deps.keys.signing();
    const { SignJWT } = await jose();
    const accessToken = await new SignJWT({
      scope: grant.scope,
      client_id: grant.client_id,
      grant: grant.id,
      fam: familyId,
    })
      .setProtectedHeader({ alg: SIGNING_ALG, kid, typ: ACCESS_TOKEN_TYPE })
      .setIssuer(this.deps.base())
      .setSubject(grant.subject)
      .setAudience(grant.resource)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttl)
      .setJti(randomUUID())
      .sign(key);
    const refreshToken = secret('gh_rt_');
    const db = this.deps.store.db;
    // Expired refresh tokens can never be used again (nor replayed: past expiry a replay is just invalid).
    await db
      .deleteFrom('oauth_refresh_tokens')
      .where('family_id', '=', familyId)
      .where('expires_at', '<', nowIso())
      .execute();
    await db
      .insertInto('oauth_refresh_tokens')
      .values({
        hash: digest(refreshToken),
        family_id: familyId,
        created_at: nowIso(),
        expires_at: new Date(Date.now() + settings['oauth.refreshTokenTtlDays'] * 86_400_000).toISOString(),
        used_at: null,
      })
      .execute();
    await db.updateTable('oauth_grants').set({ last_used_at: nowIso() }).where('id', '=', grant.id).execute();
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: ttl,
      refresh_token: refreshToken,
      scope: grant.scope,
    };
  }

  sealPending(pending: PendingAuthorization): string {
    return seal(this.deps.sealKey, JSON.stringify(pending), aadFor(['oauth-authorize']));
  }

  /** The redirect URI with parameters added (RFC 9207's `iss` on every answer). */
  private redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
    const url = new URL(redirectUri);
    for (const [name, value] of Object.entries({ ...params, iss: this.deps.base() })) {
      if (value !== undefined) url.searchParams.set(name, value);
    }
    return url.href;
  }
}

function pageError(error: string, description: string, status = 400): AuthorizeOutcome {
  return { kind: 'error', status, error, description };
}

/** Grants as the REST API lists them. */
export async function listGrants(store: Store, subjects: readonly string[] | undefined) {
  let query = store.db
    .selectFrom('oauth_grants')
    .selectAll()
    .where('revoked_at', 'is', null)
    .orderBy('created_at', 'desc');
  if (subjects !== undefined) query = query.where('subject', 'in', subjects.length > 0 ? [...subjects] : ['']);
  const rows = await query.limit(1_000).execute();
  return rows.map((row) => ({
    id: row.id,
    subject: row.subject,
    subjectName: row.subject_name,
    clientId: row.client_id,
    clientName: row.client_name,
    resource: row.resource,
    scope: row.scope,
    groups: parseJson<string[]>(row.groups, []),
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
  }));
}

/** The groups a consent lends: the person's, narrowed by the scope's `group:` words when it has any. */
export function groupsLent(pending: PendingAuthorization, person: Person): string[] {
  const asked = groupsAsked(pending.scope);
  return asked.length === 0 ? [...person.groups] : person.groups.filter((g) => asked.includes(g));
}
