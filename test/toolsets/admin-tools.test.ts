/**
 * Toolsets and overrides as `/mcp/admin` tools (generated from their REST routes): creating a toolset and
 * renaming a tool run at once; fixing an argument or deleting a toolset waits for an operator, on a card
 * whose diff shows the override's fields from their current values.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

describe('toolsets and overrides on /mcp/admin', () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let client: Client;

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'calc' } });
    expect((await gw.request('POST', '/api/mcp/servers/calc/test')).json().ok).toBe(true);
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' } });
    const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'curator' } })).json();
    client = await connectAgent(`${await gw.listen()}/mcp/admin`, agent.token, { name: 'curator' });
  });
  afterEach(async () => {
    await client.close().catch(() => {});
    await upstream.close();
    await gw.close();
  });

  const call = async (name: string, args: Record<string, unknown>) =>
    ((await client.callTool({ name, arguments: { args } })) as { structuredContent: Json }).structuredContent;

  it('runs contained changes at once and gates fixed arguments and deletion', async () => {
    const created = await call('toolset_create', { name: 'maths', tools: [{ server: 'calc', tool: 'add' }] });
    expect(created).toMatchObject({ name: 'maths', available: 1 });
    expect(await call('toolset_get', { name: 'maths' })).toMatchObject({ tools: [{ state: 'available' }] });

    const renamed = await call('mcp_server_override_set', { id: 'calc', tool: 'add', displayName: 'plus' });
    expect(renamed).toMatchObject({ state: 'active', exposedName: 'plus' });

    const fixing = await call('mcp_server_override_set', {
      id: 'calc',
      tool: 'add',
      displayName: 'sum',
      fixedArguments: { b: 1 },
    });
    expect(fixing.status).toBe('pending_approval');
    const card = (await gw.request('GET', `/api/approvals/${fixing.approval_id}`)).json();
    expect(card.detail.changes).toEqual({
      displayName: { from: 'plus', to: 'sum' },
      fixedArguments: { from: null, to: { b: 1 } },
    });
    // Nothing of it ran before the approval.
    expect((await gw.request('GET', '/api/mcp/servers/calc/overrides/add')).json()).toMatchObject({
      displayName: 'plus',
    });

    const deleting = await call('toolset_delete', { name: 'maths' });
    expect(deleting.status).toBe('pending_approval');
    expect((await gw.request('GET', '/api/toolsets/maths')).statusCode).toBe(200);
  });
});
