/**
 * `per-user` mode: each user's calls use that user's own grant, never another user's and never a
 * shared grant; a user without one gets `auth.connect_required` carrying their own sign-in URL; a
 * token without a user gets `auth.user_required`. Driven through the hub's upstream resolution (the
 * path every hub call takes) against oidc-provider and a jose-validating MCP server.
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatehouseError } from '../../src/errors.js';
import type { Principal } from '../../src/identity/index.js';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

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
  });
  afterAll(async () => {
    await gw.close();
    await mcp.close();
    await as.close();
  });

  async function connectAs(subject: 'shared' | `user:${string}`, account: string): Promise<void> {
    const started = await gw.gateway.upstreamAuth.connect('team', subject);
    if (!('authorizationUrl' in started)) throw new Error('expected an authorization URL');
    const callback = await as.consent(started.authorizationUrl, account);
    const back = await gw.request('GET', `${callback.pathname}${callback.search}`, { token: null });
    expect(back.statusCode).toBe(200);
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
    await connectAs('user:usr_a', 'alice');
    // Even with a shared grant present for the server, a per-user call never uses it.
    await connectAs('shared', 'mallory');

    const a = await bearerFor(personAgent('usr_a'));
    expect(decodeJwt(a).sub).toBe('alice');
    expect(decodeJwt(a).aud).toBe(mcp.url);

    const b = await refusal(personAgent('usr_b'));
    expect(b.code).toBe('auth.connect_required');
    const connectUrl = new URL(String(b.details?.connectUrl));
    expect(connectUrl.origin).toBe(as.issuer);
    expect(b.message).toContain(connectUrl.href);
    expect((await refusal(undefined)).code).toBe('auth.user_required');
    expect((await refusal({ ...personAgent('x'), user: undefined })).code).toBe('auth.user_required');

    // B follows their own link: from now on B's calls carry B's token, A's still A's.
    const callback = await as.consent(connectUrl.href, 'bob');
    expect((await gw.request('GET', `${callback.pathname}${callback.search}`, { token: null })).statusCode).toBe(200);
    const bToken = await bearerFor(personAgent('usr_b'));
    expect(decodeJwt(bToken).sub).toBe('bob');
    expect(decodeJwt(await bearerFor(personAgent('usr_a'))).sub).toBe('alice');

    // Their grants are listed per person, never with a token.
    const mine = await gw.gateway.upstreamAuth.grants.ofSubject('user:usr_a');
    expect(mine).toHaveLength(1);
    expect(JSON.stringify(mine)).not.toContain(a);

    // A disconnects: A is sent to connect again; B is untouched.
    await gw.gateway.upstreamAuth.disconnect('team', 'user:usr_a');
    expect((await refusal(personAgent('usr_a'))).code).toBe('auth.connect_required');
    expect(decodeJwt(await bearerFor(personAgent('usr_b'))).sub).toBe('bob');
  });
});
