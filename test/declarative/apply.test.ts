import { afterEach, beforeEach, expect, it } from 'vitest';
import { isNoop } from '../../src/declarative/report.js';
import type { GatehouseError } from '../../src/errors.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';
import { rejection } from '../registry/helpers.js';
import { apply, SENTINEL, sha256, writes } from './helpers.js';

const CI_TOKEN = 'gh_declarative-ci-token-0123456789abcdef';
const OPS_TOKEN = 'gh_declarative-env-token-0123456789abcdef';

describeEachStore('declarative config: apply', (target) => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let file: {
    servers: Array<Record<string, unknown>>;
    settings: Record<string, unknown>;
    tokens: Array<Record<string, unknown>>;
  };
  const env = { GH_DECLARATIVE_TOKEN: OPS_TOKEN };

  beforeEach(async () => {
    gw = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    process.env.MCP_SECRET_DECL_HEADER = `${SENTINEL}-from-env`;
    file = {
      servers: [
        {
          id: 'fixture',
          name: 'Fixture',
          description: 'a test server',
          transport: 'streamable-http',
          url: upstream.url,
          headers: { 'X-Api-Key': `${SENTINEL}-literal`, 'X-From-Env': { env: 'MCP_SECRET_DECL_HEADER' } },
          auth: { type: 'bearer', token: `${SENTINEL}-bearer` },
          exposure: ['team-a'],
          toolPolicy: { allow: ['echo'], blocked: ['add'] },
        },
        { id: 'local', name: 'Local', transport: 'stdio', command: 'node', args: ['server.js'], enabled: false },
      ],
      settings: { 'mcp.adminEnabled': true, 'hub.rateLimit': 120 },
      tokens: [
        { name: 'ci', role: 'agent', groups: ['team-a'], hash: sha256(CI_TOKEN) },
        { name: 'ops', role: 'operator', env: 'GH_DECLARATIVE_TOKEN' },
      ],
    };
  });
  afterEach(async () => {
    delete process.env.MCP_SECRET_DECL_HEADER;
    await upstream.close();
    await gw.close();
  });

  it('creates servers, settings and tokens, as the config principal', async () => {
    const report = await apply(gw, file, { env });
    expect(report.servers).toMatchObject({ created: ['fixture', 'local'], updated: [], unchanged: [], pruned: [] });
    expect(report.settings).toMatchObject({ updated: ['mcp.adminEnabled', 'hub.rateLimit'], unchanged: [] });
    expect(report.tokens).toMatchObject({ created: ['ci', 'ops'], updated: [], unchanged: [] });
    expect(report.servers.warnings.join('\n')).toContain('servers[0].headers.X-Api-Key is a literal secret');
    expect(report.servers.warnings.join('\n')).toContain('servers[0].auth.token is a literal secret');
    expect(report.servers.warnings.join('\n')).not.toContain(SENTINEL);

    const fixture = (await gw.request('GET', '/api/mcp/servers/fixture')).json();
    expect(fixture).toMatchObject({
      name: 'Fixture',
      description: 'a test server',
      sourceKind: 'config',
      headers: { 'X-Api-Key': { set: true }, 'X-From-Env': { env: 'MCP_SECRET_DECL_HEADER' } },
      auth: { type: 'bearer', token: { set: true } },
      exposure: ['team-a'],
      toolPolicy: { mode: 'all', allow: ['echo'], blocked: ['add'], defaultTier: 'gated' },
    });
    expect((await gw.request('GET', '/api/mcp/servers/local')).json()).toMatchObject({
      enabled: false,
      args: ['server.js'],
    });
    expect((await gw.request('GET', '/api/settings')).json().settings).toMatchObject({
      'mcp.adminEnabled': true,
      'hub.rateLimit': 120,
    });

    // The sealed and referenced values reach the upstream.
    expect((await gw.request('POST', '/api/mcp/servers/fixture/test')).json()).toMatchObject({ ok: true });
    const received = upstream.log.records.map((r) => r.headers);
    expect(received.some((h) => h['x-api-key'] === `${SENTINEL}-literal`)).toBe(true);
    expect(received.some((h) => h['x-from-env'] === `${SENTINEL}-from-env`)).toBe(true);
    expect(received.some((h) => h.authorization === `Bearer ${SENTINEL}-bearer`)).toBe(true);

    // A token given by hash authenticates with the original token; one given by env reference with the env value.
    expect((await gw.request('GET', '/info', { token: CI_TOKEN })).statusCode).toBe(200);
    expect((await gw.request('GET', '/api/mcp/servers', { token: CI_TOKEN })).statusCode).toBe(403);
    expect((await gw.request('GET', '/api/mcp/servers', { token: OPS_TOKEN })).statusCode).toBe(200);
    const tokens = (await gw.request('GET', '/api/tokens')).json().tokens;
    expect(tokens).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'ci', role: 'agent', groups: ['team-a'], source: 'config' }),
        expect.objectContaining({ name: 'ops', role: 'operator', source: 'config' }),
      ]),
    );

    const actors = await gw.gateway.store.db
      .selectFrom('audit_events')
      .select(['action', 'actor_id', 'actor_name'])
      .execute();
    const byConfig = actors.filter((a) => a.actor_id === 'config');
    expect(byConfig.map((a) => a.action)).toEqual(
      expect.arrayContaining(['server.install', 'settings.update', 'token.create']),
    );
    expect(byConfig.every((a) => a.actor_name === 'gatehouse.yaml')).toBe(true);
    for (const row of await gw.gateway.store.db.selectFrom('audit_events').select('data').execute()) {
      expect(row.data ?? '').not.toContain(SENTINEL);
    }
  });

  it('writes nothing the second time: every entry unchanged, no audit event, no policy version bump', async () => {
    await apply(gw, file, { env });
    const before = await writes(gw.gateway.store);
    const server = (await gw.request('GET', '/api/mcp/servers/fixture')).json();
    const row = await gw.gateway.registry.records.getRow('fixture');

    const again = await apply(gw, file, { env });
    expect(isNoop(again)).toBe(true);
    expect(again.servers.unchanged).toEqual(['fixture', 'local']);
    expect(again.settings.unchanged).toEqual(['mcp.adminEnabled', 'hub.rateLimit']);
    expect(again.tokens.unchanged).toEqual(['ci', 'ops']);
    expect(await writes(gw.gateway.store)).toEqual(before);
    const after = (await gw.request('GET', '/api/mcp/servers/fixture')).json();
    expect(after.policyVersion).toBe(server.policyVersion);
    expect(after.updatedAt).toBe(server.updatedAt);
    // The sealed literal was compared, not sealed again (a new seal has a fresh nonce).
    expect((await gw.gateway.registry.records.getRow('fixture')).headers).toBe(row.headers);
  });

  it('changes only what changed', async () => {
    await apply(gw, file, { env });
    const before = await writes(gw.gateway.store);
    const server = (await gw.request('GET', '/api/mcp/servers/fixture')).json();
    const row = await gw.gateway.registry.records.getRow('fixture');

    const fixture = file.servers[0] as Record<string, unknown>;
    fixture.exposure = ['team-a', 'team-b'];
    fixture.headers = { 'X-Api-Key': `${SENTINEL}-rotated`, 'X-From-Env': { env: 'MCP_SECRET_DECL_HEADER' } };
    file.settings['hub.rateLimit'] = 60;
    const report = await apply(gw, file, { env });
    expect(report.servers).toMatchObject({ updated: ['fixture'], unchanged: ['local'], created: [] });
    expect(report.settings).toMatchObject({ updated: ['hub.rateLimit'], unchanged: ['mcp.adminEnabled'] });
    expect(report.tokens.unchanged).toEqual(['ci', 'ops']);

    const events = await gw.gateway.store.db
      .selectFrom('audit_events')
      .select(['action', 'data'])
      .where('id', '>', before.audit)
      .orderBy('id')
      .execute();
    expect(events.map((e) => e.action)).toEqual(['settings.update', 'server.configure', 'server.exposure']);
    // Only the rotated header was sent: its name, never its value.
    expect(JSON.parse(events[1]?.data ?? '{}')).toEqual({ fields: { headers: ['X-Api-Key'] } });
    const after = (await gw.request('GET', '/api/mcp/servers/fixture')).json();
    expect(after.policyVersion).toBe(server.policyVersion + 1);
    const headers = JSON.parse((await gw.gateway.registry.records.getRow('fixture')).headers);
    expect(headers['X-From-Env']).toEqual(JSON.parse(row.headers)['X-From-Env']);
    expect(headers['X-Api-Key']).not.toEqual(JSON.parse(row.headers)['X-Api-Key']);
    expect(after.toolPolicy).toEqual(server.toolPolicy);
  });

  it('removes a header, manages only the fields an entry states, and refuses a transport change', async () => {
    await apply(gw, file, { env });
    const fixture = file.servers[0] as Record<string, unknown>;
    fixture.headers = { 'X-From-Env': { env: 'MCP_SECRET_DECL_HEADER' } };
    delete fixture.exposure;
    delete fixture.toolPolicy;
    delete fixture.auth;
    const report = await apply(gw, file, { env });
    expect(report.servers.updated).toEqual(['fixture']);
    const after = (await gw.request('GET', '/api/mcp/servers/fixture')).json();
    expect(Object.keys(after.headers)).toEqual(['X-From-Env']);
    expect(after).toMatchObject({ exposure: ['team-a'], auth: { type: 'bearer', token: { set: true } } });

    file.servers[1] = { id: 'local', name: 'Local', transport: 'streamable-http', url: upstream.url };
    const error = await rejection(apply(gw, file, { env }));
    expect(error.code).toBe('conflict');
    expect(error.message).toContain('gatehouse.yaml: servers[1].transport');
  });

  it('keeps what the file omits without prune, and removes it with prune (never the bootstrap admin)', async () => {
    await apply(gw, file, { env });
    const manual = await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'manual' } });
    expect(manual.statusCode).toBe(201);
    const apiToken = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'laptop' } })).json();
    const smaller = { ...file, servers: [file.servers[0]], tokens: [file.tokens[0]] };

    const kept = await apply(gw, smaller, { env });
    expect(kept.servers).toMatchObject({ unchanged: ['fixture'], pruned: [] });
    expect(kept.tokens).toMatchObject({ unchanged: ['ci'], pruned: [] });
    expect((await gw.request('GET', '/api/mcp/servers/local')).statusCode).toBe(200);
    expect((await gw.request('GET', '/api/mcp/servers', { token: OPS_TOKEN })).statusCode).toBe(200);

    // A file without a tokens section manages no token, even with prune.
    const serversOnly = await apply(gw, { servers: smaller.servers }, { prune: true });
    expect(serversOnly.servers.pruned.sort()).toEqual(['local', 'manual']);
    expect(serversOnly.tokens.pruned).toEqual([]);
    expect((await gw.request('GET', '/api/mcp/servers/manual')).statusCode).toBe(404);
    expect((await gw.request('GET', '/api/mcp/servers/local')).statusCode).toBe(404);
    expect((await gw.request('GET', '/api/mcp/servers', { token: OPS_TOKEN })).statusCode).toBe(200);

    const pruned = await apply(gw, smaller, { env, prune: true });
    expect(pruned.tokens.pruned).toEqual(['ops']);
    expect((await gw.request('GET', '/api/mcp/servers', { token: OPS_TOKEN })).statusCode).toBe(401);
    expect((await gw.request('GET', '/info', { token: apiToken.token })).statusCode).toBe(200);
    expect((await gw.request('GET', '/info', { token: TEST_ADMIN_TOKEN })).statusCode).toBe(200);
    expect((await gw.request('GET', '/info', { token: CI_TOKEN })).statusCode).toBe(200);
  });

  it('rotates a token: a new hash under the same name revokes the old token', async () => {
    await apply(gw, file, { env });
    const rotated = 'gh_declarative-ci-rotated-0123456789abcdef';
    (file.tokens[0] as Record<string, unknown>).hash = sha256(rotated);
    (file.tokens[0] as Record<string, unknown>).groups = ['team-b'];
    const report = await apply(gw, file, { env });
    expect(report.tokens).toMatchObject({ updated: ['ci'], unchanged: ['ops'], created: [] });
    expect((await gw.request('GET', '/info', { token: CI_TOKEN })).statusCode).toBe(401);
    expect((await gw.request('GET', '/info', { token: rotated })).statusCode).toBe(200);

    // Groups alone change in place.
    (file.tokens[0] as Record<string, unknown>).groups = ['team-c'];
    expect((await apply(gw, file, { env })).tokens.updated).toEqual(['ci']);
    const ci = (await gw.request('GET', '/api/tokens')).json().tokens.filter((t: { name: string }) => t.name === 'ci');
    expect(ci).toEqual([expect.objectContaining({ groups: ['team-c'] })]);
  });

  it('refuses a token held by another record, and a revoked one, before writing anything', async () => {
    const taken = { ...file, tokens: [{ name: 'sneaky', role: 'agent', hash: sha256(TEST_ADMIN_TOKEN) }] };
    const before = await writes(gw.gateway.store);
    const error: GatehouseError = await rejection(apply(gw, taken));
    expect(error.code).toBe('conflict');
    expect(error.message).toContain('tokens[0]: this token is already registered as "admin" (bootstrap)');
    expect(await writes(gw.gateway.store)).toEqual(before);
    expect((await gw.request('GET', '/api/mcp/servers')).json().total).toBe(0);

    await apply(gw, file, { env });
    await apply(gw, { tokens: [file.tokens[1]] }, { env, prune: true }); // revokes ci
    expect((await gw.request('GET', '/info', { token: CI_TOKEN })).statusCode).toBe(401);
    const revived = await rejection(apply(gw, { tokens: [file.tokens[0]] }));
    expect(revived.message).toContain('tokens[0]: this token cannot be registered');
    expect((await gw.request('GET', '/info', { token: CI_TOKEN })).statusCode).toBe(401);
  });
});
