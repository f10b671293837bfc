/**
 * A handshake of a per-user OAuth server by someone who has not connected (`POST /api/mcp/servers/{id}/test`,
 * which the admin tool `mcp_server_test` runs too) answers `auth_required` and starts no flow: its error
 * lands in the record's `lastError`, the server's events and the `server.status` stream, which everyone who
 * reads the record sees, so it must carry no live link anyone could complete with their own upstream
 * account. The hub, whose refusal goes back to the person's own agent only, still hands over their link.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatehouseError } from '../../src/errors.js';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { installPerUser, person } from './browser.js';

const PUBLIC_URL = 'http://127.0.0.1:7';

describe('upstream OAuth, a handshake without a grant', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;

  beforeAll(async () => {
    as = await startAuthServer();
    mcp = await startProtectedServer(as.issuer);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    await installPerUser(gw, 'team', mcp.url);
  });
  afterAll(async () => {
    await gw.close();
    await mcp.close();
    await as.close();
  });

  const flows = () => gw.gateway.store.db.selectFrom('upstream_oauth_flows').selectAll().execute();

  it('starts no flow and writes a fixed message without a link into the record, its events and the stream', async () => {
    const tester = await person(gw, 'olivia', { role: 'operator', tokenRole: 'operator' });
    const published: unknown[] = [];
    const stop = gw.gateway.events.subscribe((event) => published.push(event));
    try {
      const tested = await gw.request('POST', '/api/mcp/servers/team/test', { token: tester.token });
      expect(tested.statusCode).toBe(200);
      expect(tested.json().ok).toBe(false);
      expect(tested.json().error).toEqual({
        code: 'auth_required',
        message: 'connect your account to "team" first (not_connected).',
      });
    } finally {
      stop();
    }
    expect(await flows()).toHaveLength(0);

    const record = (await gw.request('GET', '/api/mcp/servers/team')).json();
    expect(record.lastError).toBe('auth_required: connect your account to "team" first (not_connected).');
    const serverEvents = await gw.gateway.store.db.selectFrom('server_events').selectAll().execute();
    const stream = await gw.gateway.store.db.selectFrom('stream_events').selectAll().execute();
    const everything = JSON.stringify([record, serverEvents, stream, published]);
    expect(everything).toContain('connect your account to \\"team\\" first');
    for (const leak of [as.issuer, '/oauth/connect', 'state=', 'code_challenge', 'open http']) {
      expect(everything).not.toContain(leak);
    }
  });

  it("the hub still hands a person's own agent their connect link (and only then starts a flow)", async () => {
    const { id } = await person(gw, 'paul');
    const snapshot = await gw.gateway.hub.registry.snapshot();
    const server = snapshot.servers.get('team');
    if (!server) throw new Error('team is not in the hub');
    const principal = {
      id: 'tok_paul',
      name: 'paul-agent',
      role: 'agent' as const,
      groups: ['default'],
      user: { id, name: 'paul', role: 'member' as const, groups: ['default'] },
    };
    const refused = (await snapshot.upstreamFor(server, principal).then(
      () => expect.unreachable('a call without a grant went through'),
      (error: GatehouseError) => error,
    )) as GatehouseError;
    expect(refused.code).toBe('auth.connect_required');
    const link = new URL(String(refused.details?.connectUrl));
    expect(`${link.origin}${link.pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
    expect(refused.message).toContain(link.href);
    const started = await flows();
    expect(started.map((f) => f.subject)).toEqual([`user:${id}`]);
    // The record another handshake wrote is untouched by the hub's refusal.
    expect((await gw.request('GET', '/api/mcp/servers/team')).json().lastError).not.toContain('http');
  });
});
