/**
 * `GATEHOUSE_TRUST_PROXY`: behind a balancer every request comes from the balancer's address, so the
 * per-address limits (dashboard sign-in, OAuth endpoints) key on the client the named balancer reports in
 * `X-Forwarded-For` (the right-most address not in the list). From a peer not in the list, or with the
 * setting empty, the header is ignored, so a forged one does not escape a limit. Entries are IP addresses
 * or CIDR ranges; "trust everyone" (`true`, a hop count, a `/0`) and anything else is refused at start.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const SIGN_IN_LIMIT = 120;

/** The message `loadConfig` refuses `env` with ('' when it loads). */
function refusal(env: Record<string, string>, flags: Record<string, unknown> = {}): string {
  try {
    loadConfig({ env: { NODE_ENV: 'test', ...env }, flags });
    return '';
  } catch (error) {
    return (error as Error).message;
  }
}

describe('GATEHOUSE_TRUST_PROXY: the setting', () => {
  it('defaults to no proxy, and reads a comma-separated list of IPv4 and IPv6 addresses and CIDR ranges', () => {
    expect(loadConfig({ env: { NODE_ENV: 'test' } }).trustProxy).toEqual([]);
    const list = ' 10.0.0.11, 10.0.1.0/24 ,fd00::/8, ::1,::ffff:10.0.0.12 , ';
    expect(loadConfig({ env: { NODE_ENV: 'test', GATEHOUSE_TRUST_PROXY: list } }).trustProxy).toEqual([
      '10.0.0.11',
      '10.0.1.0/24',
      'fd00::/8',
      '::1',
      '::ffff:10.0.0.12',
    ]);
    expect(loadConfig({ env: { NODE_ENV: 'test' }, flags: { 'trust-proxy': '192.0.2.1' } }).trustProxy).toEqual([
      '192.0.2.1',
    ]);
  });

  it('refuses an entry that is not an address or range, naming the setting and the entry', () => {
    const message = refusal({ GATEHOUSE_TRUST_PROXY: '10.0.0.11,not-an-ip' });
    expect(message).toContain('GATEHOUSE_TRUST_PROXY: "not-an-ip" is not an IP address or CIDR range');
    expect(message).not.toContain('is not a Gatehouse setting');
    expect(message).not.toContain('10.0.0.11"');
    for (const bad of ['127.1', '10.0.0.0/33', '::/129', '10.0.0.0/8x', '10.0.0.0/', 'localhost', 'loopback']) {
      expect(refusal({ GATEHOUSE_TRUST_PROXY: bad }), bad).toContain(`GATEHOUSE_TRUST_PROXY: "${bad}"`);
    }
    expect(refusal({}, { 'trust-proxy': 'nope' })).toContain('--trust-proxy: "nope" is not an IP address');
  });

  it('refuses trusting every peer: true, a hop count, a /0', () => {
    for (const everyone of ['true', 'TRUE', '1', '2', '*']) {
      const message = refusal({ GATEHOUSE_TRUST_PROXY: everyone });
      expect(message, everyone).toContain(`GATEHOUSE_TRUST_PROXY: "${everyone}" is not accepted`);
      expect(message, everyone).toContain('forge');
    }
    for (const everyone of ['0.0.0.0/0', '::/0']) {
      expect(refusal({ GATEHOUSE_TRUST_PROXY: everyone }), everyone).toContain('would trust every address');
    }
  });
});

describe('GATEHOUSE_TRUST_PROXY: per-address limits behind a balancer', () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  /** One sign-in attempt with a wrong token, from the peer `remoteAddress`, carrying `forwardedFor` if given. */
  const attempt = (remoteAddress: string, forwardedFor?: string, token = 'gh_wrong') =>
    (gw as TestGateway).gateway.app.inject({
      method: 'POST',
      url: '/auth/session',
      remoteAddress,
      headers: {
        'content-type': 'application/json',
        ...(forwardedFor !== undefined ? { 'x-forwarded-for': forwardedFor } : {}),
      },
      payload: JSON.stringify({ token }),
    });

  it('through the named balancer, each client has its own sign-in allowance', async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_TRUST_PROXY: '127.0.0.1, 10.0.0.0/24' });
    for (let i = 0; i < SIGN_IN_LIMIT; i++) {
      // A client may put anything left of what the balancer appended: the right-most untrusted address counts.
      const forwarded = i % 2 === 0 ? '203.0.113.7' : `198.51.100.${i}, 203.0.113.7`;
      expect((await attempt('127.0.0.1', forwarded)).statusCode).toBe(401);
    }
    const held = await attempt('127.0.0.1', '203.0.113.7');
    expect(held.statusCode).toBe(429);
    expect(held.json().error.code).toBe('rate_limited');
    // Another trusted hop in between (10.0.0.5) is skipped: still 203.0.113.7, still refused.
    expect((await attempt('127.0.0.1', '203.0.113.7, 10.0.0.5')).statusCode).toBe(429);
    // The balancer seen on a dual-stack socket (IPv4-mapped) is the same balancer.
    expect((await attempt('::ffff:127.0.0.1', '203.0.113.7')).statusCode).toBe(429);
    // Another client behind the same balancer is not refused, and signs in.
    expect((await attempt('127.0.0.1', '203.0.113.8')).statusCode).toBe(401);
    expect((await attempt('127.0.0.1', '203.0.113.8', TEST_ADMIN_TOKEN)).statusCode).toBe(200);
    // Nor is the balancer's own address (a request without the header).
    expect((await attempt('127.0.0.1')).statusCode).toBe(401);
  });

  it('without the setting, X-Forwarded-For is ignored: a forged one does not escape the limit', async () => {
    gw = await startTestGateway(sqliteTarget);
    for (let i = 0; i < SIGN_IN_LIMIT; i++) {
      expect((await attempt('127.0.0.1', `203.0.113.${i % 200}`)).statusCode).toBe(401);
    }
    const forged = await attempt('127.0.0.1', '198.51.100.99');
    expect(forged.statusCode).toBe(429);
    expect(forged.json().error.code).toBe('rate_limited');
  });

  it('from a peer not in the list, X-Forwarded-For is ignored', async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_TRUST_PROXY: '127.0.0.1' });
    for (let i = 0; i < SIGN_IN_LIMIT; i++) {
      expect((await attempt('192.0.2.50', `203.0.113.${i % 200}`)).statusCode).toBe(401);
    }
    expect((await attempt('192.0.2.50', '198.51.100.99')).statusCode).toBe(429);
    // Naming a trusted proxy in the header does not help either: only the socket's peer is checked.
    expect((await attempt('192.0.2.50', '198.51.100.99, 127.0.0.1')).statusCode).toBe(429);
    // A client behind the balancer is apart from that peer (and that peer, forwarded by it, is itself).
    expect((await attempt('127.0.0.1', '198.51.100.99')).statusCode).toBe(401);
    expect((await attempt('127.0.0.1', '192.0.2.50')).statusCode).toBe(429);
  });

  it('over real HTTP, with loopback as the balancer: OAuth /token is limited per forwarded client', async () => {
    gw = await startTestGateway(sqliteTarget, {
      GATEHOUSE_TRUST_PROXY: '127.0.0.1,::1',
      GATEHOUSE_OAUTH_TOKEN_RATE_LIMIT: '2',
    });
    const base = await gw.listen();
    const token = (client: string) =>
      fetch(`${base}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': client },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'nope' }).toString(),
      });
    for (let i = 0; i < 2; i++) {
      const answer = await token('203.0.113.7');
      expect(answer.status).toBe(400);
      await answer.body?.cancel();
    }
    const held = await token('203.0.113.7');
    expect(held.status).toBe(429);
    expect((await held.json()).error).toBe('temporarily_unavailable');
    const other = await token('2001:db8::7');
    expect(other.status).toBe(400);
    await other.body?.cancel();
  });

  it('X-Forwarded-Host from the trusted balancer does not pass the DNS-rebinding check: the Host header counts', async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_TRUST_PROXY: '127.0.0.1' });
    const mcp = (host: string) =>
      (gw as TestGateway).gateway.app.inject({
        method: 'POST',
        url: '/mcp',
        remoteAddress: '127.0.0.1',
        headers: {
          host,
          'x-forwarded-host': 'localhost',
          'x-forwarded-proto': 'https',
          'x-forwarded-for': '203.0.113.7',
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
    const rebound = await mcp('evil.example');
    expect(rebound.statusCode).toBe(403);
    expect(rebound.body).toContain('DNS-rebinding');
    // The same request with a loopback Host passes the check (and then needs a token).
    expect((await mcp('localhost:8080')).statusCode).toBe(401);
  });
});
