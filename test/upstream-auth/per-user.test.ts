/**
 * `per-user` mode: each user's calls use that user's own grant, never another user's and never a
 * shared grant; a user without one gets `auth.connect_required` carrying their own connect link (which
 * only their signed-in browser may open); a token without a user gets `auth.user_required`. Driven
 * through the hub's upstream resolution (the path every hub call takes) against oidc-provider and a
 * jose-validating MCP server.
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatehouseError } from '../../src/errors.js';
import { hashToken, type Principal } from '../../src/identity/index.js';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Browser, connectIn, person, signedIn } from './browser.js';

const PUBLIC_URL = 'http://127.0.0.1:7';

function personAgent(userId: string): Principal {
  return {
    id: `tok_${userId}`,
    name: `${userId}'s agent`,
    role: 'agent',
    groups: ['default'],
    user: { id: userId, name: userId, role: 'member', groups: ['default'] },
  };
}

describe('upstream OAuth, per-user grants', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;
  const people: Record<string, { id: string; browser: Browser }> = {};

  beforeAll(async () => {
    as = await startAuthServer();
    mcp = await startProtectedServer(as.issuer);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    const installed = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'team',
          name: 'team',
          transport: 'streamable-http',
          url: mcp.url,
          privateNetwork: true,
          auth: { type: 'oauth', mode: 'per-user' },
        },
      },
    });
    expect(installed.statusCode).toBe(201);
    for (const name of ['a', 'b']) {
      const { id, token } = await person(gw, `user-${name}`);
      people[name] = { id, browser: await signedIn(gw, token) };
    }
  });
  afterAll(async () => {
    await gw.close();
    await mcp.close();
    await as.close();
  });

  /** Connects user `who` (or, `shared`, the bootstrap admin the shared grant) as `account` upstream. */
  async function connectAs(who: 'shared' | 'a' | 'b', account: string): Promise<void> {
    const admin = who === 'shared' ? await gw.gateway.tokens.activeWithHash(hashToken(TEST_ADMIN_TOKEN)) : undefined;
    const started =
      who === 'shared'
        ? await gw.gateway.upstreamAuth.connect('team', 'shared', {
            by: { id: admin?.id ?? '', name: 'admin', role: 'admin', groups: [] },
          })
        : await gw.gateway.upstreamAuth.connect('team', `user:${people[who]?.id}`);
    if (!('authorizationUrl' in started)) throw new Error('expected an authorization URL');
    const browser = who === 'shared' ? await signedIn(gw, TEST_ADMIN_TOKEN) : (people[who]?.browser as Browser);
    expect((await connectIn(browser, as, started.authorizationUrl, account)).statusCode).toBe(200);
  }

  async function bearerFor(principal: Principal | undefined): Promise<string> {
    const snapshot = await gw.gateway.hub.registry.snapshot();
    const server = snapshot.servers.get('team');
    if (!server) throw new Error('team is not in the hub');
    const upstream = await snapshot.upstreamFor(server, principal);
    const header = upstream?.target.headers?.authorization ?? '';
    return header.replace(/^Bearer /, '');
  }

  async function refusal(principal: Principal | undefined): Promise<GatehouseError> {
    try {
      await bearerFor(principal);
    } catch (error) {
      return error as GatehouseError;
    }
    throw new Error('expected a refusal');
  }

  it("user A's grant is A's alone; B is sent to connect; no user is refused; a shared grant is never a fallback", async () => {
    const usrA = people.a?.id as string;
    const usrB = people.b?.id as string;
    await connectAs('a', 'alice');
    // Even with a shared grant present for the server, a per-user call never uses it.
    await connectAs('shared', 'mallory');

    const a = await bearerFor(personAgent(usrA));
    expect(decodeJwt(a).sub).toBe('alice');
    expect(decodeJwt(a).aud).toBe(mcp.url);

    const b = await refusal(personAgent(usrB));
    expect(b.code).toBe('auth.connect_required');
    const connectUrl = new URL(String(b.details?.connectUrl));
    // Gatehouse's own connect link: it names the flow, never carries its state.
    expect(`${connectUrl.origin}${connectUrl.pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
    expect(connectUrl.searchParams.get('state')).toBeNull();
    expect(b.message).toContain(connectUrl.href);
    expect((await refusal(undefined)).code).toBe('auth.user_required');
    expect((await refusal({ ...personAgent('x'), user: undefined })).code).toBe('auth.user_required');

    // B follows their own link: from now on B's calls carry B's token, A's still A's.
    expect((await connectIn(people.b?.browser as Browser, as, connectUrl.href, 'bob')).statusCode).toBe(200);
    const bToken = await bearerFor(personAgent(usrB));
    expect(decodeJwt(bToken).sub).toBe('bob');
    expect(decodeJwt(await bearerFor(personAgent(usrA))).sub).toBe('alice');

    // Their grants are listed per person, never with a token.
    const mine = await gw.gateway.upstreamAuth.grants.ofSubject(`user:${usrA}`);
    expect(mine).toHaveLength(1);
    expect(JSON.stringify(mine)).not.toContain(a);

    // A disconnects: A is sent to connect again; B is untouched.
    await gw.gateway.upstreamAuth.disconnect('team', `user:${usrA}`);
    expect((await refusal(personAgent(usrA))).code).toBe('auth.connect_required');
    expect(decodeJwt(await bearerFor(personAgent(usrB))).sub).toBe('bob');
  });
});
