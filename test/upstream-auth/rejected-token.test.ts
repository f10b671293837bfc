/**
 * An upstream's 401 to a grant's token is remembered in the store, not only in memory. The authorization
 * server here issues tokens without `expires_in` (so nothing ever looks "expiring soon") and the upstream asks
 * it about every token, so revoking the access tokens makes the upstream refuse the grant's token while the
 * grant lives on. The call that met the 401 says so (`auth_failed`, `token_rejected`); the next one refreshes
 * once and succeeds — or, with no refresh token, the grant turns `needs_reconnect` and a per-user caller gets
 * their own connect link. Never the same refused token again and again.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAgent } from '../helpers/agents.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { connectIn, person, signedIn } from './browser.js';
import { type MiniAuthServer, type MiniUpstream, startMiniAuthServer, startMiniUpstream } from './mini-oauth.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const PUBLIC_URL = 'http://127.0.0.1:7';

describe('upstream OAuth: a token the upstream refused is not sent again', () => {
  let as: MiniAuthServer;
  let upstream: MiniUpstream;
  let gw: TestGateway;
  let base: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    as = await startMiniAuthServer({ expiresIn: undefined });
    upstream = await startMiniUpstream(as);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    base = await gw.listen();
  });
  afterAll(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
    await upstream.close();
    await as.close();
  });

  function install(id: string, mode: 'shared' | 'per-user') {
    return gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id,
          name: id,
          transport: 'streamable-http',
          url: upstream.url,
          privateNetwork: true,
          auth: { type: 'oauth', mode },
          toolPolicy: { allow: ['whoami'] },
        },
      },
    });
  }

  async function agent(token: string): Promise<Client> {
    const client = await connectAgent(`${base}/mcp`, token);
    clients.push(client);
    return client;
  }

  const call = async (client: Client, tool: string) => (await client.callTool({ name: tool, arguments: {} })) as Json;
  const refreshes = () => as.tokenRequests.filter((r) => r.grantType === 'refresh_token').length;

  it('shared, no expires_in: after the 401 the next call refreshes once and succeeds', async () => {
    as.issueRefreshTokens = true;
    expect((await install('docs', 'shared')).statusCode).toBe(201);
    const started = await gw.request('POST', '/api/mcp/servers/docs/auth/connect');
    expect(started.statusCode).toBe(200);
    const admin = await signedIn(gw, TEST_ADMIN_TOKEN);
    expect((await connectIn(admin, as, started.json().authorizationUrl)).statusCode).toBe(200);
    const status = (await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth;
    expect(status).toMatchObject({ state: 'connected', expiresAt: null, refreshable: true });

    const token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'docs-agent' } })).json()
      .token;
    const client = await agent(token);
    expect((await call(client, 'docs__whoami')).content[0].text).toBe('alice');

    // The authorization server withdraws the access token (the refresh token stays good).
    expect(as.revokeAccessTokens()).toBeGreaterThan(0);
    const refused = await call(client, 'docs__whoami');
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent.error).toMatchObject({ code: 'auth_failed', reason: 'token_rejected' });
    expect(refreshes()).toBe(0);

    const healed = await call(client, 'docs__whoami');
    expect(healed.isError, JSON.stringify(healed)).toBeFalsy();
    expect(healed.content[0].text).toBe('alice');
    expect(refreshes()).toBe(1);
    // The fresh token is used as long as the upstream takes it: no further refresh.
    expect((await call(client, 'docs__whoami')).content[0].text).toBe('alice');
    expect(refreshes()).toBe(1);
    expect((await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth.state).toBe('connected');
  });

  it('per-user, no refresh token: after the 401 the caller gets their reconnect link and the grant reads needs_reconnect', async () => {
    as.issueRefreshTokens = false;
    expect((await install('team', 'per-user')).statusCode).toBe(201);
    const carol = await person(gw, 'carol', { role: 'admin', tokenRole: 'operator' });
    const carolAgent = (
      await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'carol-agent', userId: carol.id } })
    ).json().token as string;
    const browser = await signedIn(gw, carol.token);
    const started = await gw.request('POST', '/api/users/me/grants/team/connect', { token: carolAgent });
    expect(started.statusCode, started.body).toBe(200);
    expect((await connectIn(browser, as, started.json().authorizationUrl, 'carol-upstream')).statusCode).toBe(200);
    // Tested with her own grant, so the hub learns the server's tools.
    expect((await gw.request('POST', '/api/mcp/servers/team/test', { token: carol.token })).json().ok).toBe(true);

    const client = await agent(carolAgent);
    expect((await call(client, 'team__whoami')).content[0].text).toBe('carol-upstream');
    const mine = async () =>
      (await gw.request('GET', '/api/users/me/grants', { token: carolAgent })).json().grants as Json[];
    expect(await mine()).toMatchObject([{ serverId: 'team', state: 'connected', refreshable: false }]);

    as.revokeAccessTokens();
    const refused = await call(client, 'team__whoami');
    expect(refused.structuredContent.error).toMatchObject({ code: 'auth_failed', reason: 'token_rejected' });
    const before = upstream.calls.length;

    const reconnect = await call(client, 'team__whoami');
    expect(reconnect.isError).toBe(true);
    expect(reconnect.structuredContent.error).toMatchObject({
      code: 'auth.connect_required',
      reason: 'needs_reconnect',
    });
    const link = new URL(reconnect.structuredContent.error.connectUrl);
    expect(`${link.origin}${link.pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
    expect(await mine()).toMatchObject([{ serverId: 'team', state: 'needs_reconnect' }]);
    expect(upstream.calls.length).toBe(before);

    // Her link, opened in her browser, heals it.
    expect((await connectIn(browser, as, link.href, 'carol-upstream')).statusCode).toBe(200);
    expect((await call(client, 'team__whoami')).content[0].text).toBe('carol-upstream');
  });
});
