/**
 * `per-user` mode through the hub's `/mcp`, as agents meet it: real SDK clients holding tokens that
 * belong to users (REST `userId`) call one per-user upstream. Each call carries its own user's grant
 * (the fixture reports whose JWT reached it); a user who has not connected gets `auth.connect_required`
 * with a connect link of their own (Gatehouse's page, which their signed-in browser opens); a token that
 * belongs to no user gets `auth.user_required`. An agent
 * that declared URL-mode elicitation is sent the link as one (2026-07-28: an input_required round whose
 * retry runs the call once the person signed in; 2025: the -32042 URL-elicitation-required error).
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Browser, connectIn, signedIn } from './browser.js';

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

  /** A person follows their connect link in their own signed-in browser as `account` upstream. */
  async function signIn(browser: Browser, url: string, account: string): Promise<void> {
    expect(`${new URL(url).origin}${new URL(url).pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
    expect((await connectIn(browser, as, url, account)).statusCode).toBe(200);
  }

  async function agent(token: string, era: Era, options: Parameters<typeof connectAgent>[2] = {}): Promise<Client> {
    const client = await connectAgent(`${base}/mcp`, token, { era, ...options });
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
    await signIn(await signedIn(gw, aliceOps), started.json().authorizationUrl, 'alice-at-upstream');
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
      expect(`${link.origin}${link.pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
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
    await signIn(await signedIn(gw, bobAgent), link, 'bob-at-upstream');
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

  // Runs after the test above, on its installed per-user server `team` (its tools are known to the hub).
  it('sends a person to connect as a URL-mode elicitation to agents that declared it, in both eras', async () => {
    const carol = await user('carol');
    const carolAgent = await tokenFor('carol-agent', 'agent', carol);
    const browser = await signedIn(gw, carolAgent);
    const urlCapable = { capabilities: { elicitation: { url: {} } } };

    // 2026-07-28: an input_required round with the link; the agent's person signs in, answers accept, the
    // SDK client retries the round, and the very call now runs with Carol's new grant.
    const opened: string[] = [];
    const modern = await agent(carolAgent, 'modern', {
      client: urlCapable,
      prepare: (client) =>
        client.setRequestHandler('elicitation/create', async (request) => {
          const params = request.params as { mode?: string; url?: string; message?: string };
          expect(params.mode).toBe('url');
          expect(params.message).toContain('"team"');
          opened.push(params.url as string);
          await signIn(browser, params.url as string, 'carol-at-upstream');
          return { action: 'accept' };
        }),
    });
    const seen = mcp.seen.length;
    const called = await whoami(modern);
    expect(called.isError).toBeFalsy();
    expect(called.content[0].text).toBe('carol-at-upstream');
    expect(opened).toHaveLength(1);
    const link = new URL(opened[0] as string);
    expect(`${link.origin}${link.pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
    expect(mcp.seen.length).toBe(seen + 1); // the first round never reached the upstream

    // A person who declines is not asked again in a loop: the agent gets the tool error with the link.
    expect((await gw.request('DELETE', '/api/users/me/grants/team', { token: carolAgent })).statusCode).toBe(200);
    let asked = 0;
    const declining = await agent(carolAgent, 'modern', {
      client: urlCapable,
      prepare: (client) =>
        client.setRequestHandler('elicitation/create', async () => {
          asked++;
          return { action: 'decline' };
        }),
    });
    const declined = await whoami(declining);
    expect(asked).toBe(1);
    expect(declined.isError).toBe(true);
    expect(declined.structuredContent.error.code).toBe('auth.connect_required');
    expect(declined.structuredContent.error.connectUrl).toMatch(/^http/);

    // 2025: the URL-elicitation-required error (-32042) carries the link; after signing in, the call runs.
    const legacy = await agent(carolAgent, 'legacy', { client: urlCapable });
    const refused = (await whoami(legacy).catch((error: unknown) => error)) as {
      code?: number;
      data?: { elicitations?: { mode: string; url: string; elicitationId: string }[] };
    };
    expect(refused.code).toBe(-32042);
    const [elicitation] = refused.data?.elicitations ?? [];
    expect(elicitation?.mode).toBe('url');
    expect(elicitation?.elicitationId).toBeTruthy();
    expect(new URL(elicitation?.url as string).origin).toBe(PUBLIC_URL);
    await signIn(browser, elicitation?.url as string, 'carol-again');
    expect((await whoami(legacy)).content[0].text).toBe('carol-again');

    // An agent that did not declare URL elicitation still gets the tool error carrying the link.
    expect((await gw.request('DELETE', '/api/users/me/grants/team', { token: carolAgent })).statusCode).toBe(200);
    const plain = await whoami(await agent(carolAgent, 'modern'));
    expect(plain.structuredContent.error.code).toBe('auth.connect_required');
    expect(plain.structuredContent.error.connectUrl).toMatch(/^http/);
  });
});
