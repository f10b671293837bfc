/**
 * Upstream OAuth grants, registered clients and pending flows in the store. Tokens and client secrets
 * are sealed (AES-256-GCM) with additional data binding them to (server, its URL, subject, issuer,
 * field): a value copied onto another grant, or left after the server's URL changed, does not open.
 * Nothing here returns a token except `open`, which only the OAuth client calls.
 */
import { createHash } from 'node:crypto';
import type { AuthorizationServerMetadata } from '@modelcontextprotocol/client';
import type { Kysely } from 'kysely';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import type { Database, UpstreamOAuthGrantTable } from '../store/schema.js';

/** Whose grant: the one shared grant of a server, or one user's. */
export type Subject = 'shared' | `user:${string}`;

export interface GrantKey {
  serverId: string;
  /** The server's URL: part of the seal, so a re-pointed server's grants never open. */
  serverUrl: string;
  subject: Subject;
}

export type GrantState = 'connected' | 'needs_reconnect';

/** What anyone may see of a grant: never a token. */
export interface GrantView {
  serverId: string;
  subject: Subject;
  issuer: string;
  state: GrantState;
  scopes: string[];
  /** Scopes the next connect asks for beyond `scopes` (the upstream answered 403 insufficient_scope). */
  wantedScopes: string[];
  expiresAt: string | null;
  refreshable: boolean;
  lastError: string | null;
  connectedAt: string;
  updatedAt: string;
}

export interface OpenedGrant {
  view: GrantView;
  clientId: string;
  metadata: AuthorizationServerMetadata;
  accessToken: string;
  refreshToken: string | undefined;
  /** The RFC 8707 resource the grant was asked for. */
  resource: string;
  /** The stored row as read (its sealed access token, new on every save): a refresh replaces only this one. */
  revision: string;
}

export interface NewTokens {
  accessToken: string;
  refreshToken?: string | undefined;
  /** Seconds, from the token answer's `expires_in`. */
  expiresIn?: number | undefined;
  scopes: string[];
}

export function hashState(state: string): string {
  return createHash('sha256').update(state).digest('hex');
}

export class GrantStore {
  constructor(
    private readonly store: Store,
    private readonly key: SealKey,
  ) {}

  private aad(key: GrantKey, issuer: string, field: string): Buffer {
    return aadFor(['upstream-oauth', key.serverId, key.serverUrl, key.subject, issuer, field]);
  }

  /** The newest grant of this subject for this server (a server has one authorization server at a time). */
  private async row(key: Pick<GrantKey, 'serverId' | 'subject'>): Promise<UpstreamOAuthGrantTable | undefined> {
    return this.store.db
      .selectFrom('upstream_oauth_grants')
      .selectAll()
      .where('server_id', '=', key.serverId)
      .where('subject', '=', key.subject)
      .orderBy('updated_at', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  async view(key: Pick<GrantKey, 'serverId' | 'subject'>): Promise<GrantView | undefined> {
    const row = await this.row(key);
    return row && toView(row);
  }

  /** Every grant of one subject (a user's own list), newest first. */
  async ofSubject(subject: Subject): Promise<GrantView[]> {
    const rows = await this.store.db
      .selectFrom('upstream_oauth_grants')
      .selectAll()
      .where('subject', '=', subject)
      .orderBy('server_id')
      .limit(500)
      .execute();
    return rows.map(toView);
  }

  /** The grant with its tokens opened. Never log or return the result. */
  async open(key: GrantKey): Promise<OpenedGrant | undefined> {
    const row = await this.row(key);
    if (!row) return undefined;
    return {
      view: toView(row),
      clientId: row.client_id,
      metadata: parseJson<AuthorizationServerMetadata>(row.metadata, {} as AuthorizationServerMetadata),
      resource: row.resource ?? key.serverUrl,
      accessToken: unseal(this.key, row.access_token, this.aad(key, row.issuer, 'access_token')),
      refreshToken:
        row.refresh_token === null
          ? undefined
          : unseal(this.key, row.refresh_token, this.aad(key, row.issuer, 'refresh_token')),
      revision: row.access_token,
    };
  }

  /** Stores fresh tokens (a connect): the grant is `connected` again. */
  async save(
    key: GrantKey,
    grant: { issuer: string; clientId: string; metadata: AuthorizationServerMetadata; resource: string },
    tokens: NewTokens,
  ): Promise<GrantView> {
    const at = nowIso();
    const refresh = tokens.refreshToken;
    const values: UpstreamOAuthGrantTable = {
      server_id: key.serverId,
      subject: key.subject,
      issuer: grant.issuer,
      client_id: grant.clientId,
      metadata: JSON.stringify(grant.metadata),
      access_token: seal(this.key, tokens.accessToken, this.aad(key, grant.issuer, 'access_token')),
      refresh_token:
        refresh === undefined ? null : seal(this.key, refresh, this.aad(key, grant.issuer, 'refresh_token')),
      expires_at: expiresAt(tokens),
      scopes: JSON.stringify(tokens.scopes),
      state: 'connected',
      last_error: null,
      created_at: at,
      updated_at: at,
      scopes_wanted: null,
      resource: grant.resource === key.serverUrl ? null : grant.resource,
    };
    await this.store.db.transaction().execute(async (trx) => {
      // One grant per (subject, server): connecting through another authorization server replaces it.
      await trx
        .deleteFrom('upstream_oauth_grants')
        .where('server_id', '=', key.serverId)
        .where('subject', '=', key.subject)
        .where('issuer', '!=', grant.issuer)
        .execute();
      const { server_id: _s, subject: _u, issuer: _i, created_at: _c, ...update } = values;
      await trx
        .insertInto('upstream_oauth_grants')
        .values(values)
        .onConflict((oc) => oc.columns(['server_id', 'subject', 'issuer']).doUpdateSet(update))
        .execute();
    });
    return toView(values);
  }

  /**
   * Stores a refresh's tokens over the grant `refreshed` was read from, only if it is still that very row: a
   * disconnect (or a server re-pointed, or a reconnect) while the refresh was under way is not undone by it.
   * False when nothing was written.
   */
  async saveRefreshed(key: GrantKey, refreshed: OpenedGrant, tokens: NewTokens): Promise<boolean> {
    const issuer = refreshed.view.issuer;
    const refresh = tokens.refreshToken ?? refreshed.refreshToken;
    const at = nowIso();
    const result = await this.store.db
      .updateTable('upstream_oauth_grants')
      .set({
        access_token: seal(this.key, tokens.accessToken, this.aad(key, issuer, 'access_token')),
        refresh_token: refresh === undefined ? null : seal(this.key, refresh, this.aad(key, issuer, 'refresh_token')),
        expires_at: expiresAt(tokens),
        scopes: JSON.stringify(tokens.scopes),
        state: 'connected',
        last_error: null,
        updated_at: at,
      })
      .where('server_id', '=', key.serverId)
      .where('subject', '=', key.subject)
      .where('issuer', '=', issuer)
      .where('access_token', '=', refreshed.revision)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** A refresh the authorization server refused (revoked, expired): the grant waits for a person. */
  async markNeedsReconnect(key: Pick<GrantKey, 'serverId' | 'subject'>, reason: string): Promise<void> {
    await this.store.db
      .updateTable('upstream_oauth_grants')
      .set({ state: 'needs_reconnect', last_error: reason.slice(0, 500), updated_at: nowIso() })
      .where('server_id', '=', key.serverId)
      .where('subject', '=', key.subject)
      .execute();
  }

  /**
   * The upstream answered 401 to `accessToken`: the grant's access token is due now, so the next use refreshes it
   * (or, with no refresh token, marks the grant `needs_reconnect`) instead of sending it again. Only while that
   * very token is the grant's: a refresh (another call, another replica) that already replaced it is kept.
   */
  async markStale(key: GrantKey, accessToken: string): Promise<boolean> {
    const row = await this.row(key);
    if (!row) return false;
    let current: string;
    try {
      current = unseal(this.key, row.access_token, this.aad(key, row.issuer, 'access_token'));
    } catch {
      return false;
    }
    if (current !== accessToken) return false;
    const at = nowIso();
    const result = await this.store.db
      .updateTable('upstream_oauth_grants')
      .set({ expires_at: at, updated_at: at })
      .where('server_id', '=', key.serverId)
      .where('subject', '=', key.subject)
      .where('issuer', '=', row.issuer)
      // The sealed value as read: a save in between (a fresh token) makes this update match nothing.
      .where('access_token', '=', row.access_token)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * The upstream wants a scope the grant lacks (403 insufficient_scope): the grant waits for a person to
   * consent again, and the next connect asks for `wanted` (the union of what was granted and asked).
   */
  async markScopeWanted(key: Pick<GrantKey, 'serverId' | 'subject'>, wanted: readonly string[]): Promise<void> {
    await this.store.db
      .updateTable('upstream_oauth_grants')
      .set({
        state: 'needs_reconnect',
        scopes_wanted: JSON.stringify(wanted),
        last_error: `insufficient_scope: the upstream asks for ${wanted.join(' ')}`.slice(0, 500),
        updated_at: nowIso(),
      })
      .where('server_id', '=', key.serverId)
      .where('subject', '=', key.subject)
      .execute();
  }

  async remove(key: Pick<GrantKey, 'serverId' | 'subject'>): Promise<boolean> {
    const result = await this.store.db
      .deleteFrom('upstream_oauth_grants')
      .where('server_id', '=', key.serverId)
      .where('subject', '=', key.subject)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  // Registered clients (Dynamic Client Registration), one per (server, issuer).

  async client(
    key: Pick<GrantKey, 'serverId' | 'serverUrl'>,
    issuer: string,
  ): Promise<{ clientId: string; clientSecret?: string } | undefined> {
    const row = await this.store.db
      .selectFrom('upstream_oauth_clients')
      .selectAll()
      .where('server_id', '=', key.serverId)
      .where('issuer', '=', issuer)
      .executeTakeFirst();
    if (!row) return undefined;
    const aad = aadFor(['upstream-oauth-client', key.serverId, key.serverUrl, issuer]);
    return {
      clientId: row.client_id,
      ...(row.client_secret !== null && { clientSecret: unseal(this.key, row.client_secret, aad) }),
    };
  }

  async saveClient(
    key: Pick<GrantKey, 'serverId' | 'serverUrl'>,
    issuer: string,
    client: { clientId: string; clientSecret?: string | undefined },
  ): Promise<void> {
    const aad = aadFor(['upstream-oauth-client', key.serverId, key.serverUrl, issuer]);
    const values = {
      server_id: key.serverId,
      issuer,
      client_id: client.clientId,
      client_secret: client.clientSecret === undefined ? null : seal(this.key, client.clientSecret, aad),
      created_at: nowIso(),
    };
    await this.store.db
      .insertInto('upstream_oauth_clients')
      .values(values)
      .onConflict((oc) =>
        oc
          .columns(['server_id', 'issuer'])
          .doUpdateSet({ client_id: values.client_id, client_secret: values.client_secret }),
      )
      .execute();
  }

  // The issuer a configured (pre-registered) client is bound to, when the record names none (`auth.issuer`).

  /**
   * The issuer the server's configured client `clientId` was first used at: its pin, else — a grant made with it
   * before pins existed — the issuer of its oldest grant with that client.
   */
  async pinnedIssuer(serverId: string, clientId: string): Promise<string | undefined> {
    const pin = await this.store.db
      .selectFrom('upstream_oauth_pins')
      .select('issuer')
      .where('server_id', '=', serverId)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    if (pin) return pin.issuer;
    const grant = await this.store.db
      .selectFrom('upstream_oauth_grants')
      .select('issuer')
      .where('server_id', '=', serverId)
      .where('client_id', '=', clientId)
      .orderBy('created_at')
      .limit(1)
      .executeTakeFirst();
    return grant?.issuer;
  }

  /** Binds the configured client to `issuer`, after the authorization server accepted it there. */
  async pinIssuer(serverId: string, clientId: string, issuer: string): Promise<void> {
    await this.store.db
      .insertInto('upstream_oauth_pins')
      .values({ server_id: serverId, client_id: clientId, issuer, created_at: nowIso() })
      .onConflict((oc) => oc.columns(['server_id', 'client_id']).doUpdateSet({ issuer }))
      .execute();
  }

  // Pending authorizations: single use, bound to the subject and server that started them.

  async startFlow(
    key: GrantKey,
    flow: {
      state: string;
      issuer: string;
      clientId: string;
      metadata: AuthorizationServerMetadata;
      codeVerifier: string;
      redirectUri: string;
      scopes: string[];
      ttlMs: number;
      resource: string;
      /**
       * Who may open the connect link and where it sends their browser (`browser.ts`). A flow without
       * one has no link and never completes.
       */
      browser?: { opener: string; authorizationUrl: string } | undefined;
    },
  ): Promise<void> {
    const stateHash = hashState(flow.state);
    await this.store.db.deleteFrom('upstream_oauth_flows').where('expires_at', '<', nowIso()).execute();
    await this.store.db
      .insertInto('upstream_oauth_flows')
      .values({
        state_hash: stateHash,
        server_id: key.serverId,
        subject: key.subject,
        issuer: flow.issuer,
        client_id: flow.clientId,
        metadata: JSON.stringify(flow.metadata),
        code_verifier: seal(this.key, flow.codeVerifier, aadFor(['upstream-oauth-flow', stateHash, key.serverUrl])),
        redirect_uri: flow.redirectUri,
        scopes: JSON.stringify(flow.scopes),
        expires_at: new Date(Date.now() + flow.ttlMs).toISOString(),
        resource: flow.resource === key.serverUrl ? null : flow.resource,
        opener: flow.browser?.opener ?? null,
        // Kept as is: the state it carries completes nothing without the cookie of the browser bound below.
        authorization_url: flow.browser?.authorizationUrl ?? null,
        browser_hash: null,
      })
      .execute();
  }

  /** Drops a deleted person's grants and flows (`dropUserGrants`); answers how many grants they held. */
  async dropUser(userId: string): Promise<number> {
    return dropUserGrants(this.store.db, userId);
  }

  /** The live flow a connect link names (its state hash), for the page that binds a browser to it. */
  async linkedFlow(
    stateHash: string,
  ): Promise<
    { serverId: string; subject: Subject; opener: string; authorizationUrl: string; expiresAt: string } | undefined
  > {
    const row = await this.store.db
      .selectFrom('upstream_oauth_flows')
      .select(['server_id', 'subject', 'opener', 'authorization_url', 'expires_at'])
      .where('state_hash', '=', stateHash)
      .where('expires_at', '>', nowIso())
      .executeTakeFirst();
    if (!row?.opener || !row.authorization_url) return undefined;
    return {
      serverId: row.server_id,
      subject: row.subject as Subject,
      opener: row.opener,
      authorizationUrl: row.authorization_url,
      expiresAt: row.expires_at,
    };
  }

  /**
   * Flows under way for (server, subject) whose link `opener` opens, that live at least until `until`, newest
   * first: a connect asking again for the same thing hands one back instead of starting another.
   */
  async liveFlows(
    key: Pick<GrantKey, 'serverId' | 'subject'>,
    opener: string,
    until: Date,
  ): Promise<Array<{ stateHash: string; issuer: string; clientId: string; redirectUri: string; scopes: string[] }>> {
    const rows = await this.store.db
      .selectFrom('upstream_oauth_flows')
      .select(['state_hash', 'issuer', 'client_id', 'redirect_uri', 'scopes', 'authorization_url'])
      .where('server_id', '=', key.serverId)
      .where('subject', '=', key.subject)
      .where('opener', '=', opener)
      .where('expires_at', '>', until.toISOString())
      .orderBy('expires_at', 'desc')
      .limit(8)
      .execute();
    return rows
      .filter((row) => row.authorization_url)
      .map((row) => ({
        stateHash: row.state_hash,
        issuer: row.issuer,
        clientId: row.client_id,
        redirectUri: row.redirect_uri,
        scopes: parseJson<string[]>(row.scopes, []),
      }));
  }

  /** Binds the flow to the browser holding the nonce whose hash this is; the newest opening wins. */
  async bindBrowser(stateHash: string, browserHash: string): Promise<boolean> {
    const result = await this.store.db
      .updateTable('upstream_oauth_flows')
      .set({ browser_hash: browserHash })
      .where('state_hash', '=', stateHash)
      .where('expires_at', '>', nowIso())
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Takes the flow a callback's `state` names, once: the row is deleted by this very call, so a replayed
   * answer finds nothing. Undefined when unknown, used or expired.
   */
  async takeFlow(
    state: string,
    serverUrlOf: (serverId: string) => Promise<string | undefined>,
  ): Promise<
    | {
        key: GrantKey;
        issuer: string;
        clientId: string;
        metadata: AuthorizationServerMetadata;
        codeVerifier: string;
        redirectUri: string;
        scopes: string[];
        resource: string;
        /** Who could open its link, and the hash of the nonce its browser holds (null: never opened). */
        opener: string | null;
        browserHash: string | null;
      }
    | undefined
  > {
    const stateHash = hashState(state);
    const row = await this.store.db.transaction().execute(async (trx) => {
      const found = await trx
        .selectFrom('upstream_oauth_flows')
        .selectAll()
        .where('state_hash', '=', stateHash)
        .executeTakeFirst();
      if (!found) return undefined;
      const gone = await trx.deleteFrom('upstream_oauth_flows').where('state_hash', '=', stateHash).executeTakeFirst();
      return Number(gone.numDeletedRows) === 1 ? found : undefined;
    });
    if (!row || row.expires_at < nowIso()) return undefined;
    const serverUrl = await serverUrlOf(row.server_id);
    if (serverUrl === undefined) return undefined;
    let codeVerifier: string;
    try {
      codeVerifier = unseal(this.key, row.code_verifier, aadFor(['upstream-oauth-flow', stateHash, serverUrl]));
    } catch {
      return undefined; // the server was re-pointed since the flow started
    }
    return {
      key: { serverId: row.server_id, serverUrl, subject: row.subject as Subject },
      issuer: row.issuer,
      clientId: row.client_id,
      metadata: parseJson<AuthorizationServerMetadata>(row.metadata, {} as AuthorizationServerMetadata),
      codeVerifier,
      redirectUri: row.redirect_uri,
      scopes: parseJson<string[]>(row.scopes, []),
      resource: row.resource ?? serverUrl,
      opener: row.opener ?? null,
      browserHash: row.browser_hash ?? null,
    };
  }
}

/**
 * Drops every grant and pending flow of one person (deleted): theirs (subject `user:<id>`) and the shared
 * flows they started (opener). Registered clients are the server's, not theirs, and stay.
 */
export async function dropUserGrants(db: Kysely<Database>, userId: string): Promise<number> {
  const subject = `user:${userId}`;
  const grants = await db.deleteFrom('upstream_oauth_grants').where('subject', '=', subject).executeTakeFirst();
  await db
    .deleteFrom('upstream_oauth_flows')
    .where((eb) => eb.or([eb('subject', '=', subject), eb('opener', '=', subject)]))
    .execute();
  return Number(grants.numDeletedRows);
}

/**
 * Drops every grant, registered client, issuer pin and pending flow of a server: its URL changed (they were given
 * for the old target, see `credentialsForNewTarget`) or it was uninstalled. In the caller's transaction.
 */
export async function dropServerGrants(db: Kysely<Database>, serverId: string): Promise<void> {
  await db.deleteFrom('upstream_oauth_grants').where('server_id', '=', serverId).execute();
  await db.deleteFrom('upstream_oauth_clients').where('server_id', '=', serverId).execute();
  await db.deleteFrom('upstream_oauth_flows').where('server_id', '=', serverId).execute();
  await db.deleteFrom('upstream_oauth_pins').where('server_id', '=', serverId).execute();
}

function toView(row: UpstreamOAuthGrantTable): GrantView {
  return {
    serverId: row.server_id,
    subject: row.subject as Subject,
    issuer: row.issuer,
    state: row.state as GrantState,
    scopes: parseJson<string[]>(row.scopes, []),
    wantedScopes: row.scopes_wanted === null ? [] : parseJson<string[]>(row.scopes_wanted, []),
    expiresAt: row.expires_at,
    refreshable: row.refresh_token !== null,
    lastError: row.last_error,
    connectedAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** When tokens issued now expire (`expires_in` seconds), or null when the answer gave no lifetime. */
function expiresAt(tokens: NewTokens): string | null {
  return tokens.expiresIn === undefined ? null : new Date(Date.now() + tokens.expiresIn * 1000).toISOString();
}
