import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { auditRoutes } from '../../src/api/audit.js';
import { metricsRoutes } from '../../src/api/metrics.js';
import { buildApp } from '../../src/app.js';
import { CallAuditor } from '../../src/audit/calls.js';
import { AuditLog } from '../../src/audit/log.js';
import type { TokenPrincipal } from '../../src/identity/index.js';
import { tokenAuthenticator } from '../../src/identity/index.js';
import { createLogger } from '../../src/logging.js';
import { Metrics } from '../../src/metrics/index.js';
import { SettingsService } from '../../src/settings/service.js';
import { type TokenRecord, TokenStore } from '../../src/store/tokens.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';
import { callEvent } from './helpers.js';

const T0 = Date.parse('2020-01-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

function asPrincipal(record: TokenRecord): TokenPrincipal {
  const { id, name, role, groups, rateLimit, maxConcurrent } = record;
  return { id, name, role, groups, rateLimit, maxConcurrent };
}

describeEachStore('audit routes', (target) => {
  let base: Awaited<ReturnType<typeof freshStore>>;
  let app: FastifyInstance;
  let metrics: Metrics;
  let auditor: CallAuditor;
  let audit: AuditLog;
  const bearer: Record<'admin' | 'operator' | 'alpha' | 'beta', string> = {
    admin: '',
    operator: '',
    alpha: '',
    beta: '',
  };
  const ids: Record<string, string> = {};

  beforeEach(async () => {
    base = await freshStore(target);
    const tokens = new TokenStore(base.store);
    const created = {
      admin: await tokens.create({ name: 'root', role: 'admin', source: 'api' }),
      operator: await tokens.create({ name: 'oscar', role: 'operator', source: 'api' }),
      alpha: await tokens.create({ name: 'alpha', role: 'agent', source: 'api' }),
      beta: await tokens.create({ name: 'beta', role: 'agent', source: 'api' }),
    };
    for (const [key, value] of Object.entries(created)) {
      bearer[key as keyof typeof bearer] = value.token as string;
      ids[key] = value.record.id;
    }
    metrics = new Metrics({ poolConnections: () => 3, approvalsPending: async () => 2 });
    audit = new AuditLog(base.store);
    auditor = new CallAuditor({ audit, settings: new SettingsService(base.store), metrics });
    app = await buildApp({
      config: { maxBodySize: 1 << 20 },
      logger: createLogger({ logLevel: 'silent' }),
      authenticate: tokenAuthenticator(base.store, tokens),
      routes: [...auditRoutes({ store: base.store }), ...metricsRoutes({ metrics })],
    });

    const alpha = asPrincipal(created.alpha.record);
    const beta = asPrincipal(created.beta.record);
    const local: TokenPrincipal = {
      id: 'local',
      name: 'local',
      role: 'agent',
      groups: ['default'],
      rateLimit: null,
      maxConcurrent: null,
    };
    auditor.record(callEvent({ at: at(1), client: alpha, serverId: 'files', tool: 'read' }));
    auditor.record(
      callEvent({
        at: at(2),
        client: alpha,
        serverId: 'files',
        tool: 'rm',
        verdict: 'blocked',
        outcome: 'tool.blocked',
      }),
    );
    auditor.record(callEvent({ at: at(3), client: beta, serverId: 'search', tool: 'find' }));
    auditor.record(
      callEvent({
        at: at(4),
        client: beta,
        serverId: 'ghost',
        tool: 'x',
        verdict: 'unknown_server',
        outcome: 'unknown_tool',
      }),
    );
    auditor.record(callEvent({ at: at(5), client: alpha, serverId: 'search', tool: 'find', outcome: 'tool_error' }));
    auditor.record(callEvent({ at: at(6), client: local, serverId: 'files', tool: 'read', approvalId: 'apr_1' }));
    await auditor.flush();
    // A control-plane change by the admin: in the trail, but not a client.
    await audit.recordAdmin({ action: 'token.create', actor: asPrincipal(created.admin.record), data: { id: 'x' } });
  });
  afterEach(async () => {
    await app.close();
    await base.cleanup();
  });

  const get = (url: string, token: string | null = bearer.admin) =>
    app.inject({ method: 'GET', url, headers: token ? { authorization: `Bearer ${token}` } : {} });

  it('lists events newest first in camelCase, with count and total', async () => {
    const res = await get('/api/audit');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ count: 7, total: 7 });
    expect(body.events[0]).toMatchObject({ kind: 'admin', action: 'token.create', actorId: ids.admin });
    expect(body.events.slice(1).map((e: { at: string }) => e.at)).toEqual([at(6), at(5), at(4), at(3), at(2), at(1)]);
    expect(body.events[1]).toEqual({
      id: expect.any(Number),
      at: at(6),
      kind: 'call',
      action: 'hub.call',
      actorId: 'local',
      actorName: 'local',
      userId: null,
      userName: null,
      serverId: 'files',
      tool: 'read',
      verdict: 'allow',
      approvalId: 'apr_1',
      outcome: 'ok',
      latencyMs: 12,
      requestBytes: 100,
      responseBytes: 200,
      argsDigest: expect.stringMatching(/^[0-9a-f]{64}$/),
      traceId: null,
      data: null,
    });
    expect(res.body).not.toMatch(/actor_id|args_digest|latency_ms/);
  });

  it('filters by client (id or name), server, verdict, kind and since', async () => {
    const byId = (await get(`/api/audit?client=${ids.alpha}`)).json();
    expect(byId.total).toBe(3);
    expect(byId.events.every((e: { actorId: string }) => e.actorId === ids.alpha)).toBe(true);
    expect((await get('/api/audit?client=alpha')).json().total).toBe(3);
    expect((await get('/api/audit?client=nobody')).json()).toMatchObject({ events: [], count: 0, total: 0 });

    const search = (await get('/api/audit?server=search')).json();
    expect(search.events.map((e: { at: string }) => e.at)).toEqual([at(5), at(3)]);
    const blocked = (await get('/api/audit?verdict=blocked')).json();
    expect(blocked).toMatchObject({ total: 1, events: [{ tool: 'rm', outcome: 'tool.blocked' }] });
    expect((await get('/api/audit?kind=admin')).json().total).toBe(1);
    expect((await get('/api/audit?kind=call')).json().total).toBe(6);

    // 01:00:03+01:00 is 00:00:03Z: calls at 3..6 s and the admin event.
    const since = (await get(`/api/audit?since=${encodeURIComponent('2020-01-01T01:00:03+01:00')}`)).json();
    expect(since.total).toBe(5);
    const combined = (await get(`/api/audit?client=alpha&since=${at(2)}&verdict=allow`)).json();
    expect(combined.events.map((e: { at: string }) => e.at)).toEqual([at(5)]);
  });

  it('pages with limit and offset, keeping total', async () => {
    const page = (await get('/api/audit?kind=call&limit=2&offset=2')).json();
    expect(page).toMatchObject({ count: 2, total: 6 });
    expect(page.events.map((e: { at: string }) => e.at)).toEqual([at(4), at(3)]);
    const past = (await get('/api/audit?kind=call&limit=2&offset=10')).json();
    expect(past).toMatchObject({ events: [], count: 0, total: 6 });
    const ten = await get('/api/audit?limit=500');
    expect(ten.statusCode).toBe(200);
  });

  it('refuses bad queries and callers without the right role', async () => {
    for (const url of [
      '/api/audit?limit=501',
      '/api/audit?limit=0',
      '/api/audit?offset=-1',
      '/api/audit?since=yesterday',
      '/api/audit?verdict=maybe',
      '/api/audit?kind=secret',
      '/api/audit?colour=blue',
      '/api/mcp/clients?limit=1000',
    ]) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
    }
    expect((await get('/api/audit', null)).statusCode).toBe(401);
    expect((await get('/api/audit', bearer.alpha)).statusCode).toBe(403);
    expect((await get('/api/audit', bearer.operator)).statusCode).toBe(200);
    expect((await get('/api/mcp/clients', null)).statusCode).toBe(401);
    expect((await get('/api/mcp/clients', bearer.beta)).statusCode).toBe(403);
    expect((await get('/api/mcp/clients', bearer.operator)).statusCode).toBe(200);
  });

  it('derives the clients seen from call events', async () => {
    const body = (await get('/api/mcp/clients')).json();
    expect(body).toEqual({
      count: 3,
      total: 3,
      clients: [
        {
          id: 'local',
          name: 'local',
          user: null,
          role: null,
          lastSeen: at(6),
          calls: 1,
          servers: [{ id: 'files', calls: 1, lastSeen: at(6) }],
        },
        {
          id: ids.alpha,
          name: 'alpha',
          user: null,
          role: 'agent',
          lastSeen: at(5),
          calls: 3,
          servers: [
            { id: 'search', calls: 1, lastSeen: at(5) },
            { id: 'files', calls: 2, lastSeen: at(2) },
          ],
        },
        {
          id: ids.beta,
          name: 'beta',
          user: null,
          role: 'agent',
          lastSeen: at(4),
          calls: 2,
          // The unknown server an agent named is not a server it used.
          servers: [{ id: 'search', calls: 1, lastSeen: at(3) }],
        },
      ],
    });
    const page = (await get('/api/mcp/clients?limit=1&offset=1')).json();
    expect(page).toMatchObject({ count: 1, total: 3, clients: [{ id: ids.alpha }] });
    const recent = (await get(`/api/mcp/clients?since=${at(5)}`)).json();
    expect(recent).toMatchObject({ total: 2, clients: [{ id: 'local' }, { id: ids.alpha, calls: 1 }] });
  });

  it('serves Prometheus metrics to an admin token only', async () => {
    const res = await get('/metrics');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.body).toContain('gatehouse_tool_calls_total{surface="hub",verdict="allow",outcome="ok"} 3');
    expect(res.body).toContain('gatehouse_tool_calls_total{surface="hub",verdict="allow",outcome="tool_error"} 1');
    expect(res.body).toContain('gatehouse_tool_calls_total{surface="hub",verdict="blocked",outcome="tool.blocked"} 1');
    expect(res.body).toContain(
      'gatehouse_tool_calls_total{surface="hub",verdict="unknown_server",outcome="unknown_tool"} 1',
    );
    expect(res.body).toContain('gatehouse_tool_call_duration_seconds_count{server="files"} 2');
    expect(res.body).toContain('gatehouse_tool_call_duration_seconds_count{server="search"} 2');
    expect(res.body).not.toContain('server="ghost"');
    expect(res.body).toContain('gatehouse_upstream_pool_connections 3');
    expect(res.body).toContain('gatehouse_approvals_pending 2');
    expect(res.body).toContain('process_cpu_user_seconds_total');

    expect((await get('/metrics', null)).statusCode).toBe(401);
    expect((await get('/metrics', bearer.operator)).statusCode).toBe(403);
    expect((await get('/metrics', bearer.alpha)).statusCode).toBe(403);

    // Sources set later (parts created after the metrics) are read at the next scrape.
    metrics.setSources({ poolConnections: () => 7 });
    expect((await get('/metrics')).body).toContain('gatehouse_upstream_pool_connections 7');
  });

  it('declares scope, roles and admin-surface names', () => {
    const declared = [...auditRoutes({ store: base.store }), ...metricsRoutes({ metrics })].map((r) => ({
      url: r.url,
      scope: r.scope,
      access: r.access,
      mcp: r.mcp,
    }));
    expect(declared).toEqual([
      {
        url: '/api/audit',
        scope: 'audit',
        access: ['admin', 'operator', 'member'],
        mcp: { tool: 'audit_list', tier: 'autonomousRead' },
      },
      {
        url: '/api/mcp/clients',
        scope: 'servers',
        access: ['admin', 'operator'],
        mcp: { tool: 'mcp_client_list', tier: 'autonomousRead' },
      },
      { url: '/metrics', scope: 'system', access: ['admin'], mcp: { exclude: expect.any(String) } },
    ]);
  });
});
