/**
 * The admin surface through real HTTP with the SDK client as the agent: tools derived from the route
 * table, scopes read per request, path-argument rules, gated tools through the approval queue.
 */
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SurfaceGrants } from '../../src/api/grants.js';
import { defineRoute } from '../../src/api/route.js';
import { buildApp } from '../../src/app.js';
import { ApprovalQueue } from '../../src/approvals/queue.js';
import { AuditLog } from '../../src/audit/log.js';
import { EventHub } from '../../src/audit/stream.js';
import { tokenAuthenticator } from '../../src/identity/index.js';
import { createLogger } from '../../src/logging.js';
import { SettingsService } from '../../src/settings/service.js';
import { openStore } from '../../src/store/db.js';
import { TokenStore } from '../../src/store/tokens.js';
import { createAdminSurface } from '../../src/surfaces/admin/index.js';
import { buildAdminCatalog } from '../../src/surfaces/admin/tools.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

describe('admin surface', () => {
  let gw: TestGateway;
  let base: string;
  let agent: { token: string };
  let upstream: McpFixture;
  const clients: Client[] = [];

  const connect = async (token: string): Promise<Client> => {
    const client = await connectAgent(`${base}/mcp/admin`, token, { name: 'admin-agent' });
    clients.push(client);
    return client;
  };
  const settings = (body: Record<string, unknown>) => gw.request('PATCH', '/api/settings', { body });
  const call = async (client: Client, name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: { args } })) as {
      isError?: boolean;
      structuredContent: Json;
    };

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } });
    agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'admin-agent' } })).json();
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
  });

  it('derives one tool per declared route; every route is a tool or excluded with a reason', () => {
    const catalog = buildAdminCatalog(gw.gateway.app.routeTable);
    expect(catalog.aliases.mcp_server_list).toBe('GET /api/mcp/servers');
    expect(catalog.aliases.mcp_catalog_get).toBe('GET /api/mcp/catalog/*');
    expect(catalog.tiers.gated).toEqual(
      expect.arrayContaining(['mcp_server_install', 'mcp_server_uninstall', 'mcp_server_tools_write']),
    );
    expect(catalog.tiers.autonomousRead).toEqual(expect.arrayContaining(['platform_status', 'agent_mcp_capabilities']));
    const excluded = catalog.excluded.map((e) => e.route);
    for (const never of ['POST /api/tokens', 'DELETE /api/tokens/:id', 'PATCH /api/settings', 'GET /api/mcp/stream']) {
      expect(excluded).toContain(never);
    }
    expect(catalog.excluded.every((e) => e.reason.length > 10)).toBe(true);
    const schema = catalog.tools.get('mcp_server_get')?.definition.inputSchema as Json;
    expect(schema.properties.args.required).toEqual(['id']);
    expect(() =>
      buildAdminCatalog([
        ...gw.gateway.app.routeTable,
        { method: 'GET', url: '/x', declaration: undefined, mcpEndpoint: false },
      ]),
    ).toThrow(/neither/);
  });

  it('is 404 while switched off and lists only what the scopes allow, read per request', async () => {
    expect(
      (await fetch(`${base}/mcp/admin`, { method: 'POST', headers: { authorization: `Bearer ${agent.token}` } }))
        .status,
    ).toBe(404);
    await settings({ 'mcp.adminEnabled': true });
    const client = await connect(agent.token);
    const names = async () => (await client.listTools()).tools.map((t) => t.name);
    expect((await names()).sort()).toEqual(
      [
        'agent_mcp_capabilities',
        'gatehouse__approval_status',
        'platform_auth_context',
        'platform_health',
        'platform_status',
        'platform_summary',
        'platform_version',
      ].sort(),
    );
    await settings({ 'mcp.scope.servers': 'read' });
    expect(await names()).toContain('mcp_server_list');
    expect(await names()).not.toContain('mcp_server_install');
    await settings({ 'mcp.scope.servers': 'write' });
    expect(await names()).toEqual(expect.arrayContaining(['mcp_server_install', 'mcp_server_config_write']));
    await settings({ 'mcp.scope.servers': 'off' });
    expect(await names()).not.toContain('mcp_server_list');
    await expect(call(client, 'mcp_server_list', {})).rejects.toThrow(/not found/);
    const status = (await call(client, 'platform_status', {})).structuredContent;
    expect(status).toMatchObject({
      name: 'gatehouse',
      surfaces: { admin: true },
      externalEndpoints: expect.any(Array),
    });
    const context = (await call(client, 'platform_auth_context', {})).structuredContent;
    expect(context).toMatchObject({
      name: 'admin-agent',
      role: 'agent',
      via: 'admin-surface',
      scopes: { servers: 'off' },
    });
    await settings({ 'mcp.adminEnabled': false });
    await expect(client.listTools()).rejects.toThrow();
  });

  it('returns raw REST JSON, with fields and q on lists, and the error envelope on failure', async () => {
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'read' });
    const client = await connect(agent.token);
    const list = (await call(client, 'mcp_server_list', { fields: 'status', q: 'files' })).structuredContent;
    expect(list.servers).toEqual([{ id: 'files', status: 'unknown' }]);
    expect(list.total).toBe(1);
    const missing = await call(client, 'mcp_server_get', { id: 'nope' });
    expect(missing.isError).toBe(true);
    expect(missing.structuredContent).toMatchObject({ status: 'error', error: { code: 'mcp.not_found' } });
    // A record whose own status is "failed" is a normal result.
    await gw.request('PATCH', '/api/mcp/servers/files/config', { body: { url: 'http://127.0.0.2:1/mcp' } });
    await gw.request('POST', '/api/mcp/servers/files/test');
    const failed = await call(client, 'mcp_server_get', { id: 'files' });
    expect(failed.isError).toBeFalsy();
    expect(failed.structuredContent.status).toBe('failed');
    // What a tool does not declare is refused, never silently dropped: fields and q belong to lists.
    for (const [name, args, key] of [
      ['mcp_server_get', { id: 'files', bogus: 1 }, 'bogus'],
      ['mcp_server_get', { id: 'files', fields: 'status' }, 'fields'],
      ['platform_version', { q: 'x' }, 'q'],
    ] as const) {
      const undeclared = await call(client, name, args);
      expect(undeclared.isError).toBe(true);
      expect(undeclared.structuredContent.error).toMatchObject({ code: 'validation_error', issues: [{ path: key }] });
    }
  });

  it('holds path arguments to hal0’s rules and encodes them as one segment', async () => {
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'read' });
    const client = await connect(agent.token);
    const refused: unknown[] = [
      null,
      true,
      1.5,
      [],
      {},
      '',
      '.',
      '..',
      'a/b',
      'a\u0000b',
      'a\u200bb',
      'a\u202eb',
      '\ufeffa',
      2 ** 53,
    ];
    for (const id of refused) {
      const result = await call(client, 'mcp_server_get', { id });
      expect(result.structuredContent, JSON.stringify(id)).toMatchObject({
        status: 'error',
        error: { code: 'mcp.invalid_arg' },
      });
    }
    expect((await call(client, 'mcp_server_get', {})).structuredContent.error.code).toBe('mcp.missing_arg');
    // {name:path}: segments each held to the rules; / between them is fine.
    for (const name of ['/io.x/a', 'io.x/a/', 'io.x//a', 'io.x/../a', 'io.x/./a']) {
      expect((await call(client, 'mcp_catalog_get', { name })).structuredContent.error.code).toBe('mcp.invalid_arg');
    }
    const found = await call(client, 'mcp_catalog_get', { name: 'io.github.modelcontextprotocol/memory' });
    expect(found.isError).toBeFalsy();
  });

  it('queues gated tools for an operator and runs them as the requester, re-checking at execution', async () => {
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' });
    const client = await connect(agent.token);
    const pending = (await call(client, 'mcp_server_uninstall', { id: 'files' })).structuredContent;
    expect(pending).toMatchObject({ status: 'pending_approval', approval_id: expect.any(String) });
    expect((await gw.request('GET', '/api/mcp/servers/files')).statusCode).toBe(200);
    const card = (await gw.request('GET', `/api/approvals/${pending.approval_id}`)).json();
    expect(card).toMatchObject({ surface: 'admin', tool: 'mcp_server_uninstall', arguments: { id: 'files' } });
    await gw.request('POST', `/api/approvals/${pending.approval_id}/approve`, { body: {} });
    const done = (
      await client.callTool({
        name: 'gatehouse__approval_status',
        arguments: { args: { approval_id: pending.approval_id, wait_s: 10 } },
      })
    ).structuredContent as Json;
    expect(done).toMatchObject({ status: 'executed', result: { uninstalled: 'files' } });
    expect((await gw.request('GET', '/api/mcp/servers/files')).statusCode).toBe(404);

    // Scope narrowed between request and approval: the call ends out_of_scope and never runs.
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'again' } });
    const second = (await call(client, 'mcp_server_uninstall', { id: 'again' })).structuredContent;
    await settings({ 'mcp.scope.servers': 'read' });
    await gw.request('POST', `/api/approvals/${second.approval_id}/approve`, { body: {} });
    const ended = (
      await client.callTool({
        name: 'gatehouse__approval_status',
        arguments: { args: { approval_id: second.approval_id, wait_s: 10 } },
      })
    ).structuredContent as Json;
    expect(ended.status).toBe('out_of_scope');
    expect((await gw.request('GET', '/api/mcp/servers/again')).statusCode).toBe(200);
  });

  it("an agent reading the audit sees other clients' calls without their payloads or digests, its own in full", async () => {
    await settings({
      'mcp.adminEnabled': true,
      'mcp.scope.audit': 'read',
      'mcp.scope.servers': 'read',
      'audit.payloads': 'data',
    });
    await gw.request('PATCH', '/api/mcp/servers/files/tools', { body: { allow: ['echo'] } });
    await gw.request('POST', '/api/mcp/servers/files/test');
    const other = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'other' } })).json();
    const hub = await connectAgent(`${base}/mcp`, other.token);
    clients.push(hub);
    await hub.callTool({ name: 'files__echo', arguments: { text: 'my PIN is 1690' } });
    const reader = await connect(agent.token);
    await call(reader, 'mcp_server_list', {});
    await gw.gateway.audit.flush();

    const events = (await call(reader, 'audit_list', { kind: 'call', limit: 50 })).structuredContent.events as Json[];
    const theirs = events.find((e) => e.tool === 'echo') as Json;
    expect(theirs).toMatchObject({ actorId: other.id, argsDigest: null });
    expect(JSON.stringify(events)).not.toContain('1690');
    const mine = events.find((e) => e.tool === 'mcp_server_list') as Json;
    expect(mine.argsDigest).toEqual(expect.any(String));
    expect(mine.data).toHaveProperty('arguments');
    // An operator reads every row in full.
    const all = (await gw.request('GET', '/api/audit?kind=call&limit=50')).json().events as Json[];
    expect(JSON.stringify(all.find((e) => e.tool === 'echo'))).toContain('1690');
  });

  it('keeps the secrets of a gated install sealed: the card and the stored row show them masked, the run sends them', async () => {
    // Payloads on: the audit keeps arguments, and must keep these masked too.
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write', 'audit.payloads': 'data' });
    const client = await connect(agent.token);
    const secret = 'sk-literal-value-0123456789';
    const pending = (
      await call(client, 'mcp_server_install', {
        manifest: {
          id: 'keyed',
          name: 'Keyed',
          transport: 'streamable-http',
          url: upstream.url,
          headers: { 'X-Upstream-Key': secret },
        },
      })
    ).structuredContent;
    expect(pending).toMatchObject({ status: 'pending_approval', approval_id: expect.any(String) });

    // Every way a reader sees the approval: one card, the list, the stored row. None holds the value.
    const card = await gw.request('GET', `/api/approvals/${pending.approval_id}`);
    const list = await gw.request('GET', '/api/approvals?status=pending');
    const stored = await gw.gateway.store.db
      .selectFrom('approvals')
      .selectAll()
      .where('id', '=', pending.approval_id)
      .executeTakeFirstOrThrow();
    for (const text of [card.body, list.body, stored.arguments, stored.detail ?? '', stored.sealed_arguments ?? '']) {
      expect(text).not.toContain(secret);
    }
    expect(card.json().arguments.manifest.headers).toEqual({ 'X-Upstream-Key': { set: true, new: true } });
    expect(stored.sealed_arguments).toEqual(expect.any(String));

    // Approved, the install runs with the literal value: the upstream receives it on the handshake.
    await gw.request('POST', `/api/approvals/${pending.approval_id}/approve`, { body: {} });
    const done = (await call(client, 'gatehouse__approval_status', { approval_id: pending.approval_id, wait_s: 10 }))
      .structuredContent;
    expect(done.status).toBe('executed');
    expect((await gw.request('POST', '/api/mcp/servers/keyed/test')).json().ok).toBe(true);
    expect(upstream.log.records.some((r) => r.headers['x-upstream-key'] === secret)).toBe(true);
    // The call's and the execution's audit rows hold the masked arguments (their digest too), never the value.
    await gw.gateway.audit.flush();
    const rows = await gw.gateway.store.db
      .selectFrom('audit_events')
      .selectAll()
      .where('tool', '=', 'mcp_server_install')
      .execute();
    expect(rows.filter((r) => r.kind === 'call').length).toBe(2);
    expect(JSON.stringify(rows)).not.toContain(secret);
    expect(JSON.stringify(rows)).toContain('X-Upstream-Key');
  });

  it('shows an import waiting for approval with its entries’ env and header values masked, the file unshown', async () => {
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' });
    const client = await connect(agent.token);
    const secret = 'xoxb-literal-slack-token-42';
    const entries = { remote: { url: upstream.url, headers: { Authorization: `Bearer ${secret}` } } };
    for (const args of [{ servers: entries }, { config: JSON.stringify({ mcpServers: entries }) }]) {
      const pending = (await call(client, 'mcp_server_import', args)).structuredContent;
      expect(pending.status).toBe('pending_approval');
      const card = await gw.request('GET', `/api/approvals/${pending.approval_id}`);
      expect(card.body).not.toContain(secret);
      expect(card.json().arguments.servers.remote).toEqual({
        url: upstream.url,
        headers: { Authorization: { set: true } },
      });
    }
  });

  it('gatehouse__approval_status takes {"args": {...}} like every admin tool; the plain form is refused', async () => {
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' });
    const client = await connect(agent.token);
    const listed = (await client.listTools()).tools.find((t) => t.name === 'gatehouse__approval_status');
    const schema = listed?.inputSchema as Json;
    expect(schema.required).toEqual(['args']);
    expect(schema.properties.args.required).toEqual(['approval_id']);
    const pending = (await call(client, 'mcp_server_uninstall', { id: 'files' })).structuredContent;
    const wrapped = (await call(client, 'gatehouse__approval_status', { approval_id: pending.approval_id }))
      .structuredContent;
    expect(wrapped).toMatchObject({ status: 'pending', approval_id: pending.approval_id });
    const plain = (await client.callTool({
      name: 'gatehouse__approval_status',
      arguments: { approval_id: pending.approval_id },
    })) as { isError?: boolean; structuredContent: Json };
    expect(plain.isError).toBe(true);
    expect(plain.structuredContent.error.code).toBe('tool.invalid_arguments');
  });

  it('a failed approved call carries the route’s own error code in its envelope', async () => {
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' });
    const client = await connect(agent.token);
    const pending = (await call(client, 'mcp_server_uninstall', { id: 'files' })).structuredContent;
    // The server goes before the approval runs: the route answers 404 mcp.not_found.
    expect((await gw.request('DELETE', '/api/mcp/servers/files')).statusCode).toBe(200);
    await gw.request('POST', `/api/approvals/${pending.approval_id}/approve`, { body: {} });
    const failed = (await call(client, 'gatehouse__approval_status', { approval_id: pending.approval_id, wait_s: 10 }))
      .structuredContent;
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'mcp.not_found' } });
  });

  it('refuses agent tokens on REST outside the surface', async () => {
    await settings({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' });
    expect((await gw.request('GET', '/api/mcp/servers', { token: agent.token })).statusCode).toBe(403);
    expect((await gw.request('GET', '/api/platform/status', { token: agent.token })).statusCode).toBe(403);
  });
});

describe('admin surface on test routes', () => {
  it('encodes ? # % : space é intact, per segment for path parameters, and wraps bare lists', async () => {
    const target = await sqliteTarget.fresh();
    const store = await openStore(target);
    const settings = new SettingsService(store);
    await settings.patch({ 'mcp.adminEnabled': true, 'mcp.scope.servers': 'read' }, null);
    const tokens = new TokenStore(store);
    const { token } = await tokens.create({ name: 'route-agent', role: 'agent', source: 'api' });
    const audit = new AuditLog(store);
    const events = await EventHub.open(store);
    const approvals = new ApprovalQueue({ store, audit, events });
    const grants = new SurfaceGrants();
    const read = { scope: 'servers' as const, access: ['admin'] as const, summary: 'test route' };
    const app = await buildApp({
      config: { maxBodySize: 1 << 20 },
      logger: createLogger({ logLevel: 'silent' }),
      grants,
      authenticate: tokenAuthenticator(store, tokens),
      routes: [
        defineRoute({
          ...read,
          method: 'GET',
          url: '/echo/:value',
          mcp: { tool: 'test_echo', tier: 'autonomousRead' },
          handler: ({ request }) => ({ value: (request.params as { value: string }).value }),
        }),
        defineRoute({
          ...read,
          method: 'GET',
          url: '/files/*',
          wildcard: 'relpath',
          mcp: { tool: 'test_files', tier: 'autonomousRead' },
          handler: ({ request }) => ({ relpath: (request.params as Record<string, string>)['*'] }),
        }),
        defineRoute({
          ...read,
          method: 'GET',
          url: '/bare',
          mcp: { tool: 'test_bare', tier: 'autonomousRead' },
          handler: () => [1, 2, 3],
        }),
      ],
    });
    const surface = createAdminSurface({
      config: { host: '127.0.0.1', hubAuth: 'token', allowedOrigins: [], allowedHosts: [], maxBodySize: 1 << 20 },
      app,
      grants,
      settings,
      approvals,
      audit: async () => {},
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const client = new Client({ name: 'route-agent', version: '1.0.0' });
    try {
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/mcp/admin`;
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      const run = async (name: string, args: Record<string, unknown>) =>
        ((await client.callTool({ name, arguments: { args } })) as { structuredContent: Record<string, unknown> })
          .structuredContent;
      for (const value of ['a?b', 'a#b', '100%', 'a:b', 'a b', 'é', '?#%: é', 42]) {
        expect(await run('test_echo', { value })).toEqual({ value: String(value) });
      }
      expect(await run('test_files', { relpath: 'styles/a b?.safetensors' })).toEqual({
        relpath: 'styles/a b?.safetensors',
      });
      expect(await run('test_bare', {})).toEqual({ items: [1, 2, 3], count: 3 });
    } finally {
      await client.close();
      await surface.close();
      await app.close();
      await approvals.close();
      events.close();
      await store.close();
      await target.cleanup();
    }
  });
});
