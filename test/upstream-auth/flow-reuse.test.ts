/**
 * A person without a grant who calls again (an agent retrying, a list fanning out over every per-user server)
 * is handed the connect link of their flow under way: no new discovery against the upstream, no new flow row.
 * The link keeps its binding — it opens only in that person's signed-in browser — and a connect asking for
 * more (a wider scope) starts a flow of its own.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAgent } from '../helpers/agents.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { connectIn, installPerUser, person, signedIn } from './browser.js';
import { type MiniAuthServer, type MiniUpstream, startMiniAuthServer, startMiniUpstream } from './mini-oauth.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const PUBLIC_URL = 'http://127.0.0.1:7';

describe('upstream OAuth: one pending flow per person, server and scopes', () => {
  let as: MiniAuthServer;
  let upstream: MiniUpstream;
  let gw: TestGateway;
  let base: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    as = await startMiniAuthServer({ expiresIn: 3600 });
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

  async function agentToken(userId: string, name: string): Promise<string> {
    const created = await gw.request('POST', '/api/tokens', { body: { role: 'agent', name, userId } });
    expect(created.statusCode).toBe(201);
    return created.json().token;
  }

  const flowsOf = (subject: string) =>
    gw.gateway.store.db.selectFrom('upstream_oauth_flows').selectAll().where('subject', '=', subject).execute();

  it('hands back the flow under way; its link opens only in its person’s browser', async () => {
    await installPerUser(gw, 'team', upstream.url, { toolPolicy: { allow: ['whoami'] } });
    // Alice connects and tests the server with her grant, so the hub knows its tools.
    const alice = await person(gw, 'alice', { role: 'admin', tokenRole: 'operator' });
    const aliceAgent = await agentToken(alice.id, 'alice-agent');
    const aliceBrowser = await signedIn(gw, alice.token);
    const own = await gw.request('POST', '/api/users/me/grants/team/connect', { token: aliceAgent });
    expect((await connectIn(aliceBrowser, as, own.json().authorizationUrl, 'alice-up')).statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/team/test', { token: alice.token })).json().ok).toBe(true);

    const bob = await person(gw, 'bob', { groups: ['default'] });
    const client = await connectAgent(`${base}/mcp`, bob.token);
    clients.push(client);
    const call = async () => (await client.callTool({ name: 'team__whoami', arguments: {} })) as Json;

    const first = (await call()).structuredContent.error;
    expect(first.code).toBe('auth.connect_required');
    const probes = upstream.unauthorized;
    const second = (await call()).structuredContent.error;
    const third = (await call()).structuredContent.error;
    expect(second.connectUrl).toBe(first.connectUrl);
    expect(third.connectUrl).toBe(first.connectUrl);
    // The person's own connect asks for the same thing: the same link.
    const asked = await gw.request('POST', '/api/users/me/grants/team/connect', { token: bob.token });
    expect(asked.json().authorizationUrl).toBe(first.connectUrl);
    expect(await flowsOf(`user:${bob.id}`)).toHaveLength(1);
    expect(upstream.unauthorized).toBe(probes); // no discovery ran again

    // Asking for a wider scope is another flow, with a link of its own.
    const wider = await gw.request('POST', '/api/users/me/grants/team/connect', {
      token: bob.token,
      body: { scopes: ['mcp:admin'] },
    });
    expect(wider.statusCode, wider.body).toBe(200);
    expect(wider.json().authorizationUrl).not.toBe(first.connectUrl);
    expect(await flowsOf(`user:${bob.id}`)).toHaveLength(2);

    // The handed-back link is still Bob's alone: Alice's browser is refused, Bob's completes it.
    const refused = await aliceBrowser.get(first.connectUrl);
    expect(refused.statusCode).toBe(403);
    const bobBrowser = await signedIn(gw, bob.token);
    expect((await connectIn(bobBrowser, as, first.connectUrl, 'bob-up')).statusCode).toBe(200);
    expect(((await call()) as Json).content[0].text).toBe('bob-up');
  });
});
