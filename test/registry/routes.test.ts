import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogRoutes } from '../../src/api/catalog.js';
import { buildApp } from '../../src/app.js';
import { createEgressGuard } from '../../src/egress/index.js';
import type { Authenticator, Principal } from '../../src/identity/index.js';
import { createLogger } from '../../src/logging.js';
import { loadCatalog } from '../../src/registry/catalog.js';
import { PRIVATE_HOST, PUBLIC_HOST, serveBody, startServer, type TestServer } from './helpers.js';

const principals: Record<string, Principal> = {
  admin: { id: 'a', name: 'admin', role: 'admin', groups: [] },
  operator: { id: 'o', name: 'operator', role: 'operator', groups: [] },
  agent: { id: 'g', name: 'agent', role: 'agent', groups: ['default'] },
};
// The bearer token is the role's name: enough to exercise each route's access list.
const authenticate: Authenticator = (request) => principals[request.headers.authorization?.slice(7) ?? ''];

const guard = createEgressGuard({ testPublicAddresses: [PUBLIC_HOST], allowHttp: true });
const routes = catalogRoutes({ catalog: await loadCatalog(), guard });
let app: FastifyInstance;
let manifestServer: TestServer;
let privateServer: TestServer;

beforeAll(async () => {
  app = await buildApp({
    config: { maxBodySize: 1024 * 1024 },
    logger: createLogger({ logLevel: 'silent' }),
    authenticate,
    routes,
  });
  const manifest = { name: 'io.github.acme/weather', command: 'npx', args: ['-y', '@acme/weather-mcp'] };
  manifestServer = await startServer(PUBLIC_HOST, serveBody(manifest));
  privateServer = await startServer(PRIVATE_HOST, serveBody(manifest));
});
afterAll(async () => {
  await app.close();
  await manifestServer.close();
  await privateServer.close();
  await guard.close();
});

async function get(url: string, token = 'admin') {
  const response = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
  return { status: response.statusCode, body: response.json() };
}

describe('route declarations', () => {
  it('declare scope, roles and admin-surface tools', () => {
    expect(routes.map((r) => [r.method, r.url, r.scope, r.access, r.mcp])).toEqual([
      ['GET', '/api/mcp/catalog', 'servers', ['admin', 'operator'], { tool: 'mcp_catalog', tier: 'autonomousRead' }],
      [
        'GET',
        '/api/mcp/catalog/*',
        'servers',
        ['admin', 'operator'],
        { tool: 'mcp_catalog_get', tier: 'autonomousRead' },
      ],
      ['GET', '/api/mcp/resolve', 'servers', ['admin', 'operator'], { tool: 'mcp_resolve', tier: 'autonomousRead' }],
    ]);
  });

  it('need an admin or operator token', async () => {
    for (const url of [
      '/api/mcp/catalog',
      '/api/mcp/catalog/io.github.modelcontextprotocol/git',
      '/api/mcp/resolve?url=npm:x',
    ]) {
      expect((await app.inject({ method: 'GET', url })).statusCode).toBe(401);
      expect((await get(url, 'agent')).status).toBe(403);
      expect((await get(url, 'operator')).status).toBe(200);
    }
  });
});

describe('GET /api/mcp/catalog', () => {
  it('answers the list contract with the categories', async () => {
    const { status, body } = await get('/api/mcp/catalog');
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['categories', 'count', 'items', 'total']);
    expect(body.count).toBe(body.items.length);
    expect(body.total).toBe(body.items.length);
    expect(body.categories).toEqual([...new Set(body.items.map((e: { category: string }) => e.category))].sort());
  });

  it('filters and pages', async () => {
    const database = await get('/api/mcp/catalog?category=database');
    expect(database.body.items.length).toBeGreaterThan(1);
    expect(database.body.items.every((e: { category: string }) => e.category === 'database')).toBe(true);
    const page = await get('/api/mcp/catalog?category=database&limit=1&offset=1');
    expect(page.body).toMatchObject({ count: 1, total: database.body.total });
    expect(page.body.items[0]).toEqual(database.body.items[1]);
    const search = await get('/api/mcp/catalog?q=SEQUENTIAL');
    expect(search.body.items.map((e: { name: string }) => e.name)).toEqual([
      'io.github.modelcontextprotocol/sequential-thinking',
    ]);
    expect(search.body.categories).toEqual((await get('/api/mcp/catalog')).body.categories);
  });

  it.each([
    ['limit=0', 'query.limit'],
    ['limit=501', 'query.limit'],
    ['offset=-1', 'query.offset'],
    ['limit=ten', 'query.limit'],
    ['category=Data%20Base', 'query.category'],
    ['q=', 'query.q'],
    ['unknown=1', 'query'],
  ])('400 for %s', async (query, path) => {
    const { status, body } = await get(`/api/mcp/catalog?${query}`);
    expect(status).toBe(400);
    expect(body.error.code).toBe('validation_error');
    expect(body.error.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path })]));
  });
});

describe('GET /api/mcp/catalog/{name:path}', () => {
  it('answers one entry by a name that contains /', async () => {
    const { status, body } = await get('/api/mcp/catalog/io.github.modelcontextprotocol/filesystem');
    expect(status).toBe(200);
    expect(body).toMatchObject({ name: 'io.github.modelcontextprotocol/filesystem', transport: 'stdio' });
    const encoded = await get('/api/mcp/catalog/io.github.modelcontextprotocol%2Ffilesystem');
    expect(encoded.body).toEqual(body);
    expect((await get('/api/mcp/catalog/IO.GITHUB.GITHUB/GITHUB-MCP-SERVER')).body.id).toBe('github');
  });

  it('404 mcp.preset_not_found for an unknown name', async () => {
    const { status, body } = await get('/api/mcp/catalog/io.github.nobody/nothing');
    expect(status).toBe(404);
    expect(body.error.code).toBe('mcp.preset_not_found');
  });

  it.each(['io.github.a//b', 'a%20b', 'a/-b', '%00', `${'a'.repeat(201)}`])('400 for the name %j', async (name) => {
    const { status, body } = await get(`/api/mcp/catalog/${name}`);
    expect(status).toBe(400);
    expect(body.error.code).toBe('validation_error');
  });
});

describe('GET /api/mcp/resolve', () => {
  it('resolves a spec locally', async () => {
    const { status, body } = await get(`/api/mcp/resolve?url=${encodeURIComponent('npm:@acme/tool@1.2.3')}`);
    expect(status).toBe(200);
    expect(body).toMatchObject({ id: 'tool', command: 'npx', args: ['-y', '@acme/tool@1.2.3'], sourceKind: 'npm' });
  });

  it('fetches a manifest from a public (test-seam) address', async () => {
    const url = `${manifestServer.origin}/manifest.json`;
    const { status, body } = await get(`/api/mcp/resolve?url=${encodeURIComponent(url)}`);
    expect(status).toBe(200);
    expect(body).toMatchObject({ id: 'weather', sourceKind: 'manifest', sourceUrl: url });
  });

  it('refuses a manifest on a private address', async () => {
    const url = `${privateServer.origin}/manifest.json`;
    const { status, body } = await get(`/api/mcp/resolve?url=${encodeURIComponent(url)}`);
    expect(status).toBe(400);
    expect(body.error.code).toBe('private_network_blocked');
    expect(privateServer.requests).toHaveLength(0);
  });

  it('answers hostile specs with mcp.spec_unsupported', async () => {
    const { status, body } = await get(`/api/mcp/resolve?url=${encodeURIComponent('npm:foo;rm -rf /')}`);
    expect(status).toBe(400);
    expect(body.error.code).toBe('mcp.spec_unsupported');
  });

  it.each([
    ['', 'query.url'],
    ['?url=', 'query.url'],
    [`?url=npm:${'a'.repeat(2048)}`, 'query.url'],
    ['?url=npm:x&extra=1', 'query'],
  ])('400 validation_error for %j', async (query, path) => {
    const { status, body } = await get(`/api/mcp/resolve${query}`);
    expect(status).toBe(400);
    expect(body.error.code).toBe('validation_error');
    expect(body.error.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path })]));
  });
});
