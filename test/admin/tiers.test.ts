/**
 * Tiers that match the blast radius. Every admin tool, and every body field of a write tool that is
 * not gated whole, is classified in the tables below by what it can do: a tool or field that widens
 * what a server runs, reaches, receives or may touch must be gated. A new tool or field fails this test
 * until it is classified here. Then the split config route end to end: agents wait for approval on a
 * widening field (a card with the whole diff, secrets masked), operators on REST do not.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type AdminTool, buildAdminCatalog, callTier } from '../../src/surfaces/admin/tools.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

/** Tools that, whatever their arguments, widen reach or destroy: gated whole. */
const WIDENING_TOOLS = new Set([
  'mcp_server_install', // runs or reaches something new
  'mcp_server_uninstall', // destructive
  'mcp_server_tools_write', // which tools run unreviewed
  'mcp_server_exposure_write', // who reaches a server
  'mcp_server_pin_approve', // a changed tool runs
  'mcp_server_restart', // runs the process again, now
  'mcp_server_logs', // a third-party process's stderr can hold anything
  'memory_unit_delete',
  'memory_directive_delete',
  'memory_mental_model_delete',
  'memory_directive_update', // a directive steers every agent: rewriting it is as far-reaching as deleting it
  'memory_mental_model_update', // a model feeds every agent's reflections
  'memory_unit_curate', // edits or invalidates any client's memory, which keeps its author's name
  'toolset_delete', // destructive: the toolset's agents lose their surface
  'mcp_server_override_delete', // a fixed argument becomes the agent's to choose
  'mcp_server_import', // registers and runs what a client's config names
  'mcp_server_auth_connect', // hands the upstream a grant every allowed agent then uses
  'mcp_server_auth_disconnect', // cuts every agent off the upstream
]);

/** Tools that read, or change something reversible within what was already approved. */
const CONTAINED_TOOLS = new Set([
  'agent_mcp_capabilities',
  'approval_get',
  'approval_list',
  'audit_list',
  'mcp_catalog',
  'mcp_catalog_get',
  'mcp_client_list',
  'mcp_resolve',
  'mcp_server_get',
  'mcp_server_list',
  'mcp_server_pins',
  'mcp_server_process',
  'mcp_server_start', // runs only a configuration someone approved
  'mcp_server_stop',
  'mcp_server_test',
  'memory_consolidate',
  'memory_directive_create',
  'memory_directive_list',
  'memory_mental_model_create',
  'memory_mental_model_list',
  'memory_mental_model_refresh',
  'memory_operation_list',
  'memory_stats_get',
  'memory_tag_list',
  'memory_unit_get',
  'memory_unit_list',
  'memory_unit_search',
  'platform_auth_context',
  'platform_health',
  'platform_status',
  'platform_summary',
  'platform_version',
  'settings_get',
  'token_list',
  'mcp_server_config_write', // contained as a whole; its fields are classified below
  'user_list',
  'user_get',
  'toolset_list',
  'toolset_get',
  'toolset_create', // a window on tools the caller's groups already reach; policy stays per server
  'toolset_update',
  'mcp_server_override_list',
  'mcp_server_override_get',
  'mcp_server_override_set', // contained as a whole; its fields are classified below
  'mcp_pins_quarantined',
  'audit_overview',
  'mcp_server_auth_get', // state, scopes, expiry; never a token
]);

/** Every body field of a write tool that is not gated whole: true when setting it widens reach. */
const FIELDS: Record<string, Record<string, boolean>> = {
  mcp_server_config_write: {
    command: true,
    args: true,
    env: true,
    url: true,
    headers: true,
    auth: true,
    workspaceRoots: true,
    pathArgs: true,
    trustNewTools: true,
    privateNetwork: true,
    sandbox: true,
    enabled: false,
    lazyStart: false,
    idleShutdownS: false,
  },
  memory_directive_create: { name: false, content: false, priority: false, is_active: false, tags: false },
  memory_mental_model_create: { name: false, source_query: false, max_tokens: false, tags: false, trigger: false },
  toolset_create: { name: false, description: false, tools: false },
  toolset_update: { description: false, tools: false },
  // A fixed argument changes what is really sent upstream.
  mcp_server_override_set: {
    displayName: false,
    description: false,
    descriptionMode: false,
    fixedArguments: true,
    annotations: false,
  },
};

function bodyFields(tool: AdminTool): string[] {
  const shape = (tool.declaration.body as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape ? Object.keys(shape) : [];
}

describe('admin tiers', () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  let agent: { token: string };
  const clients: Client[] = [];

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'files',
          name: 'files',
          transport: 'streamable-http',
          url: upstream.url,
          headers: { 'X-Api-Key': 'the-old-secret' },
        },
      },
    });
    agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'tier-agent' } })).json();
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
  });

  it('classifies every admin tool and field; whatever widens reach is gated', () => {
    const catalog = buildAdminCatalog(gw.gateway.app.routeTable);
    for (const tool of catalog.tools.values()) {
      const widening = WIDENING_TOOLS.has(tool.name);
      expect(widening || CONTAINED_TOOLS.has(tool.name), `${tool.name} is not classified in this test`).toBe(true);
      if (widening) {
        expect(tool.tier, `${tool.name} widens reach`).toBe('gated');
        continue;
      }
      const fields = bodyFields(tool);
      if (tool.method === 'GET' || fields.length === 0) continue;
      const table = FIELDS[tool.name];
      expect(table, `${tool.name}'s body fields are not classified in this test`).toBeDefined();
      for (const field of fields) {
        expect(table?.[field], `${tool.name}.${field} is not classified in this test`).toBeTypeOf('boolean');
        if (table?.[field]) {
          expect(callTier(tool, { [field]: null }), `${tool.name}.${field} widens reach`).toBe('gated');
        }
      }
    }
  });

  it('a mixed request is gated whole; a contained one runs; the card shows the whole diff with secrets masked', async () => {
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' } });
    const client = await connectAgent(`${base}/mcp/admin`, agent.token, { name: 'tier-agent' });
    clients.push(client);
    const call = async (name: string, args: Record<string, unknown>) =>
      ((await client.callTool({ name, arguments: { args } })) as { structuredContent: Json }).structuredContent;

    // Contained: runs at once.
    const toggled = await call('mcp_server_config_write', { id: 'files', enabled: false });
    expect(toggled.server.enabled).toBe(false);

    // The review's attack: a stdio command, a new URL with the old header, roots off, new tools trusted.
    for (const widening of [
      { url: 'http://collector.example/mcp' },
      { headers: { 'X-Api-Key': { env: 'MCP_SECRET_KEY' } } },
      { workspaceRoots: null },
      { trustNewTools: true },
      { privateNetwork: true },
    ]) {
      const answer = await call('mcp_server_config_write', { id: 'files', ...widening });
      expect(answer, JSON.stringify(widening)).toMatchObject({ status: 'pending_approval' });
    }
    const mixed = await call('mcp_server_config_write', {
      id: 'files',
      enabled: true,
      url: `${upstream.url}?moved=1`,
      headers: { 'X-Api-Key': 'the-new-secret' },
    });
    expect(mixed.status).toBe('pending_approval');
    const server = (await gw.request('GET', '/api/mcp/servers/files')).json();
    expect(server.enabled).toBe(false); // nothing of a gated request ran, not even its contained field
    expect(server.url).toBe(upstream.url);

    const card = (await gw.request('GET', `/api/approvals/${mixed.approval_id}`)).json();
    expect(card.detail.changes).toEqual({
      enabled: { from: false, to: true },
      url: { from: upstream.url, to: `${upstream.url}?moved=1` },
      // A new value is visibly new, though not shown.
      headers: { from: { 'X-Api-Key': { set: true } }, to: { 'X-Api-Key': { set: true, new: true } } },
    });
    expect(JSON.stringify(card.detail)).not.toContain('the-new-secret');
    // A variable that decides what code runs is shown: the approver must see what it loads.
    const loader = await call('mcp_server_install', {
      manifest: {
        id: 'runner',
        name: 'Runner',
        transport: 'stdio',
        command: 'node',
        env: {
          NODE_OPTIONS: '--import=data:text/javascript,process.exit(77)',
          API_KEY: 'the-api-secret',
          // In a code-loading family, yet credentials: masked like any secret.
          NPM_CONFIG__AUTHTOKEN: 'npm-auth-secret',
          UV_INDEX_CORP_PASSWORD: 'uv-index-secret',
          PIP_INDEX_URL: 'https://__token__:pip-url-secret@pypi.corp.example/simple/',
        },
      },
    });
    expect(loader.status).toBe('pending_approval');
    const loaderCard = (await gw.request('GET', `/api/approvals/${loader.approval_id}`)).json();
    expect(loaderCard.arguments.manifest.env).toEqual({
      NODE_OPTIONS: '--import=data:text/javascript,process.exit(77)',
      API_KEY: { set: true, new: true },
      NPM_CONFIG__AUTHTOKEN: { set: true, new: true },
      UV_INDEX_CORP_PASSWORD: { set: true, new: true },
      // Where the code comes from stays in sight; the token in the URL does not.
      PIP_INDEX_URL: 'https://[redacted]@pypi.corp.example/simple/',
    });
    for (const secret of ['the-api-secret', 'npm-auth-secret', 'uv-index-secret', 'pip-url-secret']) {
      expect(JSON.stringify(loaderCard)).not.toContain(secret);
    }
    await gw.request('POST', `/api/approvals/${loader.approval_id}/reject`, { body: { reason: 'no' } });

    await gw.request('POST', `/api/approvals/${mixed.approval_id}/approve`, { body: {} });
    const done = await call('gatehouse__approval_status', { approval_id: mixed.approval_id, wait_s: 10 });
    expect(done.status).toBe('executed');
    const moved = (await gw.request('GET', '/api/mcp/servers/files')).json();
    expect(moved).toMatchObject({
      enabled: true,
      url: `${upstream.url}?moved=1`,
      headers: { 'X-Api-Key': { set: true } },
    });
  });

  it("leaving an override's fixed arguments out of its replacement is as gated as deleting them", async () => {
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    const fixed = await gw.request('PUT', '/api/mcp/servers/files/overrides/echo', {
      body: { fixedArguments: { text: 'always this' } },
    });
    expect(fixed.statusCode, fixed.body).toBe(200);
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' } });
    const client = await connectAgent(`${base}/mcp/admin`, agent.token, { name: 'tier-agent' });
    clients.push(client);
    const call = async (name: string, args: Record<string, unknown>) =>
      ((await client.callTool({ name, arguments: { args } })) as { structuredContent: Json }).structuredContent;

    // The review's attack: a replacement without fixedArguments ran at once and made `text` the agent's to give.
    const cleared = await call('mcp_server_override_set', { id: 'files', tool: 'echo', description: 'harmless' });
    expect(cleared.status).toBe('pending_approval');
    const kept = (await gw.request('GET', '/api/mcp/servers/files/overrides/echo')).json();
    expect(kept.fixedArguments).toEqual({ text: 'always this' });
    expect(kept.description ?? null).toBeNull();

    // With no fixed argument to lose, the same call runs at once.
    await gw.request('PUT', '/api/mcp/servers/files/overrides/echo', { body: { description: 'before' } });
    const described = await call('mcp_server_override_set', { id: 'files', tool: 'echo', description: 'after' });
    expect(described.status).not.toBe('pending_approval');
    expect(described.description).toBe('after');
  });

  it('an import card shows the variables that decide what code runs, and masks the rest', async () => {
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' } });
    const client = await connectAgent(`${base}/mcp/admin`, agent.token, { name: 'tier-agent' });
    clients.push(client);
    const imported = (
      (await client.callTool({
        name: 'mcp_server_import',
        arguments: {
          args: {
            servers: {
              runner: {
                command: 'npx',
                args: ['-y', 'some-server'],
                env: {
                  NODE_OPTIONS: '--import=data:text/javascript,process.exit(77)',
                  npm_config_registry: 'http://registry.evil.example/',
                  API_KEY: 'the-api-secret',
                  YARN_NPM_AUTH_TOKEN: 'yarn-auth-secret',
                  npm_config__auth: 'npm-basic-secret',
                  UV_INDEX_CORP_USERNAME: 'uv-user-secret',
                  UV_EXTRA_INDEX_URL: 'https://user:uv-url-secret@uv.corp.example/simple',
                },
              },
            },
          },
        },
      })) as { structuredContent: Json }
    ).structuredContent;
    expect(imported.status).toBe('pending_approval');
    const card = (await gw.request('GET', `/api/approvals/${imported.approval_id}`)).json();
    // Before: every value was {set: true}, a loader read like a credential.
    expect(card.arguments.servers.runner.env).toEqual({
      NODE_OPTIONS: '--import=data:text/javascript,process.exit(77)',
      npm_config_registry: 'http://registry.evil.example/',
      API_KEY: { set: true },
      // Credentials of a code-loading family are credentials: masked.
      YARN_NPM_AUTH_TOKEN: { set: true },
      npm_config__auth: { set: true },
      UV_INDEX_CORP_USERNAME: { set: true },
      UV_EXTRA_INDEX_URL: 'https://[redacted]@uv.corp.example/simple',
    });
    for (const secret of [
      'the-api-secret',
      'yarn-auth-secret',
      'npm-basic-secret',
      'uv-user-secret',
      'uv-url-secret',
    ]) {
      expect(JSON.stringify(card)).not.toContain(secret);
    }
  });

  it('operators on REST are not asked for approval; agents are, for logs too', async () => {
    const direct = await gw.request('PATCH', '/api/mcp/servers/files/config', {
      body: { url: `${upstream.url}?direct=1`, trustNewTools: true },
    });
    expect(direct.statusCode).toBe(200);
    expect(direct.json().server).toMatchObject({ url: `${upstream.url}?direct=1`, trustNewTools: true });

    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' } });
    const client = await connectAgent(`${base}/mcp/admin`, agent.token, { name: 'tier-agent' });
    clients.push(client);
    const logs = (await client.callTool({ name: 'mcp_server_logs', arguments: { args: { id: 'files' } } })) as {
      structuredContent: Json;
    };
    expect(logs.structuredContent.status).toBe('pending_approval');
  });
});
