/**
 * CORS for browser-based MCP clients: the OAuth discovery documents, JWKS, /register, /token and
 * /revoke answer any origin (preflight included); the MCP endpoints answer only the origins they admit
 * (GATEHOUSE_ALLOWED_ORIGINS, or loopback pages on a loopback bind), expose Mcp-Session-Id,
 * WWW-Authenticate and MCP-Protocol-Version, and carry the grant on their 401 so a page can read the
 * challenge; the cookie-authenticated /api routes never answer a foreign origin. Preflights over
 * Fastify inject; the MCP transport's own answer (written past Fastify) over real loopback HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const APP = 'https://app.example';
const STRANGER = 'https://evil.example';
const ALLOW_HEADERS = [
  'authorization',
  'content-type',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'traceparent',
];
const EXPOSED = ['mcp-session-id', 'www-authenticate', 'mcp-protocol-version'];

const list = (value: unknown) =>
  String(value ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);

describe('CORS for browser-based MCP clients', () => {
  let gw: TestGateway;
  let agent: string;

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_ALLOWED_ORIGINS: APP });
    agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'browser-agent' } })).json().token;
  });
  afterAll(async () => {
    await gw.close();
  });

  const preflight = (url: string, origin: string, method = 'POST') =>
    gw.gateway.app.inject({
      method: 'OPTIONS',
      url,
      headers: {
        origin,
        'access-control-request-method': method,
        'access-control-request-headers': 'authorization, content-type, mcp-protocol-version',
      },
    });

  it.each([
    ['/.well-known/oauth-authorization-server', 'GET'],
    ['/.well-known/openid-configuration', 'GET'],
    ['/.well-known/oauth-protected-resource', 'GET'],
    ['/.well-known/oauth-protected-resource/mcp/s/files', 'GET'],
    ['/oauth/jwks', 'GET'],
    ['/register', 'POST'],
    ['/token', 'POST'],
    ['/revoke', 'POST'],
  ])('answers the preflight of %s from any origin', async (url, method) => {
    const answer = await preflight(url, STRANGER, method);
    expect(answer.statusCode).toBe(204);
    expect(answer.headers['access-control-allow-origin']).toBe('*');
    expect(list(answer.headers['access-control-allow-methods'])).toEqual([method.toLowerCase()]);
    expect(list(answer.headers['access-control-allow-headers'])).toEqual(expect.arrayContaining(ALLOW_HEADERS));
    expect(answer.headers['access-control-allow-credentials']).toBeUndefined();
  });

  it('lets a page read the discovery documents and the answers of /register and /token, errors included', async () => {
    const metadata = await gw.request('GET', '/.well-known/oauth-protected-resource/mcp', {
      token: null,
      headers: { origin: STRANGER },
    });
    expect(metadata.statusCode).toBe(200);
    expect(metadata.headers['access-control-allow-origin']).toBe('*');
    const registered = await gw.request('POST', '/register', {
      token: null,
      headers: { origin: STRANGER },
      body: { client_name: 'Browser client', redirect_uris: ['https://app.example/cb'] },
    });
    expect(registered.statusCode).toBe(201);
    expect(registered.headers['access-control-allow-origin']).toBe('*');
    const refused = await gw.gateway.app.inject({
      method: 'POST',
      url: '/token',
      headers: { origin: STRANGER, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'grant_type=authorization_code&code=nope',
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('invalid_request');
    expect(refused.headers['access-control-allow-origin']).toBe('*');
  });

  it.each(['/mcp', '/mcp/s/files', '/mcp/admin', '/mcp/memory'])(
    'answers the preflight of %s for an admitted origin only, naming it',
    async (url) => {
      const answer = await preflight(url, APP);
      expect(answer.statusCode).toBe(204);
      expect(answer.headers['access-control-allow-origin']).toBe(APP);
      expect(list(answer.headers.vary)).toContain('origin');
      expect(list(answer.headers['access-control-allow-methods'])).toEqual(['get', 'post', 'delete']);
      expect(list(answer.headers['access-control-allow-headers'])).toEqual(expect.arrayContaining(ALLOW_HEADERS));
      expect(list(answer.headers['access-control-expose-headers'])).toEqual(expect.arrayContaining(EXPOSED));

      const stranger = await preflight(url, STRANGER);
      expect(stranger.headers['access-control-allow-origin']).toBeUndefined();
      expect(stranger.headers['access-control-allow-methods']).toBeUndefined();
    },
  );

  it("puts the grant on /mcp's 401 so the page can read WWW-Authenticate, with and without a body", async () => {
    const bare = await gw.gateway.app.inject({ method: 'GET', url: '/mcp', headers: { origin: APP } });
    const stale = await gw.gateway.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { origin: APP, authorization: 'Bearer expired-or-unknown', 'content-type': 'application/json' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    for (const answer of [bare, stale]) {
      expect(answer.statusCode).toBe(401);
      expect(answer.headers['www-authenticate']).toMatch(/resource_metadata=/);
      expect(answer.headers['access-control-allow-origin']).toBe(APP);
      expect(list(answer.headers['access-control-expose-headers'])).toContain('www-authenticate');
    }
  });

  it('refuses an unlisted origin on /mcp without granting it anything', async () => {
    const answer = await gw.gateway.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { origin: STRANGER, authorization: `Bearer ${agent}`, 'content-type': 'application/json' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    expect(answer.statusCode).toBe(403);
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('never answers a foreign origin on the cookie-authenticated /api routes or the dashboard', async () => {
    for (const url of ['/api/users/me', '/api/tokens', '/api/signin/token', '/']) {
      const pre = await preflight(url, APP);
      expect(pre.statusCode).not.toBe(204);
      expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    }
    const read = await gw.request('GET', '/api/tokens', { headers: { origin: APP } });
    expect(read.statusCode).toBe(200);
    expect(read.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('exposes Mcp-Session-Id on the answer the MCP transport writes itself (real HTTP)', async () => {
    const base = await gw.listen();
    const response = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        origin: APP,
        authorization: `Bearer ${agent}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'page', version: '1' } },
      }),
    });
    await response.body?.cancel();
    expect(response.status).toBe(200);
    expect(response.headers.get('mcp-session-id')).toBeTruthy();
    expect(response.headers.get('access-control-allow-origin')).toBe(APP);
    expect(list(response.headers.get('access-control-expose-headers'))).toEqual(expect.arrayContaining(EXPOSED));
  });
});
