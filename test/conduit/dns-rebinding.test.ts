/**
 * The operations plane (`/ops/*`) against DNS rebinding: a web page whose name now resolves to 127.0.0.1
 * reaches a loopback conduit with its own name in `Host` and its own `Origin`. The conduit (with or without
 * a token) and `gatehouse serve`'s ops mount apply the hub's rule: a foreign Origin is 403, a Host that is
 * neither loopback nor listed in GATEHOUSE_ALLOWED_HOSTS is 403 (a malformed one 400 `bad_host`), and the
 * upstream never hears of a refused request.
 */
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConduit } from '../../src/conduit.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logging.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const TOKEN = 'conduit-test-token-0123456789';
const REBOUND = 'rebound.attacker.example:8080';
const FOREIGN_ORIGIN = 'http://rebound.attacker.example:8080';

async function conduit(env: Record<string, string>) {
  const config = loadConfig({
    env: {
      NODE_ENV: 'test',
      MCP_ALLOW_HTTP: 'true',
      GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST,
      MCP_LIST_TIMEOUT_MS: '2000',
      MCP_CALL_TIMEOUT_MS: '2000',
      ...env,
    },
  });
  const sink = new Writable({ write: (_c, _e, done) => done() });
  return (await createConduit(config, { logger: createLogger(config, sink) })).app;
}

/** One `/ops/*` request with the given Host and Origin (inject sends the Host header as given, as a browser would). */
async function ops(
  app: FastifyInstance,
  upstream: McpFixture,
  headers: { host: string; origin?: string; authorization?: string },
  route: 'list-tools' | 'call-tool' = 'list-tools',
) {
  const response = await app.inject({
    method: 'POST',
    url: `/ops/${route}`,
    headers: { 'content-type': 'application/json', ...headers },
    payload:
      route === 'list-tools'
        ? { url: upstream.url }
        : { url: upstream.url, name: 'echo', arguments: { text: 'rebinding' } },
  });
  return { status: response.statusCode, code: (response.json() as { error?: { code?: string } }).error?.code };
}

/** What every refusal must be: the hub's answer to the same request, and nothing sent upstream. */
async function expectRefusals(
  app: FastifyInstance,
  upstream: McpFixture,
  auth: { authorization?: string },
): Promise<void> {
  const before = upstream.log.records.length;
  for (const route of ['list-tools', 'call-tool'] as const) {
    // A rebound name in Host, with or without the page's Origin.
    expect(await ops(app, upstream, { ...auth, host: REBOUND }, route), route).toEqual({
      status: 403,
      code: 'forbidden',
    });
    expect(await ops(app, upstream, { ...auth, host: REBOUND, origin: FOREIGN_ORIGIN }, route)).toEqual({
      status: 403,
      code: 'forbidden',
    });
    // A loopback Host, but a foreign page's Origin (prefix tricks included).
    for (const origin of [FOREIGN_ORIGIN, 'http://127.0.0.1.evil.example', 'http://localhost.evil.example']) {
      expect(await ops(app, upstream, { ...auth, host: '127.0.0.1:8080', origin }, route), origin).toEqual({
        status: 403,
        code: 'forbidden',
      });
    }
    // `evil.example@localhost` would parse as localhost: refused by its syntax.
    expect(await ops(app, upstream, { ...auth, host: 'evil.example@localhost' }, route)).toEqual({
      status: 400,
      code: 'bad_host',
    });
  }
  expect(upstream.log.records.length).toBe(before);
}

async function expectServed(app: FastifyInstance, upstream: McpFixture, auth: { authorization?: string }) {
  for (const route of ['list-tools', 'call-tool'] as const) {
    for (const host of ['127.0.0.1:8080', 'localhost', 'LOCALHOST:1', '[::1]:8080']) {
      expect(await ops(app, upstream, { ...auth, host }, route), host).toEqual({ status: 200, code: undefined });
    }
    // A page on loopback (a local dashboard) is a loopback origin.
    expect(
      await ops(app, upstream, { ...auth, host: '127.0.0.1:8080', origin: 'http://localhost:5173' }, route),
    ).toEqual({ status: 200, code: undefined });
  }
}

describe('the conduit’s DNS-rebinding defence', () => {
  let upstream: McpFixture;
  beforeAll(async () => {
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
  });
  afterAll(async () => {
    await upstream.close();
  });

  it('refuses a rebound Host or a foreign Origin on a tokenless loopback conduit; serves loopback', async () => {
    const app = await conduit({ MCP_TOOL_TOKEN: '' });
    try {
      await expectRefusals(app, upstream, {});
      await expectServed(app, upstream, {});
    } finally {
      await app.close();
    }
  });

  it('applies the same rule with a token (the token is no defence against a page the operator opened)', async () => {
    const app = await conduit({ MCP_TOOL_TOKEN: TOKEN });
    try {
      const auth = { authorization: `Bearer ${TOKEN}` };
      await expectRefusals(app, upstream, auth);
      await expectServed(app, upstream, auth);
    } finally {
      await app.close();
    }
  });

  it('serves the hosts of GATEHOUSE_ALLOWED_HOSTS and the origins of GATEHOUSE_ALLOWED_ORIGINS, exactly', async () => {
    const app = await conduit({
      MCP_TOOL_TOKEN: '',
      GATEHOUSE_ALLOWED_HOSTS: 'Conduit.Test',
      GATEHOUSE_ALLOWED_ORIGINS: 'https://platform.example',
    });
    try {
      expect(await ops(app, upstream, { host: 'conduit.test:8080' })).toEqual({ status: 200, code: undefined });
      expect(await ops(app, upstream, { host: 'CONDUIT.TEST' })).toEqual({ status: 200, code: undefined });
      expect(await ops(app, upstream, { host: 'conduit.test.evil.example:8080' })).toMatchObject({ status: 403 });
      expect(await ops(app, upstream, { host: 'evil.conduit.test' })).toMatchObject({ status: 403 });
      const platform = { host: '127.0.0.1:8080', origin: 'https://platform.example' };
      expect(await ops(app, upstream, platform)).toEqual({ status: 200, code: undefined });
      for (const origin of ['https://platform.example.evil.example', 'http://platform.example']) {
        expect(await ops(app, upstream, { ...platform, origin }), origin).toMatchObject({ status: 403 });
      }
    } finally {
      await app.close();
    }
  });

  it('checks only the Origin on a non-loopback bind, as the hub does (a Host there is any name)', async () => {
    const app = await conduit({ MCP_TOOL_TOKEN: TOKEN, HOST: '0.0.0.0' });
    try {
      const auth = { authorization: `Bearer ${TOKEN}` };
      expect(await ops(app, upstream, { ...auth, host: 'conduit.internal:8080' })).toEqual({
        status: 200,
        code: undefined,
      });
      expect(await ops(app, upstream, { ...auth, host: 'conduit.internal', origin: FOREIGN_ORIGIN })).toEqual({
        status: 403,
        code: 'forbidden',
      });
    } finally {
      await app.close();
    }
  });
});

describe('gatehouse serve’s ops mount: the same DNS-rebinding defence', () => {
  let upstream: McpFixture;
  let gw: TestGateway;
  let auth: { authorization: string };
  beforeAll(async () => {
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_OPS_ENABLED: 'true' });
    const token = (await gw.request('POST', '/api/tokens', { body: { role: 'ops', name: 'platform' } })).json().token;
    auth = { authorization: `Bearer ${token}` };
  });
  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
  });

  it('refuses a rebound Host or a foreign Origin, and serves loopback', async () => {
    await expectRefusals(gw.gateway.app, upstream, auth);
    await expectServed(gw.gateway.app, upstream, auth);
  });
});
