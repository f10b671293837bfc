/**
 * Two replicas on one PostgreSQL store: a grant connected through one replica is used by the other;
 * user A's grant is never used for user B on either; and when both replicas need the same expiring
 * grant at once, exactly one refresh reaches the authorization server (the store's advisory lock),
 * which matters because the provider rotates refresh tokens (a second refresh would be refused).
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatehouseError } from '../../src/errors.js';
import { hashToken, type Principal } from '../../src/identity/index.js';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';
import { type Browser, connectIn, person as newPerson, signedIn } from './browser.js';

const PUBLIC_URL = 'http://127.0.0.1:7';

const person = (userId: string): Principal => ({
  id: `tok_${userId}`,
  name: userId,
  role: 'agent',
  groups: ['default'],
  user: { id: userId, name: userId, role: 'member', groups: ['default'] },
});

describe.skipIf(!POSTGRES_AVAILABLE)('upstream OAuth across two replicas [postgres]', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let place: Awaited<ReturnType<typeof postgresTarget.fresh>>;
  let one: TestGateway;
  let two: TestGateway;
  const users: Record<string, { id: string; browser: Browser }> = {};

  beforeAll(async () => {
    as = await startAuthServer();
    mcp = await startProtectedServer(as.issuer);
    place = await postgresTarget.fresh();
    one = await startTestGateway(postgresTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL }, {}, place);
    two = await startTestGateway(postgresTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL }, {}, place);
    for (const [id, mode] of [
      ['team', 'per-user'],
      ['shared', 'shared'],
    ] as const) {
      const installed = await one.request('POST', '/api/mcp/install', {
        body: {
          manifest: {
            id,
            name: id,
            transport: 'streamable-http',
            url: mcp.url,
            privateNetwork: true,
            auth: { type: 'oauth', mode },
          },
        },
      });
      expect(installed.statusCode).toBe(201);
    }
    for (const name of ['a', 'b']) {
      const { id, token } = await newPerson(one, `user-${name}`);
      users[name] = { id, browser: await signedIn(one, token) };
    }
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
    await place?.cleanup();
    await mcp?.close();
    await as?.close();
  });

  /** Connects user `who` (or, `shared`, the bootstrap admin the shared grant) through `gw`, in their browser. */
  async function connect(gw: TestGateway, id: string, who: 'shared' | 'a', account: string) {
    const admin = await gw.gateway.tokens.activeWithHash(hashToken(TEST_ADMIN_TOKEN));
    const started =
      who === 'shared'
        ? await gw.gateway.upstreamAuth.connect(id, 'shared', {
            by: { id: admin?.id ?? '', name: 'admin', role: 'admin', groups: [] },
          })
        : await gw.gateway.upstreamAuth.connect(id, `user:${users[who]?.id}`);
    if (!('authorizationUrl' in started)) throw new Error('expected an authorization URL');
    const browser = who === 'shared' ? await signedIn(gw, TEST_ADMIN_TOKEN) : (users[who]?.browser as Browser);
    expect((await connectIn(browser, as, started.authorizationUrl, account)).statusCode).toBe(200);
  }

  async function bearer(gw: TestGateway, id: string, principal: Principal | undefined): Promise<string> {
    const snapshot = await gw.gateway.hub.registry.snapshot();
    const server = snapshot.servers.get(id);
    if (!server) throw new Error(`${id} is not in the hub`);
    const upstream = await snapshot.upstreamFor(server, principal);
    return (upstream?.target.headers?.authorization ?? '').replace(/^Bearer /, '');
  }

  it("A's grant, connected on one replica, serves A on the other and never B", async () => {
    await connect(one, 'team', 'a', 'alice');
    expect(decodeJwt(await bearer(two, 'team', person(users.a?.id as string))).sub).toBe('alice');
    const refused = await bearer(two, 'team', person(users.b?.id as string)).then(
      () => undefined,
      (error: GatehouseError) => error,
    );
    expect(refused?.code).toBe('auth.connect_required');
  });

  it('both replicas need an expiring grant at once: one refresh reaches the authorization server', async () => {
    as.setTtl(30); // inside the refresh margin: every use wants a refresh until a longer token arrives
    await connect(one, 'shared', 'shared', 'carol');
    as.setTtl(3600);
    const before = as.tokenRequests.refresh_token ?? 0;
    const [a, b] = await Promise.all([bearer(one, 'shared', undefined), bearer(two, 'shared', undefined)]);
    expect(as.tokenRequests.refresh_token).toBe(before + 1);
    expect(a).toBe(b);
    expect(decodeJwt(a).sub).toBe('carol');
    expect((await one.request('GET', '/api/mcp/servers/shared/auth')).json().auth.state).toBe('connected');
  });
});
