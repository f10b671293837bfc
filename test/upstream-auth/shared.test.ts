/**
 * OAuth to an upstream, `shared` mode, end to end against a real authorization server (oidc-provider)
 * and a real MCP server that validates its JWTs (jose + JWKS): 401 → discovery → Dynamic Client
 * Registration or a pre-registered client → consent → callback → calls through the hub (both eras) →
 * refresh before expiry → the authorization server revokes → `needs_reconnect`, never a retry loop;
 * client_credentials; disconnect revokes (RFC 7009); a new URL drops the grant.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type AuthServer,
  type ProtectedServer,
  SCOPE,
  startAuthServer,
  startProtectedServer,
  tokenDigest,
} from '../fixtures/oauth.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Browser, connectIn, signedIn } from './browser.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

/** Where the authorization server sends the person back; the test delivers it (no browser here). */
const PUBLIC_URL = 'http://127.0.0.1:7';

async function deliver(browser: Browser, callback: URL) {
  expect(callback.origin).toBe(PUBLIC_URL);
  expect(callback.pathname).toBe('/oauth/callback');
  return browser.get(callback.href);
}

/** The operator opens the connect link in their signed-in browser: where it sends them. */
async function open(browser: Browser, link: string): Promise<URL> {
  expect(`${new URL(link).origin}${new URL(link).pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
  const opened = await browser.get(link);
  expect(opened.statusCode).toBe(302);
  return new URL(String(opened.headers.location));
}

function install(gw: TestGateway, id: string, url: string, auth: Json) {
  return gw.request('POST', '/api/mcp/install', {
    body: {
      manifest: {
        id,
        name: id,
        transport: 'streamable-http',
        url,
        privateNetwork: true,
        auth,
        toolPolicy: { allow: ['whoami'] },
      },
    },
  });
}

async function whoami(client: Client, name: string): Promise<Json> {
  return (await client.callTool({ name, arguments: {} })) as Json;
}

describe('upstream OAuth, shared grant', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;
  let base: string;
  let agentToken: string;
  /** The bootstrap admin's browser, signed in to the dashboard with the token that starts the connects. */
  let admin: Browser;
  const clients: Client[] = [];

  beforeAll(async () => {
    as = await startAuthServer({
      clients: [
        {
          client_id: 'pre-registered',
          client_secret: 'pre-registered-secret-0123456789',
          redirect_uris: [`${PUBLIC_URL}/oauth/callback`],
          grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
          response_types: ['code'],
          scope: `openid offline_access ${SCOPE}`,
        },
      ],
    });
    mcp = await startProtectedServer(as.issuer);
  });
  afterAll(async () => {
    await mcp.close();
    await as.close();
  });
  beforeEach(async () => {
    as.setTtl(3600);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    base = await gw.listen();
    agentToken = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'oauth-agent' } })).json()
      .token;
    admin = await signedIn(gw, TEST_ADMIN_TOKEN);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
  });

  /** Installs, connects through consent, and answers the authorization URL it used. */
  async function connectShared(id: string, auth: Json = { type: 'oauth', mode: 'shared' }): Promise<URL> {
    expect((await install(gw, id, mcp.url, auth)).statusCode).toBe(201);
    const started = await gw.request('POST', `/api/mcp/servers/${id}/auth/connect`);
    expect(started.statusCode).toBe(200);
    const authorizationUrl = await open(admin, started.json().authorizationUrl);
    const back = await deliver(admin, await as.consent(authorizationUrl.href));
    expect(back.statusCode).toBe(200);
    expect(back.body).toContain('connected');
    return authorizationUrl;
  }

  it('401 → discovery → DCR → consent → callback: the server connects and agents call it, in both eras', async () => {
    expect((await install(gw, 'docs', mcp.url, { type: 'oauth', mode: 'shared' })).statusCode).toBe(201);
    // Before anyone connects: the handshake says OAuth is the problem, not the protocol.
    const tested = (await gw.request('POST', '/api/mcp/servers/docs/test')).json();
    expect(tested.ok).toBe(false);
    expect(tested.error.code).toBe('auth_required');
    let detail = (await gw.request('GET', '/api/mcp/servers/docs')).json();
    expect(detail.status).toBe('failed');
    expect(detail.lastError).toMatch(/^auth_required: /);
    expect((await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth).toMatchObject({
      mode: 'shared',
      grant: 'authorization_code',
      state: 'not_connected',
    });

    const started = await gw.request('POST', '/api/mcp/servers/docs/auth/connect');
    expect(started.statusCode).toBe(200);
    const url = await open(admin, started.json().authorizationUrl);
    expect(url.origin).toBe(as.issuer);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get('resource')).toBe(mcp.url);
    expect(url.searchParams.get('redirect_uri')).toBe(`${PUBLIC_URL}/oauth/callback`);
    expect(url.searchParams.get('scope')?.split(' ')).toContain(SCOPE);
    const state = url.searchParams.get('state') ?? '';
    expect(state.length).toBeGreaterThanOrEqual(43);
    // A client registered dynamically (no client id configured, no https public URL for CIMD).
    const clientId = url.searchParams.get('client_id') ?? '';
    expect(clientId).not.toBe('');
    expect(await as.provider.Client.find(clientId)).toBeTruthy();

    const callback = await as.consent(url.href);
    expect(callback.searchParams.get('state')).toBe(state);
    const back = await deliver(admin, callback);
    expect(back.statusCode).toBe(200);
    // The state is single use: the same answer again is refused.
    const replay = await deliver(admin, callback);
    expect(replay.statusCode).toBe(400);
    expect(replay.body).toContain('oauth.state_invalid');

    detail = (await gw.request('GET', '/api/mcp/servers/docs')).json();
    expect(detail.status).toBe('connected');
    expect(detail.discoveredTools.map((t: Json) => t.name)).toEqual(['whoami']);
    const status = (await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth;
    expect(status).toMatchObject({ state: 'connected', issuer: as.issuer, refreshable: true });
    expect(status.scopes).toContain(SCOPE);
    expect(Date.parse(status.expiresAt)).toBeGreaterThan(Date.now());

    for (const era of ['modern', 'legacy'] as Era[]) {
      const client = await connectAgent(`${base}/mcp`, agentToken, { era });
      clients.push(client);
      const result = await whoami(client, 'docs__whoami');
      expect(result.isError).toBeFalsy();
      expect(result.content[0].text).toBe('alice');
    }
    // The token reached only the upstream, and nothing Gatehouse answers or logs carries it.
    const used = mcp.seen.at(-1)?.token ?? '';
    expect(used).not.toBe('');
    const grantRow = await gw.gateway.store.db
      .selectFrom('upstream_oauth_grants')
      .selectAll()
      .executeTakeFirstOrThrow();
    expect(grantRow.access_token.startsWith('v2:')).toBe(true); // sealed
    const everything = [
      JSON.stringify((await gw.request('GET', '/api/mcp/servers/docs')).json()),
      JSON.stringify((await gw.request('GET', '/api/mcp/servers/docs/auth')).json()),
      JSON.stringify((await gw.request('GET', '/api/audit?limit=500')).json()),
      gw.logs.join('\n'),
    ].join('\n');
    for (const word of everything.match(/[A-Za-z0-9_.-]{40,}/g) ?? []) expect(tokenDigest(word)).not.toBe(used);

    // The upstream stops accepting the token: the call says the credentials were refused, not missing.
    mcp.refuseAll = true;
    try {
      const client = clients[0] as Client;
      const refused = await whoami(client, 'docs__whoami');
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent.error).toMatchObject({ code: 'auth_failed', reason: 'token_rejected' });
    } finally {
      mcp.refuseAll = false;
    }
    expect((await whoami(clients[0] as Client, 'docs__whoami')).content[0].text).toBe('alice');
  });

  it('a pre-registered client is used as given; refresh before expiry; a revoked grant needs a reconnect, once', async () => {
    as.setTtl(30); // inside the refresh margin: the next use refreshes
    const url = await connectShared('pre', {
      type: 'oauth',
      mode: 'shared',
      clientId: 'pre-registered',
      clientSecret: 'pre-registered-secret-0123456789',
      scopes: [SCOPE],
    });
    expect(url.searchParams.get('client_id')).toBe('pre-registered');
    const view = (await gw.request('GET', '/api/mcp/servers/pre')).json();
    expect(view.auth).toEqual({
      type: 'oauth',
      mode: 'shared',
      grant: 'authorization_code',
      clientId: 'pre-registered',
      clientSecret: { set: true },
      scopes: [SCOPE],
    });
    const client = await connectAgent(`${base}/mcp`, agentToken);
    clients.push(client);
    const refreshesBefore = as.tokenRequests.refresh_token ?? 0;
    const first = mcp.seen.length;
    expect((await whoami(client, 'pre__whoami')).content[0].text).toBe('alice');
    expect(as.tokenRequests.refresh_token ?? 0).toBeGreaterThan(refreshesBefore);
    // The call went out with the refreshed token, not the one the handshake used.
    expect(mcp.seen[first]?.token).not.toBe(mcp.seen[first - 1]?.token);

    // The person revokes Gatehouse at the authorization server: its refresh tokens stop working.
    expect(await as.revokeRefreshTokens()).toBeGreaterThan(0);
    const refreshesAtRevoke = as.tokenRequests.refresh_token ?? 0;
    const refused = await whoami(client, 'pre__whoami');
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent.error.code).toBe('auth_failed');
    expect(as.tokenRequests.refresh_token).toBe(refreshesAtRevoke + 1);
    expect((await gw.request('GET', '/api/mcp/servers/pre/auth')).json().auth.state).toBe('needs_reconnect');
    // Never a loop: later calls do not ask the authorization server again.
    const again = await whoami(client, 'pre__whoami');
    expect(again.structuredContent.error.code).toBe('auth_failed');
    expect(as.tokenRequests.refresh_token).toBe(refreshesAtRevoke + 1);
    // Reconnecting heals it.
    as.setTtl(3600);
    const restarted = await gw.request('POST', '/api/mcp/servers/pre/auth/connect');
    expect((await connectIn(admin, as, restarted.json().authorizationUrl)).statusCode).toBe(200);
    expect((await whoami(client, 'pre__whoami')).content[0].text).toBe('alice');
  });

  it('client_credentials connects without a person; disconnect revokes and forgets; a new URL drops the grant', async () => {
    const installed = await install(gw, 'm2m', mcp.url, {
      type: 'oauth',
      mode: 'shared',
      grant: 'client_credentials',
      clientId: 'pre-registered',
      clientSecret: 'pre-registered-secret-0123456789',
      scopes: [SCOPE],
    });
    expect(installed.statusCode).toBe(201);
    const connected = await gw.request('POST', '/api/mcp/servers/m2m/auth/connect');
    expect(connected.statusCode).toBe(200);
    expect(connected.json().connected).toMatchObject({ state: 'connected', grant: 'client_credentials' });
    expect((await gw.request('GET', '/api/mcp/servers/m2m')).json().status).toBe('connected');
    const client = await connectAgent(`${base}/mcp`, agentToken);
    clients.push(client);
    // A client_credentials token's subject is the client itself.
    expect((await whoami(client, 'm2m__whoami')).content[0].text).toBe('pre-registered');

    const gone = await gw.request('DELETE', '/api/mcp/servers/m2m/auth');
    expect(gone.statusCode).toBe(200);
    expect(gone.json()).toMatchObject({ removed: true });
    expect((await gw.request('GET', '/api/mcp/servers/m2m/auth')).json().auth.state).toBe('not_connected');

    // A grant for the old URL never follows the server to a new one.
    await gw.request('POST', '/api/mcp/servers/m2m/auth/connect');
    expect(await gw.gateway.store.db.selectFrom('upstream_oauth_grants').selectAll().execute()).toHaveLength(1);
    const moved = await gw.request('PATCH', '/api/mcp/servers/m2m/config', {
      body: { url: `${mcp.url}?moved=1` },
    });
    expect(moved.statusCode).toBe(200);
    expect(moved.json().server.auth).toEqual({ type: 'none' });
    expect(await gw.gateway.store.db.selectFrom('upstream_oauth_grants').selectAll().execute()).toHaveLength(0);
  });

  it('refuses bad OAuth settings with a typed 400; a per-user server tested by a token without a user is auth_required', async () => {
    const bad = await install(gw, 'bad', mcp.url, { type: 'oauth', mode: 'per-user', grant: 'client_credentials' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('validation_error');
    const noMode = await install(gw, 'bad2', mcp.url, { type: 'oauth' });
    expect(noMode.statusCode).toBe(400);
    const secretAlone = await install(gw, 'bad3', mcp.url, { type: 'oauth', mode: 'shared', clientSecret: 'x' });
    expect(secretAlone.statusCode).toBe(400);

    expect((await install(gw, 'mine', mcp.url, { type: 'oauth', mode: 'per-user' })).statusCode).toBe(201);
    const before = mcp.seen.length;
    const tested = (await gw.request('POST', '/api/mcp/servers/mine/test')).json();
    expect(tested.error.code).toBe('auth_required');
    expect((await gw.request('GET', '/api/mcp/servers/mine')).json().lastError).toMatch(/^auth_required: /);
    // Connecting a per-user server is a person's own act: the bootstrap admin token has no user.
    const connect = await gw.request('POST', '/api/mcp/servers/mine/auth/connect');
    expect(connect.statusCode).toBe(403);
    expect(connect.json().error.code).toBe('auth.user_required');
    expect((await gw.request('GET', '/api/users/me/grants')).json().error.code).toBe('auth.user_required');
    expect(mcp.seen.length).toBe(before);
    expect(await gw.gateway.store.db.selectFrom('upstream_oauth_grants').selectAll().execute()).toHaveLength(0);
  });
});
