/**
 * Gatehouse as an OAuth 2.1 client of its upstreams' authorization servers (issue 18).
 *
 * - connect: discovery (guarded, bounded), a client (pre-registered, else Gatehouse's Client ID
 *   Metadata Document when the public URL is https, else Dynamic Client Registration), then an
 *   authorization URL with PKCE S256, `resource` = the upstream and a single-use `state` stored
 *   against the subject (shared, or one user) and the server. What the person is handed is Gatehouse's
 *   connect link, which only their own signed-in browser may pass (`browser.ts`).
 *   client_credentials connects at once.
 * - callback: takes the state once, in the browser the link bound, redeems the code (RFC 9207 `iss`
 *   checked), seals the grant.
 * - bearer: the access token for a call, refreshed shortly before expiry by whichever replica
 *   needs it, one refresh per grant across the fleet (store advisory lock); an authorization server
 *   that refuses the refresh marks the grant `needs_reconnect` — no retry loop.
 * Tokens never leave this module except as the `Authorization` header of the upstream's own URL.
 */
import { randomBytes } from 'node:crypto';
import {
  type AuthorizationServerMetadata,
  exchangeAuthorization,
  type FetchLike,
  type OAuthClientInformationMixed,
  OAuthError,
  refreshAuthorization,
  registerClient,
  startAuthorization,
} from '@modelcontextprotocol/client';
import type { EventHub } from '../audit/stream.js';
import { findGatehouseError, GatehouseError } from '../errors.js';
import { type Principal, safeEqual } from '../identity/index.js';
import type { OpenedOAuth, ServerStore } from '../registry/records.js';
import { parseJson } from '../store/json.js';
import type { Locks } from '../store/locks.js';
import type { ServerTable } from '../store/schema.js';
import { browserNonceHash, CONNECT_PATH, linkHandleOf, newBrowserNonce, type Opener, openerOf } from './browser.js';
import { asRefusal, discover } from './discovery.js';
import { boundedFetch, refused } from './fetch.js';
import type { GrantKey, GrantStore, GrantView, OpenedGrant, Subject } from './grants.js';

/** A token this close to its expiry is refreshed before use. */
const REFRESH_MARGIN_MS = 60_000;
/** A token is reused from memory at most this long, so a disconnect on another replica is seen soon. */
const CACHE_MS = 30_000;
const FLOW_TTL_MS = 10 * 60_000;
/**
 * A connect asking again for what a flow under way asks (an agent retrying, a hub list fanning out over every
 * per-user server) hands back that flow's link while it has this long left, rather than discovering and
 * starting another: one pending flow per (server, person, scopes), and the person still has time to finish.
 */
const FLOW_REUSE_MIN_LEFT_MS = FLOW_TTL_MS / 2;
/** How long a replica waits for another one's refresh of the same grant. */
const PEER_REFRESH_WAITS = [50, 100, 200, 400, 800, 1600];

export const CALLBACK_PATH = '/oauth/callback';
export const CLIENT_METADATA_PATH = '/oauth/client-metadata.json';

export interface UpstreamAuthPorts {
  records: ServerStore;
  grants: GrantStore;
  locks: Locks;
  events: EventHub;
  /** The egress guard of a policy (`privateNetwork` servers use the private one). */
  guardFor(privateNetwork: boolean): { fetch: FetchLike; check(url: string | URL): Promise<URL> };
  /** The address clients use (GATEHOUSE_PUBLIC_URL, else the bind address). */
  publicBaseUrl(): string;
  /** Whether the user exists and is not disabled: a flow of anyone else never completes. */
  userActive(userId: string): Promise<boolean>;
}

/** Whether a bearer refusal may carry a connect link: only when it goes back to the person's own agent. */
export interface BearerOptions {
  /**
   * The caller is the person's own agent (a hub call), so `auth.connect_required` may carry their
   * link. Without it (a handshake, whose error lands in the record everyone reads) no flow is started.
   */
  connectLink?: boolean;
}

export interface AuthStatus {
  server: string;
  mode: OpenedOAuth['mode'];
  grant: OpenedOAuth['grant'];
  /** `connected`, `needs_reconnect`, or `not_connected`. */
  state: GrantView['state'] | 'not_connected';
  issuer: string | null;
  scopes: string[];
  /** Scopes the next connect adds (the upstream answered 403 insufficient_scope). */
  wantedScopes: string[];
  expiresAt: string | null;
  refreshable: boolean;
  lastError: string | null;
}

export class UpstreamAuth {
  private readonly cache = new Map<string, { token: string; until: number }>();
  /** A `rejected` still writing that the grant's token is stale: the next `bearer` of that grant waits for it. */
  private readonly staling = new Map<string, Promise<void>>();

  constructor(private readonly ports: UpstreamAuthPorts) {}

  get grants(): GrantStore {
    return this.ports.grants;
  }

  /** The address browsers reach Gatehouse at (the connect link's cookie is scoped under it). */
  publicBaseUrl(): string {
    return this.ports.publicBaseUrl();
  }

  /** Gatehouse's own client metadata (the Client ID Metadata Document); its URL is its client_id. */
  clientMetadata(): Record<string, unknown> {
    const base = this.ports.publicBaseUrl();
    return {
      client_id: `${base}${CLIENT_METADATA_PATH}`,
      client_name: 'Gatehouse',
      client_uri: base,
      redirect_uris: [`${base}${CALLBACK_PATH}`],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  /**
   * Whose grant a call by `principal` uses: the shared one, or the caller's own — never the shared
   * grant for a per-user server, and never another user's.
   */
  subjectFor(oauth: OpenedOAuth, principal: Principal | undefined): Subject {
    if (oauth.mode === 'shared') return 'shared';
    const user = principal?.user;
    if (!user) throw new GatehouseError('auth.user_required');
    return `user:${user.id}`;
  }

  oauthOf(row: ServerTable): OpenedOAuth | undefined {
    return this.ports.records.oauthOf(row);
  }

  async status(serverId: string, subject: Subject): Promise<AuthStatus> {
    const row = await this.ports.records.getRow(serverId);
    const oauth = requireOAuth(row, this.oauthOf(row));
    const view = await this.ports.grants.view({ serverId, subject });
    return {
      server: serverId,
      mode: oauth.mode,
      grant: oauth.grant,
      state: view?.state ?? 'not_connected',
      issuer: view?.issuer ?? null,
      scopes: view?.scopes ?? [],
      wantedScopes: view?.wantedScopes ?? [],
      expiresAt: view?.expiresAt ?? null,
      refreshable: view?.refreshable ?? false,
      lastError: view?.lastError ?? null,
    };
  }

  /**
   * Starts connecting `subject` to the server: the connect link a person opens (Gatehouse's page that
   * binds their browser, then sends it to the authorization server), or — for client_credentials — the
   * grant itself. `scopes` widens the request (a 403 insufficient_scope). `by` started it: a user's own
   * flow is theirs to open; a shared one is its starter's.
   */
  async connect(
    serverId: string,
    subject: Subject,
    options: { scopes?: readonly string[] | undefined; by?: Principal | undefined } = {},
  ): Promise<{ authorizationUrl: string } | { connected: AuthStatus }> {
    const extraScopes = options.scopes ?? [];
    const row = await this.ports.records.getRow(serverId);
    const oauth = requireOAuth(row, this.oauthOf(row));
    const key = keyOf(row, subject);
    // What an upstream's 403 insufficient_scope asked for is asked for again, until a grant has it.
    const earlier = (await this.ports.grants.view(key))?.wantedScopes ?? [];
    const opener: Opener | undefined = subject === 'shared' ? options.by && openerOf(options.by) : subject;
    if (oauth.grant !== 'client_credentials' && opener) {
      const link = await this.pendingLink(key, oauth, opener, [...(oauth.scopes ?? []), ...earlier, ...extraScopes]);
      if (link) return { authorizationUrl: link };
    }
    const guard = this.guardOf(row);
    const found = await discover(serverUrlOf(row), {
      fetch: guard.fetch,
      check: guard.check,
      privateNetwork: row.private_network === 1,
    });
    // `auth.issuer` names the one authorization server this server's grants come from, whatever the client.
    if (oauth.issuer !== undefined && found.issuer !== oauth.issuer) throw notBoundIssuer(found.issuer, oauth.issuer);
    const wanted = [...new Set([...(oauth.scopes ?? found.scopes), ...earlier, ...extraScopes])];
    if (oauth.grant === 'client_credentials') {
      await this.clientCredentials(key, oauth, found.metadata, found.resource, wanted, guard.fetch);
      await this.announce(serverId, subject, 'connected');
      return { connected: await this.status(serverId, subject) };
    }
    if (!found.metadata.authorization_endpoint)
      throw asRefusal(undefined, 'the metadata names no authorization_endpoint');
    if (!opener) throw new GatehouseError('forbidden', 'A shared grant is connected by a person or an operator token.');
    const redirectUri = `${this.ports.publicBaseUrl()}${CALLBACK_PATH}`;
    const client = await this.clientFor(key, oauth, found.issuer, found.metadata, redirectUri, guard.fetch);
    // Refresh tokens: asked for where the server knows the scope that grants them.
    const scopes =
      found.metadata.scopes_supported?.includes('offline_access') && !wanted.includes('offline_access')
        ? [...wanted, 'offline_access']
        : wanted;
    const state = randomBytes(32).toString('base64url');
    let started: Awaited<ReturnType<typeof startAuthorization>>;
    try {
      started = await startAuthorization(found.issuer, {
        metadata: found.metadata,
        clientInformation: client,
        redirectUrl: redirectUri,
        ...(scopes.length > 0 && { scope: scopes.join(' ') }),
        state,
        // A string, exactly as the metadata names it: a URL object would add "/" to a pathless resource.
        resource: found.resource,
      });
    } catch (error) {
      throw asRefusal(error, 'the authorization server does not support PKCE S256');
    }
    await this.ports.grants.startFlow(key, {
      state,
      issuer: found.issuer,
      clientId: client.client_id,
      metadata: found.metadata,
      codeVerifier: started.codeVerifier,
      redirectUri,
      scopes,
      ttlMs: FLOW_TTL_MS,
      resource: found.resource,
      browser: { opener, authorizationUrl: started.authorizationUrl.href },
    });
    // The link names the flow by its state hash: the state itself reaches only the browser bound to it.
    const link = new URL(`${this.ports.publicBaseUrl()}${CONNECT_PATH}`);
    link.searchParams.set('flow', linkHandleOf(state));
    return { authorizationUrl: link.href };
  }

  /**
   * The connect link opened by `opener` (the dashboard session of the browser, if any): the flow is bound
   * to a new nonce for that browser's cookie, and the browser goes on to the authorization server. Refused,
   * and left as it was, when the browser is not signed in as the person who may open it.
   */
  async openLink(
    handle: string,
    opener: Opener | undefined,
  ): Promise<{ authorizationUrl: string; nonce: string; maxAgeS: number }> {
    if (!opener) {
      throw new GatehouseError(
        'unauthorized',
        'Sign in to the Gatehouse dashboard in this browser, as the person this link was made for, then open the link again.',
        { reason: 'not_signed_in' },
      );
    }
    const flow = await this.ports.grants.linkedFlow(handle);
    if (!flow) {
      throw new GatehouseError('oauth.state_invalid', 'This connect link is unknown, expired or already used.');
    }
    if (flow.opener !== opener) {
      throw new GatehouseError(
        'forbidden',
        'This connect link was made for someone else: open your own from Gatehouse (dashboard, or your agent).',
        { reason: 'not_the_opener' },
      );
    }
    const { nonce, hash } = newBrowserNonce();
    if (!(await this.ports.grants.bindBrowser(handle, hash))) {
      throw new GatehouseError('oauth.state_invalid', 'This connect link is unknown, expired or already used.');
    }
    return {
      authorizationUrl: flow.authorizationUrl,
      nonce,
      maxAgeS: (Date.parse(flow.expiresAt) - Date.now()) / 1000,
    };
  }

  /**
   * The authorization server sent the person back: redeem the code once, seal the grant. Only in the
   * browser the connect link bound (`browserNonce`, its cookie), and only for a person still active: a
   * mismatch consumes the flow unused (it could only be guessed from a leaked state, and is started again).
   */
  async callback(
    query: {
      state: string;
      code?: string | undefined;
      iss?: string | undefined;
      error?: string | undefined;
    },
    browserNonce: string | undefined,
  ): Promise<{ serverId: string; subject: Subject }> {
    const flow = await this.ports.grants.takeFlow(query.state, async (id) => {
      const row = await this.ports.records.getRow(id).catch(() => undefined);
      return row?.url ?? undefined;
    });
    if (!flow) throw new GatehouseError('oauth.state_invalid');
    if (
      flow.browserHash === null ||
      browserNonce === undefined ||
      !safeEqual(browserNonceHash(browserNonce), flow.browserHash)
    ) {
      throw new GatehouseError('oauth.browser_mismatch');
    }
    for (const who of [flow.key.subject, flow.opener]) {
      if (who?.startsWith('user:') && !(await this.ports.userActive(who.slice('user:'.length)))) {
        throw new GatehouseError('forbidden', 'The person this authorization was for is disabled or gone.', {
          reason: 'user_inactive',
        });
      }
    }
    const { key } = flow;
    if (query.error !== undefined || query.code === undefined) {
      throw new GatehouseError('auth_failed', 'The authorization server did not grant access.', {
        reason: (query.error ?? 'no_code').slice(0, 64),
      });
    }
    const row = await this.ports.records.getRow(key.serverId);
    const oauth = requireOAuth(row, this.oauthOf(row));
    const guard = this.guardOf(row);
    const client = await this.knownClient(key, oauth, flow.issuer, flow.clientId);
    let tokens: Awaited<ReturnType<typeof exchangeAuthorization>>;
    try {
      tokens = await exchangeAuthorization(flow.issuer, {
        metadata: flow.metadata,
        clientInformation: client,
        authorizationCode: query.code,
        ...(query.iss !== undefined && { iss: query.iss }),
        codeVerifier: flow.codeVerifier,
        redirectUri: flow.redirectUri,
        resource: flow.resource,
        fetchFn: guard.fetch,
      });
    } catch (error) {
      throw tokenFailure(error, 'The authorization code was not accepted');
    }
    await this.pinConfigured(key, oauth, flow.issuer, client.client_id);
    await this.ports.grants.save(
      key,
      { issuer: flow.issuer, clientId: client.client_id, metadata: flow.metadata, resource: flow.resource },
      {
        accessToken: tokens.access_token,
        refreshToken: tokens.refresh_token,
        expiresIn: tokens.expires_in,
        scopes: tokens.scope ? tokens.scope.split(' ') : flow.scopes,
      },
    );
    this.forget(key);
    await this.announce(key.serverId, key.subject, 'connected');
    return { serverId: key.serverId, subject: key.subject };
  }

  /**
   * A person's own connect (`POST /api/users/me/grants/{id}/connect`): only to a per-user server exposed
   * to one of the caller's groups, as the hub decides what it sees. An unknown and an unexposed id answer
   * alike (`mcp.not_found`): nobody learns of, or starts anything on, a server outside their groups.
   */
  async connectOwn(
    serverId: string,
    principal: Principal | undefined,
    scopes?: readonly string[],
  ): Promise<{ authorizationUrl: string } | { connected: AuthStatus }> {
    const user = principal?.user;
    if (!principal || !user) {
      throw new GatehouseError('auth.user_required', 'These are a person’s own grants; this token has no user.');
    }
    const row = await this.ports.records.getRow(serverId).catch((error: unknown) => {
      if (findGatehouseError(error)?.code === 'mcp.not_found') return undefined;
      throw error;
    });
    if (!row || !exposedTo(row, principal.groups)) throw notInstalled(serverId);
    // A shared server's grant is an operator's: a person's connect must not fetch one under their name.
    if (this.oauthOf(row)?.mode !== 'per-user') {
      throw new GatehouseError(
        'oauth.not_configured',
        `Server "${serverId}" does not connect each person's own account.`,
      );
    }
    return this.connect(serverId, `user:${user.id}`, { scopes, by: principal });
  }

  /**
   * A deleted person's upstream access: each grant revoked where the authorization server offers RFC 7009
   * (best effort), then every grant and flow of theirs dropped. Answers how many grants they held.
   */
  async disconnectUser(userId: string): Promise<number> {
    const subject: Subject = `user:${userId}`;
    let removed = 0;
    for (const grant of await this.ports.grants.ofSubject(subject)) {
      // A server gone or no longer on OAuth cannot revoke: its rows are dropped below all the same.
      if ((await this.disconnect(grant.serverId, subject).catch(() => undefined))?.removed) removed += 1;
    }
    removed += await this.ports.grants.dropUser(userId);
    for (const cached of this.cache.keys()) if (cached.endsWith(`\n${subject}`)) this.cache.delete(cached);
    return removed;
  }

  /**
   * A person's own disconnect reaches only a grant they hold: any other id (unknown, not exposed to them, shared,
   * not OAuth) answers word for word as an unknown one, so the route tells nothing of the servers installed.
   */
  async assertHolds(serverId: string, subject: Subject): Promise<void> {
    if (!(await this.ports.grants.view({ serverId, subject }))) throw notInstalled(serverId);
  }

  /** Forgets the grant, revoking it first where the authorization server offers RFC 7009. */
  async disconnect(serverId: string, subject: Subject): Promise<{ revoked: boolean; removed: boolean }> {
    const row = await this.ports.records.getRow(serverId);
    const oauth = requireOAuth(row, this.oauthOf(row));
    const key = keyOf(row, subject);
    const grant = await this.ports.grants.open(key).catch(() => undefined);
    let revoked = false;
    const endpoint = grant && (grant.metadata as { revocation_endpoint?: string }).revocation_endpoint;
    if (grant && endpoint) {
      const client = await this.knownClient(key, oauth, grant.view.issuer, grant.clientId).catch(() => undefined);
      if (client) {
        const guard = this.guardOf(row);
        for (const [token, hint] of [
          [grant.refreshToken, 'refresh_token'],
          [grant.accessToken, 'access_token'],
        ] as const) {
          if (token === undefined) continue;
          const response = await guard
            .fetch(endpoint, tokenRequest(client, grant.metadata, { token, token_type_hint: hint }))
            .catch(() => undefined);
          revoked ||= response?.ok === true;
        }
      }
    }
    const removed = await this.ports.grants.remove({ serverId, subject });
    this.forget(key);
    if (removed) await this.announce(serverId, subject, 'disconnected');
    return { revoked, removed };
  }

  /**
   * The access token for a call on the server by `subject`, fresh. `auth_required` (shared: not
   * connected; an operator connects it), `auth.connect_required` (per-user: this user has not), or
   * `auth_failed` (refused by the authorization server; the grant needs a reconnect).
   */
  async bearer(row: ServerTable, subject: Subject, options: BearerOptions = {}): Promise<string> {
    const oauth = requireOAuth(row, this.oauthOf(row));
    const link = options.connectLink === true;
    const key = keyOf(row, subject);
    const cacheKey = cacheKeyOf(key);
    // An upstream just refused this grant's token: read the grant once that is written, not the token again.
    await this.staling.get(cacheKey);
    const cached = this.cache.get(cacheKey);
    if (cached && cached.until > Date.now()) return cached.token;
    let grant = await this.ports.grants.open(key);
    if (!grant && oauth.grant === 'client_credentials' && subject === 'shared') {
      await this.connect(row.id, subject);
      grant = await this.ports.grants.open(key);
    }
    if (!grant) throw await this.notConnected(row, oauth, subject, link);
    if (grant.view.state === 'needs_reconnect')
      throw await this.reconnectRequired(row, oauth, subject, grant.view, link);
    if (expiresSoon(grant)) {
      try {
        grant = await this.refreshed(row, oauth, key, link);
      } catch (error) {
        // A per-user caller whose grant just needed a reconnect gets their own link at once, not on the next call.
        if (oauth.mode !== 'per-user' || findGatehouseError(error)?.details?.reason !== 'needs_reconnect') throw error;
        const view = await this.ports.grants.view(key);
        throw await this.reconnectRequired(row, oauth, subject, view ?? { wantedScopes: [], lastError: null }, link);
      }
    }
    this.remember(key, grant);
    return grant.accessToken;
  }

  /**
   * The upstream answered 403 insufficient_scope to the grant's token: the grant needs consent again with
   * the union of what it holds and what the upstream asked for (never a silent retry). Answers the error
   * the call reports: a per-user caller gets their own link asking for the wider scope (only a hub call,
   * the person's own agent, asks this).
   */
  async insufficientScope(row: ServerTable, subject: Subject, required: readonly string[]): Promise<GatehouseError> {
    const oauth = requireOAuth(row, this.oauthOf(row));
    const key = keyOf(row, subject);
    const view = await this.ports.grants.view(key);
    if (!view) return this.notConnected(row, oauth, subject, true);
    const wanted = [...new Set([...view.scopes, ...view.wantedScopes, ...required])];
    await this.ports.grants.markScopeWanted(key, wanted);
    this.forget(key);
    await this.announce(row.id, subject, 'needs_reconnect');
    return this.reconnectRequired(row, oauth, subject, { ...view, wantedScopes: wanted, lastError: null }, true);
  }

  /**
   * The upstream refused the token Gatehouse sent (401): forgotten here, and the grant's access token marked due
   * in the store, so the next call — on any replica — refreshes it once under the grant's lock, or (no refresh
   * token) marks the grant `needs_reconnect` and a per-user caller gets their link; never the same token again.
   * The store marks `token` (the one the upstream refused) only while it is still the grant's: a refresh that
   * replaced it meanwhile (here or on another replica) stands.
   */
  rejected(row: ServerTable, subject: Subject, token: string): void {
    const key = keyOf(row, subject);
    const cacheKey = cacheKeyOf(key);
    this.forget(key);
    const marking = this.ports.grants.markStale(key, token).then(
      () => undefined,
      // The store failed: the next call reads the grant as it was, and a later 401 marks it again.
      () => undefined,
    );
    this.staling.set(cacheKey, marking);
    void marking.then(() => {
      if (this.staling.get(cacheKey) === marking) this.staling.delete(cacheKey);
    });
  }

  /**
   * A grant waiting for a reconnect: for a per-user server, the caller's own link (it asks for any wider
   * scope the upstream wanted); for a shared one, an operator reconnects.
   */
  private async reconnectRequired(
    row: ServerTable,
    oauth: OpenedOAuth,
    subject: Subject,
    view: Pick<GrantView, 'wantedScopes' | 'lastError'>,
    link: boolean,
  ): Promise<GatehouseError> {
    const why = view.wantedScopes.length > 0 ? `the upstream asks for ${view.wantedScopes.join(' ')}` : view.lastError;
    if (oauth.mode === 'shared') {
      const error = needsReconnect(row.id, why);
      if (view.wantedScopes.length === 0) return error;
      return new GatehouseError('auth_failed', error.message, { reason: 'insufficient_scope' });
    }
    return this.notConnected(row, oauth, subject, link, why);
  }

  private async notConnected(
    row: ServerTable,
    oauth: OpenedOAuth,
    subject: Subject,
    /** Start a flow and hand its link over: only to the person's own agent (`BearerOptions`). */
    link: boolean,
    /** Set when a grant exists but needs consent again (and why). */
    reconnect?: string | null,
  ): Promise<GatehouseError> {
    if (oauth.mode === 'shared') {
      return new GatehouseError(
        'auth_required',
        `The upstream needs OAuth and no one has connected it yet: an operator connects it (POST /api/mcp/servers/${row.id}/auth/connect or Connect in the dashboard).`,
        { reason: 'not_connected' },
      );
    }
    // The person's own connect link, bound to them and this server (single use, ten minutes); only they
    // may open it, in a browser signed in to Gatehouse as them.
    let url: string | undefined;
    if (link) {
      try {
        const started = await this.connect(row.id, subject);
        if ('authorizationUrl' in started) url = started.authorizationUrl;
      } catch {
        url = undefined;
      }
    }
    const what =
      reconnect === undefined
        ? `Connect your account to "${row.id}" first`
        : `Connect your account to "${row.id}" again${reconnect ? ` (${reconnect})` : ''}`;
    return new GatehouseError(
      'auth.connect_required',
      url ? `${what}: open ${url}` : `${what} (dashboard, or POST /api/users/me/grants/${row.id}/connect).`,
      { reason: reconnect === undefined ? 'not_connected' : 'needs_reconnect', ...(url && { connectUrl: url }) },
    );
  }

  /** Refreshes under the grant's lock; a replica that finds it held waits for the holder's answer. */
  private async refreshed(row: ServerTable, oauth: OpenedOAuth, key: GrantKey, link: boolean): Promise<OpenedGrant> {
    const lockKey = `upstream-oauth:${key.serverId}:${key.subject}`;
    for (const wait of [0, ...PEER_REFRESH_WAITS]) {
      if (wait > 0) {
        await new Promise((resolve) => setTimeout(resolve, wait));
        const current = await this.ports.grants.open(key);
        if (!current) throw await this.notConnected(row, oauth, key.subject, link);
        if (current.view.state === 'needs_reconnect') throw needsReconnect(row.id, current.view.lastError);
        if (!expiresSoon(current)) return current;
      }
      const outcome = await this.ports.locks.withLock(lockKey, () => this.refreshHeld(row, oauth, key, link));
      if (outcome.ran) return outcome.value;
    }
    throw new GatehouseError('auth_failed', 'Another replica is refreshing this grant and has not finished; retry.', {
      reason: 'refresh_busy',
    });
  }

  private async refreshHeld(row: ServerTable, oauth: OpenedOAuth, key: GrantKey, link: boolean): Promise<OpenedGrant> {
    const current = await this.ports.grants.open(key);
    if (!current) throw await this.notConnected(row, oauth, key.subject, link);
    if (current.view.state === 'needs_reconnect') throw needsReconnect(row.id, current.view.lastError);
    if (!expiresSoon(current)) return current; // another replica refreshed it meanwhile
    const guard = this.guardOf(row);
    if (oauth.grant === 'client_credentials') {
      await this.clientCredentials(
        key,
        oauth,
        current.metadata,
        current.resource,
        current.view.scopes,
        guard.fetch,
        current,
      );
    } else {
      if (current.refreshToken === undefined) {
        // Expired, or refused by the upstream (`rejected`): with nothing to refresh it, a person connects again.
        await this.giveUp(
          key,
          'The access token expired or was refused, and the authorization server issued no refresh token.',
        );
        throw needsReconnect(row.id, 'the access token expired or was refused, and there is no refresh token');
      }
      const client = await this.knownClient(key, oauth, current.view.issuer, current.clientId);
      let tokens: Awaited<ReturnType<typeof refreshAuthorization>>;
      try {
        tokens = await refreshAuthorization(current.view.issuer, {
          metadata: current.metadata,
          clientInformation: client,
          refreshToken: current.refreshToken,
          resource: current.resource,
          fetchFn: guard.fetch,
        });
      } catch (error) {
        const failure = tokenFailure(error, 'The refresh was refused');
        // The server answered no (revoked, expired): a person must reconnect. A network failure is not that.
        if (OAuthError.isInstance(error)) {
          await this.giveUp(key, `refresh refused (${error.code})`);
          throw needsReconnect(row.id, `refresh refused (${error.code})`);
        }
        throw failure;
      }
      await this.pinConfigured(key, oauth, current.view.issuer, client.client_id);
      // Written only over the grant as read: a disconnect meanwhile stays a disconnect (the grant read next is
      // then gone), and a reconnect meanwhile keeps its own tokens.
      await this.ports.grants.saveRefreshed(key, current, {
        accessToken: tokens.access_token,
        refreshToken: tokens.refresh_token,
        expiresIn: tokens.expires_in,
        scopes: tokens.scope ? tokens.scope.split(' ') : current.view.scopes,
      });
    }
    const fresh = await this.ports.grants.open(key);
    if (!fresh) throw await this.notConnected(row, oauth, key.subject, link);
    return fresh;
  }

  private async giveUp(key: GrantKey, reason: string): Promise<void> {
    await this.ports.grants.markNeedsReconnect(key, reason);
    this.forget(key);
    await this.announce(key.serverId, key.subject, 'needs_reconnect');
  }

  /** client_credentials (machine to machine): one token request with the pre-registered client. */
  private async clientCredentials(
    key: GrantKey,
    oauth: OpenedOAuth,
    metadata: AuthorizationServerMetadata,
    resource: string,
    scopes: readonly string[],
    fetch: FetchLike,
    /** The grant this renews (a refresh), written over only if it is still stored as read. */
    renewing?: OpenedGrant,
  ): Promise<void> {
    if (!oauth.clientId) throw new GatehouseError('oauth.not_configured', 'client_credentials needs a clientId.');
    // The secret goes in this very request: only to the issuer the client is bound to.
    await this.checkConfiguredIssuer(key, oauth, metadata.issuer);
    const client = { client_id: oauth.clientId, ...(oauth.clientSecret && { client_secret: oauth.clientSecret }) };
    const body: Record<string, string> = { grant_type: 'client_credentials', resource };
    if (scopes.length > 0) body.scope = scopes.join(' ');
    let answer: { access_token?: unknown; expires_in?: unknown; scope?: unknown; error?: unknown };
    let status: number;
    try {
      const response = await fetch(metadata.token_endpoint, tokenRequest(client, metadata, body));
      status = response.status;
      answer = (await response.json()) as typeof answer;
    } catch (error) {
      throw tokenFailure(error, 'The client_credentials token request failed');
    }
    if (status !== 200 || typeof answer.access_token !== 'string') {
      throw new GatehouseError('auth_failed', 'The authorization server refused the client credentials.', {
        reason: typeof answer.error === 'string' ? answer.error.slice(0, 64) : `http_${status}`,
      });
    }
    await this.pinConfigured(key, oauth, metadata.issuer, oauth.clientId);
    const tokens = {
      accessToken: answer.access_token,
      expiresIn: typeof answer.expires_in === 'number' ? answer.expires_in : undefined,
      scopes: typeof answer.scope === 'string' ? answer.scope.split(' ') : [...scopes],
    };
    if (renewing) await this.ports.grants.saveRefreshed(key, renewing, tokens);
    else
      await this.ports.grants.save(
        key,
        { issuer: metadata.issuer, clientId: oauth.clientId, metadata, resource },
        tokens,
      );
    this.forget(key);
  }

  /** The spec's order: pre-registered, else Gatehouse's metadata document (https only), else DCR. */
  private async clientFor(
    key: GrantKey,
    oauth: OpenedOAuth,
    issuer: string,
    metadata: AuthorizationServerMetadata,
    redirectUri: string,
    fetch: FetchLike,
  ): Promise<OAuthClientInformationMixed> {
    if (oauth.clientId) {
      // No secret is sent yet (it goes with the code), but a flow to another issuer could only end by sending it.
      await this.checkConfiguredIssuer(key, oauth, issuer);
      return { client_id: oauth.clientId, ...(oauth.clientSecret && { client_secret: oauth.clientSecret }) };
    }
    const base = this.ports.publicBaseUrl();
    if (base.startsWith('https://') && metadata.client_id_metadata_document_supported === true) {
      return { client_id: `${base}${CLIENT_METADATA_PATH}` };
    }
    const known = await this.ports.grants.client(key, issuer);
    if (known) return { client_id: known.clientId, ...(known.clientSecret && { client_secret: known.clientSecret }) };
    if (!metadata.registration_endpoint) {
      throw new GatehouseError(
        'oauth.not_configured',
        'The authorization server offers no registration and no client id is configured: give auth.clientId.',
      );
    }
    const methods = metadata.token_endpoint_auth_methods_supported;
    let registered: Awaited<ReturnType<typeof registerClient>>;
    try {
      registered = await registerClient(issuer, {
        metadata,
        clientMetadata: {
          client_name: 'Gatehouse',
          redirect_uris: [redirectUri],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method:
            !methods || methods.includes('client_secret_basic') ? 'client_secret_basic' : 'none',
        },
        fetchFn: fetch,
      });
    } catch (error) {
      throw tokenFailure(error, 'Dynamic Client Registration was refused');
    }
    await this.ports.grants.saveClient(key, issuer, {
      clientId: registered.client_id,
      clientSecret: registered.client_secret,
    });
    return {
      client_id: registered.client_id,
      ...(registered.client_secret && { client_secret: registered.client_secret }),
    };
  }

  /** The client a flow or grant was made with, with its secret (pre-registered, CIMD or registered). */
  private async knownClient(
    key: GrantKey,
    oauth: OpenedOAuth,
    issuer: string,
    clientId: string,
  ): Promise<OAuthClientInformationMixed> {
    if (oauth.clientId === clientId) {
      // Its secret is about to go to this issuer's endpoints (code, refresh, revocation): the bound one only.
      await this.checkConfiguredIssuer(key, oauth, issuer);
      return { client_id: clientId, ...(oauth.clientSecret && { client_secret: oauth.clientSecret }) };
    }
    const registered = await this.ports.grants.client(key, issuer);
    if (registered?.clientId === clientId) {
      return { client_id: clientId, ...(registered.clientSecret && { client_secret: registered.clientSecret }) };
    }
    if (clientId === `${this.ports.publicBaseUrl()}${CLIENT_METADATA_PATH}`) return { client_id: clientId };
    throw new GatehouseError('auth_failed', 'The client this grant was made with is gone; connect again.', {
      reason: 'client_gone',
    });
  }

  /**
   * The configured client's secret goes to one authorization server: `auth.issuer`, else the issuer the client
   * was first used at (its pin). Called before every request that carries it, so an upstream whose metadata
   * turns to another authorization server (hostile, compromised) never collects it — not even by the connect
   * `bearer` starts on its own for a client_credentials grant.
   */
  private async checkConfiguredIssuer(key: GrantKey, oauth: OpenedOAuth, issuer: string): Promise<void> {
    if (!oauth.clientId) return;
    const bound = oauth.issuer ?? (await this.ports.grants.pinnedIssuer(key.serverId, oauth.clientId));
    if (bound !== undefined && bound !== issuer) throw notBoundIssuer(issuer, bound);
  }

  /** The configured client worked at `issuer` (the authorization server accepted it): it is bound there now. */
  private async pinConfigured(key: GrantKey, oauth: OpenedOAuth, issuer: string, clientId: string): Promise<void> {
    if (oauth.clientId !== undefined && clientId === oauth.clientId) {
      await this.ports.grants.pinIssuer(key.serverId, clientId, issuer);
    }
  }

  /**
   * The link of a flow under way that asks for what this connect would (same server, subject and opener; its
   * scopes cover `required`; the configured client and issuer, the current callback), with time left to finish.
   * Its browser binding is the flow's own: only `opener`'s signed-in browser passes it.
   */
  private async pendingLink(
    key: GrantKey,
    oauth: OpenedOAuth,
    opener: Opener,
    required: readonly string[],
  ): Promise<string | undefined> {
    const flows = await this.ports.grants.liveFlows(key, opener, new Date(Date.now() + FLOW_REUSE_MIN_LEFT_MS));
    if (flows.length === 0) return undefined;
    const redirectUri = `${this.ports.publicBaseUrl()}${CALLBACK_PATH}`;
    const bound = oauth.clientId
      ? (oauth.issuer ?? (await this.ports.grants.pinnedIssuer(key.serverId, oauth.clientId)))
      : oauth.issuer;
    const flow = flows.find(
      (f) =>
        f.redirectUri === redirectUri &&
        (oauth.clientId === undefined || f.clientId === oauth.clientId) &&
        (bound === undefined || f.issuer === bound) &&
        required.every((scope) => f.scopes.includes(scope)),
    );
    if (!flow) return undefined;
    const link = new URL(`${this.ports.publicBaseUrl()}${CONNECT_PATH}`);
    link.searchParams.set('flow', flow.stateHash);
    return link.href;
  }

  private guardOf(row: ServerTable): { fetch: FetchLike; check(url: string | URL): Promise<URL> } {
    const guard = this.ports.guardFor(row.private_network === 1);
    return { fetch: boundedFetch(guard.fetch), check: (url) => guard.check(url) };
  }

  private remember(key: GrantKey, grant: OpenedGrant): void {
    const expires = grant.view.expiresAt ? Date.parse(grant.view.expiresAt) - REFRESH_MARGIN_MS : Infinity;
    this.cache.set(cacheKeyOf(key), { token: grant.accessToken, until: Math.min(Date.now() + CACHE_MS, expires) });
  }

  private forget(key: GrantKey): void {
    this.cache.delete(cacheKeyOf(key));
  }

  private async announce(serverId: string, subject: Subject, state: string): Promise<void> {
    // Who, not what: the subject kind and user id; never a token.
    await this.ports.events.publish('server.auth', { id: serverId, subject, state }).catch(() => {});
  }
}

/** The hub's rule (its snapshot's `server`): the record's exposure shares a group with the caller's. */
function exposedTo(row: ServerTable, groups: readonly string[]): boolean {
  const exposure = parseJson<string[]>(row.exposure, ['default']);
  return groups.some((group) => exposure.includes(group));
}

/** As `ServerStore.getRow` answers an unknown id, word for word. */
function notInstalled(id: string): GatehouseError {
  return new GatehouseError('mcp.not_found', `No MCP server "${id}" is installed.`, { id });
}

function requireOAuth(row: ServerTable, oauth: OpenedOAuth | undefined): OpenedOAuth {
  if (!oauth || row.transport !== 'streamable-http') {
    throw new GatehouseError('oauth.not_configured', `Server "${row.id}" does not use OAuth.`);
  }
  return oauth;
}

function serverUrlOf(row: ServerTable): string {
  return new URL(row.url ?? '').href;
}

function keyOf(row: ServerTable, subject: Subject): GrantKey {
  return { serverId: row.id, serverUrl: serverUrlOf(row), subject };
}

function cacheKeyOf(key: GrantKey): string {
  return `${key.serverId}\n${key.serverUrl}\n${key.subject}`;
}

function expiresSoon(grant: OpenedGrant): boolean {
  return grant.view.expiresAt !== null && Date.parse(grant.view.expiresAt) - Date.now() < REFRESH_MARGIN_MS;
}

/** A discovery naming another authorization server than the one the server's OAuth is bound to. */
function notBoundIssuer(found: string, bound: string): GatehouseError {
  return refused(
    `it names the authorization server ${found.slice(0, 200)}, not ${bound.slice(0, 200)}, the one this server's OAuth is bound to (auth.issuer, else where its configured client was first used)`,
  );
}

function needsReconnect(serverId: string, why: string | null): GatehouseError {
  return new GatehouseError(
    'auth_failed',
    `The upstream grant needs a reconnect${why ? ` (${why})` : ''}: connect "${serverId}" again.`,
    { reason: 'needs_reconnect' },
  );
}

/** A token-endpoint failure as Gatehouse reports it: the OAuth error code, never the server's text. */
function tokenFailure(error: unknown, what: string): GatehouseError {
  const inner = findGatehouseError(error);
  if (inner) return inner;
  const reason = OAuthError.isInstance(error) ? error.code : error instanceof Error ? error.name : 'error';
  return new GatehouseError(
    'auth_failed',
    `${what} (${reason}).`,
    { reason: String(reason).slice(0, 64) },
    {
      cause: error,
    },
  );
}

/** A form POST to a token or revocation endpoint with the client authenticated as the server prefers. */
function tokenRequest(
  client: OAuthClientInformationMixed,
  metadata: AuthorizationServerMetadata,
  fields: Record<string, string>,
): RequestInit {
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  const body = new URLSearchParams(fields);
  const secret = 'client_secret' in client ? client.client_secret : undefined;
  const methods = metadata.token_endpoint_auth_methods_supported;
  if (secret && (!methods || methods.includes('client_secret_basic'))) {
    const encode = (v: string) => encodeURIComponent(v).replace(/%20/g, '+');
    headers.authorization = `Basic ${Buffer.from(`${encode(client.client_id)}:${encode(secret)}`).toString('base64')}`;
  } else {
    body.set('client_id', client.client_id);
    if (secret) body.set('client_secret', secret);
  }
  return { method: 'POST', headers, body: body.toString() };
}
