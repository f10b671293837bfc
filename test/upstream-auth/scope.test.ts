/**
 * An upstream that answers 403 `WWW-Authenticate: Bearer error="insufficient_scope", scope="…"` to a
 * grant's token: the grant is marked for reconnect with the union of the scopes it holds and the ones
 * asked for, no call is retried on its own, and the next connect asks for the wider scope — shared
 * (an operator reconnects) and per-user (the caller gets their own link asking for it). Against
 * oidc-provider and the JWT-checking fixture, on the direct call path and on the SDK's (progress).
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type AuthServer,
  type ProtectedServer,
  SCOPE,
  startAuthServer,
  startProtectedServer,
  WIDER_SCOPE,
} from '../fixtures/oauth.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Browser, connectIn, signedIn } from './browser.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const PUBLIC_URL = 'http://127.0.0.1:7';

describe('upstream OAuth, 403 insufficient_scope', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;
  let base: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    as = await startAuthServer();
    mcp = await startProtectedServer(as.issuer);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    base = await gw.listen();
  });
  afterEach(() => {
    mcp.requireScope = undefined;
  });
  afterAll(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
    await mcp.close();
    await as.close();
  });

  async function install(id: string, mode: 'shared' | 'per-user'): Promise<void> {
    const installed = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id,
          name: id,
          transport: 'streamable-http',
          url: mcp.url,
          privateNetwork: true,
          auth: { type: 'oauth', mode },
          toolPolicy: { allow: ['whoami'] },
        },
      },
    });
    expect(installed.statusCode).toBe(201);
  }

  /** The person opens the connect link in their signed-in browser (default: the bootstrap admin's). */
  async function signIn(url: string, account = 'alice', browser?: Browser): Promise<void> {
    const by = browser ?? (await signedIn(gw, TEST_ADMIN_TOKEN));
    expect((await connectIn(by, as, url, account)).statusCode).toBe(200);
  }

  /** The authorization server URL a connect link sends its opener's browser to. */
  async function authorizationUrlOf(link: string, browser?: Browser): Promise<string> {
    const opened = await (browser ?? (await signedIn(gw, TEST_ADMIN_TOKEN))).get(link);
    expect(opened.statusCode).toBe(302);
    return String(opened.headers.location);
  }

  async function agent(token: string, era: Era = 'modern'): Promise<Client> {
    const client = await connectAgent(`${base}/mcp`, token, { era });
    clients.push(client);
    return client;
  }

  /** A call on the direct path, or (`viaSdk`: with progress, which only the SDK path relays) on the SDK's. */
  async function whoami(client: Client, name: string, viaSdk = false): Promise<Json> {
    return (await client.callTool({ name, arguments: {} }, viaSdk ? { onprogress: () => {} } : undefined)) as Json;
  }

  const scopesOf = (url: string) => new URL(url).searchParams.get('scope')?.split(' ') ?? [];

  it('shared: the grant needs a reconnect with the union of scopes; the next connect asks for it; no retry loop', async () => {
    await install('docs', 'shared');
    const first = (await gw.request('POST', '/api/mcp/servers/docs/auth/connect')).json().authorizationUrl;
    expect(scopesOf(await authorizationUrlOf(first))).not.toContain(WIDER_SCOPE);
    await signIn(first);
    const token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'a' } })).json().token;

    for (const [era, viaSdk] of [
      ['modern', false],
      ['legacy', true],
    ] as const) {
      const client = await agent(token, era);
      expect((await whoami(client, 'docs__whoami', viaSdk)).content[0].text).toBe('alice');

      // The upstream now requires more than the grant holds.
      mcp.requireScope = WIDER_SCOPE;
      const refused = await whoami(client, 'docs__whoami', viaSdk);
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent.error).toMatchObject({ code: 'auth_failed', reason: 'insufficient_scope' });
      expect(refused.structuredContent.error.message).toContain(WIDER_SCOPE);
      const status = (await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth;
      expect(status.state).toBe('needs_reconnect');
      expect(status.scopes).not.toContain(WIDER_SCOPE);
      expect(status.wantedScopes).toEqual(expect.arrayContaining([SCOPE, WIDER_SCOPE]));

      // Later calls wait for a person: nothing more reaches the authorization server or the upstream.
      const tokenRequests = JSON.stringify(as.tokenRequests);
      const seen = mcp.seen.length;
      const again = await whoami(client, 'docs__whoami', viaSdk);
      expect(again.structuredContent.error.reason).toBe('insufficient_scope');
      expect(JSON.stringify(as.tokenRequests)).toBe(tokenRequests);
      expect(mcp.seen.length).toBe(seen);

      // The next connect asks for the wider scope; consent to it heals the grant.
      const wider = (await gw.request('POST', '/api/mcp/servers/docs/auth/connect')).json().authorizationUrl;
      expect(scopesOf(await authorizationUrlOf(wider))).toEqual(expect.arrayContaining([SCOPE, WIDER_SCOPE]));
      await signIn(wider);
      const healed = (await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth;
      expect(healed).toMatchObject({ state: 'connected', wantedScopes: [] });
      expect(healed.scopes).toContain(WIDER_SCOPE);
      expect((await whoami(client, 'docs__whoami', viaSdk)).content[0].text).toBe('alice');

      // Back to a grant without the wider scope for the other path's round.
      mcp.requireScope = undefined;
      await gw.request('DELETE', '/api/mcp/servers/docs/auth');
      await signIn((await gw.request('POST', '/api/mcp/servers/docs/auth/connect')).json().authorizationUrl);
    }
  });

  it('per-user: the caller gets their own link asking for the wider scope', async () => {
    await install('team', 'per-user');
    const carol = (await gw.request('POST', '/api/users', { body: { name: 'carol', role: 'operator' } })).json().id;
    const token = (
      await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'c', userId: carol } })
    ).json().token;
    const browser = await signedIn(gw, token);
    await signIn(
      (await gw.request('POST', '/api/users/me/grants/team/connect', { token })).json().authorizationUrl,
      'carol',
      browser,
    );
    const ops = (
      await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'co', userId: carol } })
    ).json().token;
    expect((await gw.request('POST', '/api/mcp/servers/team/test', { token: ops })).json().ok).toBe(true);

    const client = await agent(token);
    expect((await whoami(client, 'team__whoami')).content[0].text).toBe('carol');
    mcp.requireScope = WIDER_SCOPE;
    for (let round = 0; round < 2; round++) {
      // The 403 itself, then the grant waiting for a reconnect: both hand carol her link for the wider scope.
      const refused = await whoami(client, 'team__whoami');
      expect(refused.structuredContent.error).toMatchObject({
        code: 'auth.connect_required',
        reason: 'needs_reconnect',
      });
      expect(scopesOf(await authorizationUrlOf(refused.structuredContent.error.connectUrl, browser))).toEqual(
        expect.arrayContaining([SCOPE, WIDER_SCOPE]),
      );
    }
    const link = (await whoami(client, 'team__whoami')).structuredContent.error.connectUrl;
    await signIn(link, 'carol', browser);
    expect((await whoami(client, 'team__whoami')).content[0].text).toBe('carol');
    const mine = (await gw.request('GET', '/api/users/me/grants', { token })).json().grants;
    expect(mine[0]).toMatchObject({ serverId: 'team', state: 'connected', wantedScopes: [] });
    expect(mine[0].scopes).toContain(WIDER_SCOPE);
  });
});
