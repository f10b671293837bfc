/**
 * The operator's pre-registered client secret goes to one authorization server only. A configured client is
 * bound to `auth.issuer`, else to the issuer it was first used at (pinned then); an upstream whose protected-
 * resource metadata later names another authorization server — one it controls — is refused
 * (`oauth.metadata_refused`) before any request carrying the secret: not by an operator's connect, not by the
 * connect a client_credentials grant starts on its own when an agent calls, not after an edit of `auth` that
 * keeps the client, and not for a grant made before pins existed. Naming `auth.issuer` moves it on purpose.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connectAgent } from '../helpers/agents.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Browser, connectIn, signedIn } from './browser.js';
import {
  MINI_SCOPE,
  type MiniAuthServer,
  type MiniUpstream,
  startMiniAuthServer,
  startMiniUpstream,
} from './mini-oauth.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const PUBLIC_URL = 'http://127.0.0.1:7';
const CLIENT_ID = 'gatehouse-at-tracker';
const SECRET = 'configured-client-secret-0123456789abcdef';

describe('upstream OAuth: the configured client is bound to one issuer', () => {
  let legit: MiniAuthServer;
  /** An authorization server the upstream's operator controls: it accepts any secret, and keeps it. */
  let other: MiniAuthServer;
  let upstream: MiniUpstream;
  let gw: TestGateway;
  let base: string;
  let admin: Browser;
  const clients: Client[] = [];

  beforeAll(async () => {
    legit = await startMiniAuthServer({
      clients: [{ client_id: CLIENT_ID, client_secret: SECRET, redirect_uris: [`${PUBLIC_URL}/oauth/callback`] }],
      expiresIn: 3600,
    });
    other = await startMiniAuthServer({ clients: [{ client_id: CLIENT_ID }], expiresIn: 3600 });
    upstream = await startMiniUpstream(legit);
  });
  afterAll(async () => {
    await upstream.close();
    await other.close();
    await legit.close();
  });
  beforeEach(async () => {
    upstream.authorizationServer = legit;
    legit.tokenRequests.splice(0);
    other.tokenRequests.splice(0);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    base = await gw.listen();
    admin = await signedIn(gw, TEST_ADMIN_TOKEN);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
  });

  function install(id: string, auth: Json) {
    return gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id,
          name: id,
          transport: 'streamable-http',
          url: upstream.url,
          privateNetwork: true,
          auth,
          toolPolicy: { allow: ['whoami'] },
        },
      },
    });
  }

  const connect = (id: string) => gw.request('POST', `/api/mcp/servers/${id}/auth/connect`);
  const pins = () => gw.gateway.store.db.selectFrom('upstream_oauth_pins').selectAll().execute();
  const flowsOf = (id: string) =>
    gw.gateway.store.db.selectFrom('upstream_oauth_flows').selectAll().where('server_id', '=', id).execute();

  function expectRefused(answer: { statusCode: number; json(): Json }) {
    expect(answer.statusCode).toBe(502);
    expect(answer.json().error.code).toBe('oauth.metadata_refused');
    expect(answer.json().error.message).toContain(other.issuer);
    expect(JSON.stringify(answer.json())).not.toContain(SECRET);
  }

  const machine = {
    type: 'oauth',
    mode: 'shared',
    grant: 'client_credentials',
    clientId: CLIENT_ID,
    clientSecret: SECRET,
  };

  it('client_credentials: pinned at first use; an upstream turning to another authorization server never gets the secret', async () => {
    expect((await install('m2m', machine)).statusCode).toBe(201);
    const connected = await connect('m2m');
    expect(connected.statusCode, connected.body).toBe(200);
    const agentToken = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'a' } })).json().token;
    const agent = await connectAgent(`${base}/mcp`, agentToken);
    clients.push(agent);
    expect(((await agent.callTool({ name: 'm2m__whoami', arguments: {} })) as Json).content[0].text).toBe(CLIENT_ID);

    // The upstream's metadata now names an authorization server its operator controls; the grant goes.
    upstream.authorizationServer = other;
    expect((await gw.request('DELETE', '/api/mcp/servers/m2m/auth')).json()).toMatchObject({ removed: true });

    // An agent's call connects on its own (no person involved): refused before the token request.
    const called = (await agent.callTool({ name: 'm2m__whoami', arguments: {} })) as Json;
    expect(called.isError).toBe(true);
    expect(called.structuredContent.error.code).toBe('oauth.metadata_refused');
    // So is an operator's connect, and one after an edit of auth that keeps the client.
    expectRefused(await connect('m2m'));
    const edited = await gw.request('PATCH', '/api/mcp/servers/m2m/config', {
      body: { auth: { ...machine, scopes: [MINI_SCOPE] } },
    });
    expect(edited.statusCode, edited.body).toBe(200);
    expectRefused(await connect('m2m'));
    expect(other.tokenRequests).toEqual([]);
    expect(await pins()).toEqual([
      expect.objectContaining({ server_id: 'm2m', client_id: CLIENT_ID, issuer: legit.issuer }),
    ]);

    // Moving the client is the operator's act: auth.issuer names the new authorization server.
    const moved = await gw.request('PATCH', '/api/mcp/servers/m2m/config', {
      body: { auth: { ...machine, issuer: other.issuer } },
    });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json().server.auth.issuer).toBe(other.issuer);
    expect((await connect('m2m')).statusCode).toBe(200);
    expect(other.tokenRequests).toEqual([{ grantType: 'client_credentials', clientId: CLIENT_ID, secret: SECRET }]);
  });

  it('authorization_code: pinned at the first callback; a later discovery naming another issuer starts no flow', async () => {
    expect(
      (await install('code', { type: 'oauth', mode: 'shared', clientId: CLIENT_ID, clientSecret: SECRET })).statusCode,
    ).toBe(201);
    const started = await connect('code');
    expect(started.statusCode).toBe(200);
    expect((await connectIn(admin, legit, started.json().authorizationUrl)).statusCode).toBe(200);
    expect(legit.tokenRequests).toEqual([{ grantType: 'authorization_code', clientId: CLIENT_ID, secret: SECRET }]);

    upstream.authorizationServer = other;
    expectRefused(await connect('code'));
    expect(await flowsOf('code')).toEqual([]);
    expect(other.tokenRequests).toEqual([]);
    expect(await pins()).toEqual([expect.objectContaining({ server_id: 'code', issuer: legit.issuer })]);
  });

  it('a grant made before pins existed binds its client to its issuer', async () => {
    expect((await install('old', machine)).statusCode).toBe(201);
    expect((await connect('old')).statusCode).toBe(200);
    await gw.gateway.store.db.deleteFrom('upstream_oauth_pins').execute();

    upstream.authorizationServer = other;
    expectRefused(await connect('old'));
    expect(other.tokenRequests).toEqual([]);
  });

  it('auth.issuer refuses another authorization server from the very first connect, whatever the client', async () => {
    upstream.authorizationServer = other;
    const bound = await install('bound', {
      type: 'oauth',
      mode: 'shared',
      clientId: CLIENT_ID,
      clientSecret: SECRET,
      issuer: legit.issuer,
    });
    expect(bound.statusCode, bound.body).toBe(201);
    expect((await gw.request('GET', '/api/mcp/servers/bound')).json().auth).toMatchObject({
      clientId: CLIENT_ID,
      clientSecret: { set: true },
      issuer: legit.issuer,
    });
    expectRefused(await connect('bound'));
    // A dynamically registered client too: nothing is registered at, or asked of, the other server.
    expect((await install('dcr', { type: 'oauth', mode: 'shared', issuer: legit.issuer })).statusCode).toBe(201);
    expectRefused(await connect('dcr'));
    expect(await flowsOf('bound')).toEqual([]);
    expect(await flowsOf('dcr')).toEqual([]);
    expect(other.tokenRequests).toEqual([]);

    for (const issuer of ['not a url', 'ftp://as.example', `${legit.issuer}/?tenant=1`, `${legit.issuer}#x`]) {
      const refused = await install('bad', { type: 'oauth', mode: 'shared', issuer });
      expect(refused.statusCode, issuer).toBe(400);
      expect(refused.json().error.code).toBe('validation_error');
    }

    upstream.authorizationServer = legit;
    const started = await connect('bound');
    expect(started.statusCode).toBe(200);
    expect((await connectIn(admin, legit, started.json().authorizationUrl)).statusCode).toBe(200);
  });
});
