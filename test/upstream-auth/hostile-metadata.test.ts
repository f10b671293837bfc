/**
 * Hostile authorization metadata: a protected resource whose 401, protected-resource metadata and
 * authorization-server metadata point at private and metadata-service addresses, carry `javascript:`
 * or `file:` authorization endpoints, lie about their issuer, redirect, or are oversized. Connecting
 * is refused with a typed error every time, and no authorization URL is ever handed out.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

interface Behaviour {
  /** The 401's `resource_metadata` (default: this server's own /prm). */
  resourceMetadata?: (origin: string) => string;
  /** The protected-resource metadata document (or a raw answer). */
  prm?: (origin: string) => Json | { status: number; headers: Record<string, string>; body: string };
  /** The authorization-server metadata document. */
  as?: (origin: string) => Json;
}

const REFUSED = new Set(['oauth.metadata_refused', 'private_network_blocked', 'upstream_protocol_error']);

function goodAs(origin: string): Json {
  return {
    issuer: origin,
    authorization_endpoint: `https://${PUBLIC_TEST_HOST}/authorize`,
    token_endpoint: `${origin}/token`,
    registration_endpoint: `${origin}/register`,
    response_types_supported: ['code'],
    code_challenge_methods_supported: ['S256'],
  };
}

describe('hostile authorization metadata', () => {
  let gw: TestGateway;
  let server: http.Server;
  let origin: string;
  let behaviour: Behaviour = {};
  const seen: string[] = [];

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: 'http://127.0.0.1:7' });
    server = http.createServer((req, res) => {
      const path = new URL(req.url ?? '/', origin).pathname;
      seen.push(path);
      const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      if (path === '/mcp') {
        const prm = behaviour.resourceMetadata?.(origin) ?? `${origin}/prm`;
        return json(401, { error: 'invalid_token' }, { 'www-authenticate': `Bearer resource_metadata="${prm}"` });
      }
      if (path === '/prm' || path.startsWith('/.well-known/oauth-protected-resource')) {
        const answer = behaviour.prm?.(origin) ?? { resource: `${origin}/mcp`, authorization_servers: [origin] };
        if ('status' in answer && 'body' in answer) {
          res.writeHead(answer.status as number, answer.headers as Record<string, string>);
          return res.end(answer.body);
        }
        return json(200, answer);
      }
      if (
        path.startsWith('/.well-known/oauth-authorization-server') ||
        path.startsWith('/.well-known/openid-configuration')
      ) {
        return json(200, (behaviour.as ?? goodAs)(origin));
      }
      return json(404, { error: 'not_found' });
    });
    await new Promise<void>((resolve) => server.listen(0, PUBLIC_TEST_HOST, () => resolve()));
    origin = `http://${PUBLIC_TEST_HOST}:${(server.address() as AddressInfo).port}`;
    const installed = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'hostile',
          name: 'hostile',
          transport: 'streamable-http',
          url: `${origin}/mcp`,
          auth: { type: 'oauth', mode: 'shared' },
        },
      },
    });
    expect(installed.statusCode).toBe(201);
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await gw.close();
  });

  async function refused(b: Behaviour): Promise<Json> {
    behaviour = b;
    const answer = await gw.request('POST', '/api/mcp/servers/hostile/auth/connect');
    const body = answer.json();
    expect(answer.statusCode).toBeGreaterThanOrEqual(400);
    expect(body.authorizationUrl).toBeUndefined();
    expect(REFUSED.has(body.error.code), `${JSON.stringify(body)} ${seen.slice(-6).join(' ')}`).toBe(true);
    return body.error;
  }

  it('a safe document is accepted (the control case): an https authorization endpoint', async () => {
    behaviour = {
      as: (o) => ({ ...goodAs(o), registration_endpoint: undefined }),
    };
    // No registration endpoint and no client id: typed, after discovery succeeded.
    const answer = await gw.request('POST', '/api/mcp/servers/hostile/auth/connect');
    expect(answer.json().error.code).toBe('oauth.not_configured');
  });

  it('refuses metadata-service and private addresses in every field', async () => {
    await refused({ resourceMetadata: () => 'http://169.254.169.254/latest/meta-data/' });
    await refused({ resourceMetadata: () => 'http://10.0.0.1/prm' });
    await refused({ prm: (o) => ({ resource: `${o}/mcp`, authorization_servers: ['http://169.254.169.254/'] }) });
    await refused({ prm: (o) => ({ resource: `${o}/mcp`, authorization_servers: ['http://192.168.1.1/'] }) });
    for (const field of ['authorization_endpoint', 'token_endpoint', 'registration_endpoint', 'revocation_endpoint']) {
      for (const address of ['http://169.254.169.254/x', 'https://10.0.0.1/x', 'https://[fd00:ec2::254]/x']) {
        const error = await refused({ as: (o) => ({ ...goodAs(o), [field]: address }) });
        expect(error.message).toMatch(/refused/);
      }
    }
  });

  it('refuses javascript:, file: and plain-http authorization endpoints', async () => {
    for (const endpoint of [
      'javascript:alert(1)',
      'file:///etc/passwd',
      'data:text/html,hi',
      `http://${PUBLIC_TEST_HOST}/a`,
    ]) {
      const error = await refused({ as: (o) => ({ ...goodAs(o), authorization_endpoint: endpoint }) });
      // Refused by the SDK's schema (not a web URL) or by Gatehouse's own rule (https only).
      expect(error.message).toMatch(/authorization_endpoint|document is invalid/);
    }
  });

  it('refuses an issuer mismatch, another resource, a redirect and an oversized document', async () => {
    await refused({ as: (o) => ({ ...goodAs(o), issuer: 'https://evil.example' }) });
    await refused({
      prm: () => ({ resource: 'https://elsewhere.example/mcp', authorization_servers: ['https://x.example'] }),
    });
    await refused({
      prm: () => ({ status: 302, headers: { location: 'http://169.254.169.254/' }, body: '' }),
    });
    await refused({
      prm: (o) => ({
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ resource: `${o}/mcp`, authorization_servers: [o], pad: 'x'.repeat(400_000) }),
      }),
    });
    expect(await gw.gateway.store.db.selectFrom('upstream_oauth_flows').selectAll().execute()).toHaveLength(0);
  });
});
