/**
 * The OAuth endpoints: discovery (RFC 8414 and its OIDC alias, RFC 9728 for every MCP surface, the
 * JWKS), `/authorize` with its consent page, `/token`, `/register` (RFC 7591), `/revoke` (RFC 7009).
 * They live in their own Fastify context: it alone parses form bodies (so no REST route ever accepts a
 * cross-site form post) and answers failures in RFC 6749 shape. Every `/.well-known/*` path answers
 * JSON, unknown ones a JSON 404. The REST routes for grants, clients and keys are `restRoutes`.
 */
import { randomBytes } from 'node:crypto';
import { buildOAuthProtectedResourceMetadata } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { defineRoute, type RouteDeclaration, registerRoutes } from '../api/route.js';
import { GatehouseError } from '../errors.js';
import { type OAuthTokenVerifier, type Principal, type Role, signInGroupsOf } from '../identity/index.js';
import { hashToken } from '../identity/tokens.js';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';
import type { SettingsService } from '../settings/service.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import type { TokenStore } from '../store/tokens.js';
import type { OAuthAuditor } from './audit.js';
import { type ClientDirectory, checkClientMetadata } from './clients.js';
import { consentCsp, consentPage, surfaceName } from './consent-page.js';
import { oauthError, oauthErrorAnswer } from './errors.js';
import type { SigningKeys } from './keys.js';
import type { EndpointLimiter } from './rate.js';
import { BASE_SCOPE, resourceMetadataUrl, resourcePath, surfacePath } from './resources.js';
import { type AuthorizationServer, groupsLent, listGrants, type PendingAuthorization, type Person } from './server.js';

export interface OAuthRouteDeps {
  server: AuthorizationServer;
  clients: ClientDirectory;
  keys: SigningKeys;
  tokens: TokenStore;
  store: Store;
  settings: SettingsService;
  verifier: OAuthTokenVerifier;
  sealKey: SealKey;
  audit: OAuthAuditor;
  /** Per-address limits, shared by every replica on PostgreSQL. */
  limits: EndpointLimiter;
  base(): string;
}

const CSRF_COOKIE = 'gh_oauth_csrf';
const PERSON_COOKIE = 'gh_oauth_person';
const PERSON_TTL_MS = 12 * 3_600_000;
const FORM_LIMIT = 64 * 1024;

/** The authorization server's metadata (RFC 8414). */
export function authorizationServerMetadata(base: string, registration: boolean) {
  return {
    issuer: base,
    authorization_endpoint: `${base}/authorize`,
    token_endpoint: `${base}/token`,
    ...(registration ? { registration_endpoint: `${base}/register` } : {}),
    revocation_endpoint: `${base}/revoke`,
    jwks_uri: `${base}/oauth/jwks`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    scopes_supported: [BASE_SCOPE],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
    service_documentation: 'https://github.com/gatehouse/gatehouse#sign-in-with-oauth',
  };
}

function cookie(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key !== name) continue;
    try {
      return decodeURIComponent(rest.join('='));
    } catch {
      return undefined; // a mangled cookie is no cookie: a fresh one replaces it
    }
  }
  return undefined;
}

function setCookie(
  reply: FastifyReply,
  base: string,
  name: string,
  value: string,
  options: { maxAgeS: number; sameSite: 'Strict' | 'Lax' },
) {
  const secure = base.startsWith('https:') ? '; Secure' : '';
  const path = `${new URL(base).pathname.replace(/\/$/, '')}/authorize`;
  const line = `${name}=${encodeURIComponent(value)}; Path=${path}; Max-Age=${options.maxAgeS}; HttpOnly; SameSite=${options.sameSite}${secure}`;
  const existing = reply.getHeader('set-cookie');
  reply.header('set-cookie', [...(Array.isArray(existing) ? existing : existing ? [String(existing)] : []), line]);
}

/** A form or JSON body as string parameters (a repeated or non-string parameter is `invalid_request`). */
function params(body: unknown): Record<string, string | undefined> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body))
    throw oauthError('oauth.invalid_request', 'The body must be form-encoded parameters.');
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(body)) {
    if (typeof value !== 'string')
      throw oauthError('oauth.invalid_request', `The parameter ${key} is repeated or not a string.`);
    out[key] = value;
  }
  return out;
}

function queryParams(request: FastifyRequest): Record<string, string | undefined> {
  const search = new URL(request.url, 'http://x').searchParams;
  const out: Record<string, string> = {};
  for (const key of new Set(search.keys())) {
    const values = search.getAll(key);
    if (values.length > 1) throw oauthError('oauth.invalid_request', `The parameter ${key} is repeated.`);
    out[key] = values[0] as string;
  }
  return out;
}

const exclude = (reason: string) => ({ exclude: reason });
const PROTOCOL = 'an OAuth protocol endpoint for clients and browsers, not an operation';

export function oauthPlugin(deps: OAuthRouteDeps) {
  /**
   * The groups of a person signed in with an admin or operator token: every group a server is exposed
   * to (such a token manages exposure anyway, so consenting them grants nothing it could not take).
   */
  const everyGroup = async (): Promise<string[]> => {
    const rows = await deps.store.db.selectFrom('servers').select('exposure').execute();
    return [...new Set(rows.flatMap((r) => parseJson<string[]>(r.exposure, ['default'])))].sort();
  };

  /**
   * The person behind a live token: its owner (a user, unless disabled), else the token itself when
   * it is an admin or operator token (no owner yet: such a token is the person who holds it).
   */
  const personOfToken = async (where: { hash: string } | { id: string }): Promise<Person | undefined> => {
    let query = deps.store.db
      .selectFrom('tokens')
      .select(['id', 'name', 'role', 'groups', 'user_id'])
      .where('revoked_at', 'is', null);
    query = 'hash' in where ? query.where('hash', '=', where.hash) : query.where('id', '=', where.id);
    const row = await query.executeTakeFirst();
    if (!row) return undefined;
    if (row.user_id) {
      const user = await deps.store.db
        .selectFrom('users')
        .select(['id', 'name', 'groups', 'disabled'])
        .where('id', '=', row.user_id)
        .executeTakeFirst();
      if (!user || user.disabled) return undefined;
      // The person, within what the token may do: an agent's token consents none of its owner's other groups.
      const groups = signInGroupsOf(
        row.role as Role,
        parseJson<string[]>(row.groups, []),
        parseJson<string[]>(user.groups, []),
      );
      return { subject: `user:${user.id}`, name: user.name, groups, tokenId: row.id };
    }
    if (row.role !== 'admin' && row.role !== 'operator') return undefined;
    return { subject: `token:${row.id}`, name: row.name, groups: await everyGroup(), tokenId: row.id };
  };

  /** A person named earlier (a dashboard session), re-checked now: a disabled user or revoked token is no one. */
  const personOfSubject = async (subject: string): Promise<Person | undefined> => {
    if (subject.startsWith('token:')) return personOfToken({ id: subject.slice(6) });
    if (!subject.startsWith('user:')) return undefined;
    const user = await deps.store.db
      .selectFrom('users')
      .select(['id', 'name', 'groups', 'disabled'])
      .where('id', '=', subject.slice(5))
      .executeTakeFirst();
    if (!user || user.disabled) return undefined;
    return { subject: `user:${user.id}`, name: user.name, groups: parseJson<string[]>(user.groups, []) };
  };

  /** A person sealed into a consent page, re-checked now, within the groups the page showed (see `sessionPerson`). */
  const stillPerson = async (sealed: Person): Promise<Person | undefined> => {
    const person = await personOfSubject(sealed.subject);
    return person && { ...person, groups: person.groups.filter((g) => sealed.groups.includes(g)) };
  };

  /** Whether the dashboard session `id` is still live: not logged out or revoked, not expired. */
  const sessionLive = async (id: string | undefined): Promise<boolean> => {
    if (id === undefined) return false;
    const row = await deps.store.db
      .selectFrom('user_sessions')
      .select('id')
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', nowIso())
      .executeTakeFirst();
    return row !== undefined;
  };

  /** The person of the browser's dashboard session (users' sign-in), if the request carries one. */
  const sessionPerson = async (request: FastifyRequest): Promise<Person | undefined> => {
    const principal = request.principal;
    if (!principal || !request.session) return undefined;
    if (!principal.user) return personOfSubject(`token:${principal.id}`);
    const person = await personOfSubject(`user:${principal.user.id}`);
    // A session opened with an agent's token is the person within that token's groups (`tokenSignInPrincipal`).
    return person && { ...person, groups: person.groups.filter((g) => principal.groups.includes(g)) };
  };

  /** The person a request names: a token typed on the consent page, or the remembered sign-in cookie. */
  const personOf = async (
    request: FastifyRequest,
    typed: string | undefined,
  ): Promise<{ person: Person; remember?: string } | undefined> => {
    if (typed !== undefined && typed !== '') {
      const person = await personOfToken({ hash: hashToken(typed) });
      if (!person) return undefined;
      const sealed = seal(
        deps.sealKey,
        JSON.stringify({ tokenId: person.tokenId, exp: Date.now() + PERSON_TTL_MS }),
        aadFor(['oauth-person']),
      );
      return { person, remember: sealed };
    }
    const remembered = cookie(request, PERSON_COOKIE);
    if (!remembered) return undefined;
    try {
      const { tokenId, exp } = JSON.parse(unseal(deps.sealKey, remembered, aadFor(['oauth-person']))) as {
        tokenId: string;
        exp: number;
      };
      if (exp < Date.now()) return undefined;
      // Re-checked on every use: a revoked token or a disabled user signs nobody in.
      const person = await personOfToken({ id: tokenId });
      return person ? { person } : undefined;
    } catch {
      return undefined;
    }
  };

  const showConsent = async (
    reply: FastifyReply,
    pending: PendingAuthorization,
    sealed: string,
    person: Person | undefined,
    error?: string,
  ) => {
    const client = await deps.clients.find(pending.clientId, true);
    const path = resourcePath(pending.resource, deps.base()) ?? '/mcp';
    reply
      .code(error ? 401 : 200)
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('content-security-policy', consentCsp(pending.redirectUri))
      .header('x-frame-options', 'DENY')
      .header('referrer-policy', 'no-referrer')
      .header('x-content-type-options', 'nosniff');
    return reply.send(
      consentPage({
        client,
        pending,
        sealed,
        person,
        groups: person ? groupsLent(pending, person) : undefined,
        surface: surfaceName(path),
        ...(error ? { error } : {}),
      }),
    );
  };

  const routes: RouteDeclaration[] = [
    // RFC 8414's address and the OIDC discovery alias serve one document.
    ...[
      {
        url: '/.well-known/oauth-authorization-server',
        summary: 'OAuth 2.1 authorization server metadata (RFC 8414).',
      },
      {
        url: '/.well-known/openid-configuration',
        summary: 'The authorization server metadata at the OpenID discovery address (for clients that look there).',
      },
    ].map(({ url, summary }) =>
      defineRoute({
        method: 'GET',
        url,
        summary,
        scope: 'system',
        access: 'public',
        mcp: exclude(PROTOCOL),
        handler: async () =>
          authorizationServerMetadata(deps.base(), (await deps.settings.current())['oauth.dynamicRegistration']),
      }),
    ),
    defineRoute({
      method: 'GET',
      url: '/.well-known/oauth-protected-resource',
      summary: 'Protected resource metadata (RFC 9728), root form: the hub /mcp.',
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: () => protectedResource('/mcp'),
    }),
    defineRoute({
      method: 'GET',
      url: '/.well-known/oauth-protected-resource/*',
      summary:
        'Protected resource metadata (RFC 9728) of one MCP endpoint (/mcp, /mcp/s/{id}, /mcp/admin, /mcp/memory).',
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: ({ request }) => {
        const rest = (request.url.split('?')[0] ?? '').slice('/.well-known/oauth-protected-resource'.length);
        const prefix = new URL(deps.base()).pathname.replace(/\/$/, '');
        const path = rest.startsWith(`${prefix}/`) ? surfacePath(rest.slice(prefix.length)) : undefined;
        if (!path) throw new GatehouseError('not_found', 'No MCP endpoint at that path.');
        return protectedResource(path);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/.well-known/*',
      summary: 'Any other well-known path: a JSON 404, never the dashboard.',
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: ({ request }) => {
        throw new GatehouseError('not_found', `No well-known document at ${request.url.split('?')[0]}.`);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/oauth/jwks',
      summary: 'The public keys that sign OAuth access tokens (JWKS).',
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: async ({ reply }) => {
        reply.header('cache-control', 'public, max-age=60');
        return deps.keys.jwks();
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/authorize',
      summary: 'OAuth authorization endpoint: checks the request and shows the consent page.',
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: async ({ request, reply }) => {
        await deps.limits.take('authorize', request.ip);
        const base = deps.base();
        let nonce = cookie(request, CSRF_COOKIE);
        if (!nonce || nonce.length < 32) {
          nonce = randomBytes(24).toString('base64url');
          setCookie(reply, base, CSRF_COOKIE, nonce, { maxAgeS: 3600, sameSite: 'Strict' });
        }
        const outcome = await deps.server.authorize(queryParams(request), nonce);
        if (outcome.kind === 'error') {
          return reply
            .code(outcome.status)
            .header('cache-control', 'no-store')
            .send({ error: outcome.error, error_description: outcome.description });
        }
        if (outcome.kind === 'redirect') return reply.code(302).header('location', outcome.location).send();
        const fromSession = await sessionPerson(request);
        const signedIn = fromSession ? { person: fromSession } : await personOf(request, undefined);
        // Consent is remembered per (person, client, resource, scope): a known person is not asked again.
        if (signedIn && (await deps.server.rememberedConsent(outcome.pending, signedIn.person))) {
          const location = await deps.server.approve(outcome.pending, signedIn.person, outcome.client);
          return reply.code(302).header('location', location).header('cache-control', 'no-store').send();
        }
        if (fromSession) {
          // The answer (a form post, which carries no session principal) comes back with the person sealed in.
          const pending = { ...outcome.pending, person: fromSession, sessionId: request.session?.id };
          return showConsent(reply, pending, deps.server.sealPending(pending), fromSession);
        }
        return showConsent(reply, outcome.pending, outcome.sealed, signedIn?.person);
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/authorize',
      summary: "The consent page's answer: approve or deny, signed in with a session or a token.",
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: async ({ request, reply }) => {
        await deps.limits.take('consent', request.ip);
        const base = deps.base();
        const origin = request.headers.origin;
        if (origin !== undefined && origin !== 'null' && origin !== new URL(base).origin) {
          throw oauthError('oauth.invalid_request', 'The consent form was posted from another origin.');
        }
        const form = params(request.body);
        const pending = form.request ? deps.server.openPending(form.request, cookie(request, CSRF_COOKIE)) : undefined;
        if (!pending)
          throw oauthError(
            'oauth.invalid_request',
            'The consent request expired or is not from this browser; start again from the client.',
          );
        const client = await deps.clients.find(pending.clientId, true);
        // Signed in by the session that showed the page, while it lives: a logout since ends that sign-in.
        const sealedPerson =
          !form.token && pending.person && (await sessionLive(pending.sessionId))
            ? await stillPerson(pending.person)
            : undefined;
        const signedIn = sealedPerson ? { person: sealedPerson } : await personOf(request, form.token);
        if (form.decision === 'deny')
          return reply.code(302).header('location', deps.server.deny(pending, signedIn?.person)).send();
        if (form.decision !== 'approve') throw oauthError('oauth.invalid_request', 'decision must be approve or deny.');
        if (!signedIn) {
          deps.audit({ action: 'oauth.consent', outcome: 'sign_in_failed', clientId: pending.clientId });
          return showConsent(
            reply,
            pending,
            form.request as string,
            undefined,
            'That token does not sign in a person (a token you own, or an admin or operator token, is needed).',
          );
        }
        if (signedIn.remember)
          setCookie(reply, base, PERSON_COOKIE, signedIn.remember, { maxAgeS: PERSON_TTL_MS / 1000, sameSite: 'Lax' });
        const location = await deps.server.approve(pending, signedIn.person, client);
        return reply.code(302).header('location', location).header('cache-control', 'no-store').send();
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/token',
      summary: 'OAuth token endpoint: authorization_code (PKCE S256) and refresh_token grants.',
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: async ({ request, reply }) => {
        await deps.limits.take('token', request.ip);
        const answer = await deps.server.token(params(request.body));
        reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
        return answer;
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/register',
      summary: 'OAuth dynamic client registration (RFC 7591); off when the setting oauth.dynamicRegistration is false.',
      scope: 'system',
      access: 'public',
      status: 201,
      mcp: exclude(PROTOCOL),
      handler: async ({ request, reply }) => {
        await deps.limits.take('register', request.ip);
        if (!(await deps.settings.current())['oauth.dynamicRegistration'])
          throw oauthError('oauth.registration_disabled');
        const metadata = checkClientMetadata(request.body);
        const client = await deps.clients.register(metadata, 'dynamic');
        deps.audit({ action: 'oauth.register', outcome: 'ok', clientId: client.clientId, data: { name: client.name } });
        reply.header('cache-control', 'no-store');
        return {
          ...metadata,
          client_id: client.clientId,
          client_id_issued_at: Math.floor(Date.now() / 1000),
          client_name: client.name,
          redirect_uris: client.redirectUris,
          token_endpoint_auth_method: 'none',
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
        };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/revoke',
      summary: 'OAuth token revocation (RFC 7009): a refresh token ends its family, an access token itself.',
      scope: 'system',
      access: 'public',
      mcp: exclude(PROTOCOL),
      handler: async ({ request }) => {
        await deps.limits.take('revoke', request.ip);
        await deps.server.revoke(params(request.body), (token) => deps.verifier.verifySignature(token));
        return {};
      },
    }),
  ];

  const protectedResource = (path: string) => {
    const base = deps.base();
    return buildOAuthProtectedResourceMetadata({
      oauthMetadata: authorizationServerMetadata(base, true),
      resourceServerUrl: new URL(`${base}${path}`),
      scopesSupported: [BASE_SCOPE],
      resourceName: `Gatehouse ${surfaceName(path)}`,
      dangerouslyAllowInsecureIssuerUrl: base.startsWith('http:'),
    });
  };

  return async (app: FastifyInstance) => {
    app.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: FORM_LIMIT },
      (_request, body, done) => {
        const form: Record<string, string | string[]> = {};
        for (const [key, value] of new URLSearchParams(body as string)) {
          const had = form[key];
          form[key] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
        }
        done(null, form);
      },
    );
    app.setErrorHandler((error, request, reply) => {
      const { status, body } = oauthErrorAnswer(error instanceof GatehouseError ? error : mapFastify(error));
      request.log.info({ code: body.error }, 'oauth request refused');
      if (status === 401) reply.header('www-authenticate', 'Bearer error="invalid_client"');
      const retryAfterS = error instanceof GatehouseError ? error.details?.retryAfterS : undefined;
      if (status === 429 && typeof retryAfterS === 'number') reply.header('retry-after', String(retryAfterS));
      return reply.code(status).header('cache-control', 'no-store').send(body);
    });
    registerRoutes(app, routes);
  };
}

function mapFastify(error: unknown): GatehouseError {
  const status = (error as { statusCode?: number }).statusCode ?? 500;
  if (status === 413) return new GatehouseError('payload_too_large');
  if (status === 429) return new GatehouseError('rate_limited');
  if (status >= 400 && status < 500) return oauthError('oauth.invalid_request', 'The request body could not be read.');
  return new GatehouseError('internal_error');
}

/** The `WWW-Authenticate` challenge of a 401 from an MCP surface (RFC 9728 §5.1 and RFC 6750 §3). */
export function mcpChallenge(base: () => string) {
  return (request: FastifyRequest): string | undefined => {
    const config = request.routeOptions.config as { mcpEndpoint?: boolean } | undefined;
    const path = config?.mcpEndpoint ? surfacePath(request.url) : undefined;
    if (!path) return undefined;
    const offered = request.headers.authorization !== undefined;
    return `Bearer resource_metadata="${resourceMetadataUrl(base(), path)}", scope="${BASE_SCOPE}"${
      offered
        ? ', error="invalid_token", error_description="The access token is invalid, expired, revoked or for another resource."'
        : ''
    }`;
  };
}

const clientBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  redirectUris: z.array(z.string().min(1).max(2_000)).min(1).max(20),
});

/** REST: grants (listed and revoked by their person or an admin), pre-registered clients and key rotation (admins). */
export function oauthRestRoutes(
  deps: OAuthRouteDeps & { onGrantRevoked(id: string): Promise<void> },
): RouteDeclaration[] {
  // An admin sees every grant; anyone else the grants they made (as their user, or as their token).
  const subjectsOf = (principal: Principal | undefined): string[] | undefined =>
    principal && principal.role !== 'admin'
      ? [`token:${principal.id}`, ...(principal.user ? [`user:${principal.user.id}`] : [])]
      : undefined;
  return [
    defineRoute({
      method: 'GET',
      url: '/api/oauth/grants',
      summary: "OAuth grants: an admin sees everyone's, anyone else their own.",
      scope: 'tokens',
      access: ['admin', 'operator', 'member'],
      mcp: exclude("OAuth grants are people's decisions, listed to them in the dashboard and over REST, not to agents"),
      handler: async ({ principal }) => {
        return { grants: await listGrants(deps.store, subjectsOf(principal)) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/oauth/grants/:id',
      summary: 'Revokes an OAuth grant: its refresh tokens at once, its access tokens on their next use.',
      scope: 'tokens',
      access: ['admin', 'operator', 'member'],
      params: z.strictObject({ id: z.string().min(1).max(100) }),
      mcp: exclude("Revoking a person's grant is that person's or an admin's decision, not an agent's"),
      handler: async ({ params: p, principal }) => {
        const mine = await listGrants(deps.store, subjectsOf(principal));
        if (!mine.some((g) => g.id === p.id)) throw new GatehouseError('not_found', 'No such grant (of yours).');
        await deps.server.revokeGrant(p.id);
        await deps.onGrantRevoked(p.id);
        deps.audit({
          action: 'oauth.grant_revoked',
          outcome: 'ok',
          subject: principal?.id,
          subjectName: principal?.name,
          data: { grant: p.id },
        });
        return { revoked: p.id };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/oauth/clients',
      summary: 'Pre-registers an OAuth client (a public client: PKCE, no secret).',
      scope: 'tokens',
      access: ['admin'],
      status: 201,
      body: clientBody,
      mcp: exclude('Registering who may ask people for access is an admin decision, not an agent operation'),
      handler: async ({ body, principal }) => {
        const metadata = checkClientMetadata({ client_name: body.name, redirect_uris: body.redirectUris });
        const client = await deps.clients.register(metadata, 'static', principal?.id);
        deps.audit({
          action: 'oauth.client_created',
          outcome: 'ok',
          subject: principal?.id,
          subjectName: principal?.name,
          clientId: client.clientId,
        });
        return { clientId: client.clientId, name: client.name, redirectUris: client.redirectUris };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/oauth/keys/rotate',
      summary: 'Adds a new access-token signing key; the previous one stays published until its tokens expired.',
      scope: 'tokens',
      access: ['admin'],
      mcp: exclude('Key rotation is an admin operation on the authorization server, not an agent operation'),
      handler: async ({ principal }) => {
        const kid = await deps.keys.rotate();
        deps.audit({
          action: 'oauth.key_rotated',
          outcome: 'ok',
          subject: principal?.id,
          subjectName: principal?.name,
          data: { kid },
        });
        return { kid };
      },
    }),
  ];
}
