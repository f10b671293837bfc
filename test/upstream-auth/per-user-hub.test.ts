/**
 * `per-user` mode through the hub's `/mcp`, as agents meet it: real SDK clients holding tokens that
 * belong to users (REST `userId`) call one per-user upstream. Each call carries its own user's grant
 * (the fixture reports whose JWT reached it); a user who has not connected gets `auth.connect_required`
 * with a sign-in link of their own; a token that belongs to no user gets `auth.user_required`.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const PUBLIC_URL = 'http://127.0.0.1:7';

describe('upstream OAuth, per-user grants through /mcp', () => {
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
  afterAll(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
    await mcp.close();
    await as.close();
  });

  async function tokenFor(name: string, role: string, userId?: string): Promise<string> {
    const created = await gw.request('POST', '/api/tokens', { body: { role, name, ...(userId && { userId }) } });
    expect(created.statusCode).toBe(201);
    return created.json().token;
  }

  async function user(name: string, role = 'member'): Promise<string> {
    const created = await gw.request('POST', '/api/users', { body: { name, role } });
    expect(created.statusCode).toBe(201);
    return created.json().id;
  }

  /** A person follows a sign-in link as `account`; Gatehouse's callback gets the answer. */
  async function signIn(url: string, account: string): Promise<void> {
    const callback = await as.consent(url, account);
    expect(callback.origin).toBe(PUBLIC_URL);
    const back = await gw.request('GET', `${callback.pathname}${callback.search}`, { token: null });
    expect(back.statusCode).toBe(200);
  }

  async function agent(token: string, era: Era): Promise<Client> {
    const client = await connectAgent(`${base}/mcp`, token, { era });
    clients.push(client);
    return client;
  }

  const whoami = async (client: Client) => (await client.callTool({ name: 'team__whoami', arguments: {} })) as Json;

  it("each user's agent calls with that user's grant; an unconnected user gets their own link; no user is refused", async () => {
    const alice = await user('alice', 'admin');
    const bob = await user('bob');
    const aliceAgent = await tokenFor('alice-agent', 'agent', alice);
    const aliceOps = await tokenFor('alice-ops', 'operator', alice);
    const bobAgent = await tokenFor('bob-agent', 'agent', bob);
    const orphan = await tokenFor('ci-agent', 'agent');

    const installed = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'team',
          name: 'team',
          transport: 'streamable-http',
          url: mcp.url,
          privateNetwork: true,
          auth: { type: 'oauth', mode: 'per-user' },
          toolPolicy: { allow: ['whoami'] },
        },
      },
    });
    expect(installed.statusCode).toBe(201);

    // Alice connects her own account (her agent's token may start it: it acts for her) ...
    const started = await gw.request('POST', '/api/users/me/grants/team/connect', { token: aliceAgent });
    expect(started.statusCode).toBe(200);
    await signIn(started.json().authorizationUrl, 'alice-at-upstream');
    // ... and, as an operator, tests the server with her own grant, so the hub learns its tools.
    const tested = (await gw.request('POST', '/api/mcp/servers/team/test', { token: aliceOps })).json();
    expect(tested.ok).toBe(true);

    for (const era of ['modern', 'legacy'] as Era[]) {
      const a = await agent(aliceAgent, era);
      const b = await agent(bobAgent, era);
      const none = await agent(orphan, era);
      expect((await a.listTools()).tools.map((t) => t.name)).toContain('team__whoami');

      const fromAlice = await whoami(a);
      expect(fromAlice.isError).toBeFalsy();
      expect(fromAlice.content[0].text).toBe('alice-at-upstream');

      // Bob has no grant: his own sign-in link, bound to him, in the tool error; nothing reached the upstream.
      const seen = mcp.seen.length;
      const fromBob = await whoami(b);
      expect(fromBob.isError).toBe(true);
      expect(fromBob.structuredContent.error.code).toBe('auth.connect_required');
      const link = new URL(fromBob.structuredContent.error.connectUrl);
      expect(link.origin).toBe(as.issuer);
      expect(link.searchParams.get('redirect_uri')).toBe(`${PUBLIC_URL}/oauth/callback`);
      expect(fromBob.structuredContent.error.message).toContain(link.href);

      const fromNobody = await whoami(none);
      expect(fromNobody.isError).toBe(true);
      expect(fromNobody.structuredContent.error.code).toBe('auth.user_required');
      expect(fromNobody.structuredContent.error.connectUrl).toBeUndefined();
      expect(mcp.seen.length).toBe(seen);
    }

    // Bob follows the link his agent was given: from then on his calls carry his grant, Alice's hers.
    const b = await agent(bobAgent, 'modern');
    const link = (await whoami(b)).structuredContent.error.connectUrl;
    await signIn(link, 'bob-at-upstream');
    expect((await whoami(b)).content[0].text).toBe('bob-at-upstream');
    const a = await agent(aliceAgent, 'legacy');
    expect((await whoami(a)).content[0].text).toBe('alice-at-upstream');
    const [bobCall, aliceCall] = mcp.seen.slice(-2);
    expect(bobCall?.token).not.toBe(aliceCall?.token);

    // Bob's own list holds his grant alone, and never a token.
    const mine = (await gw.request('GET', '/api/users/me/grants', { token: bobAgent })).json();
    expect(mine.grants.map((g: Json) => [g.serverId, g.subject, g.state])).toEqual([
      ['team', `user:${bob}`, 'connected'],
    ]);
    expect(JSON.stringify(mine)).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./); // never a JWT

    // Bob disconnects: Bob is sent to connect again, Alice is untouched.
    expect((await gw.request('DELETE', '/api/users/me/grants/team', { token: bobAgent })).json().removed).toBe(true);
    expect((await whoami(b)).structuredContent.error.code).toBe('auth.connect_required');
    expect((await whoami(a)).content[0].text).toBe('alice-at-upstream');
  });
});
