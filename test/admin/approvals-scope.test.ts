/**
 * The approvals read scope on /mcp/admin: an agent reads its own approvals whole and other agents'
 * summarised (tool, times, state) — never their arguments.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const SECRET_ARG = 987654321;

describe('approvals read scope on the admin surface', () => {
  let gw: TestGateway;
  let base: string;
  let upstream: McpFixture;
  const clients: Client[] = [];

  const agentToken = async (name: string) =>
    (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name } })).json() as {
      id: string;
      token: string;
    };
  const connect = async (path: string, token: string) => {
    const client = await connectAgent(`${base}${path}`, token);
    clients.push(client);
    return client;
  };
  const gated = async (client: Client, a: number) =>
    ((await client.callTool({ name: 'files__add', arguments: { a, b: 1 } })).structuredContent as Json)
      .approval_id as string;
  const adminTool = async (client: Client, name: string, args: Json) =>
    (await client.callTool({ name, arguments: { args } })).structuredContent as Json;

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } });
    await gw.request('PATCH', '/api/mcp/servers/files/tools', { body: { mode: 'all', gated: ['add'] } });
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    await gw.request('PATCH', '/api/settings', {
      body: { 'mcp.adminEnabled': true, 'mcp.scope.approvals': 'read' },
    });
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
  });

  it("shows an agent its own approvals' arguments and only a summary of others'", async () => {
    const reader = await agentToken('reader');
    const other = await agentToken('other');
    const mine = await gated(await connect('/mcp', reader.token), 5);
    const theirs = await gated(await connect('/mcp', other.token), SECRET_ARG);
    const admin = await connect('/mcp/admin', reader.token);

    const listed = await adminTool(admin, 'approval_list', {});
    const byId = new Map((listed.approvals as Json[]).map((a) => [a.id, a]));
    expect(byId.get(mine)).toMatchObject({ arguments: { a: 5, b: 1 }, requester: { id: reader.id } });
    expect(byId.get(theirs)).toMatchObject({ id: theirs, tool: 'add', status: 'pending', summarised: true });
    for (const hidden of ['arguments', 'argsHash', 'detail', 'requester', 'reason', 'result', 'error']) {
      expect(byId.get(theirs)).not.toHaveProperty(hidden);
    }
    expect(JSON.stringify(byId.get(theirs))).not.toContain(String(SECRET_ARG));

    const one = await adminTool(admin, 'approval_get', { id: theirs });
    expect(one).toMatchObject({ id: theirs, summarised: true });
    expect(JSON.stringify(one)).not.toContain(String(SECRET_ARG));
    expect(await adminTool(admin, 'approval_get', { id: mine })).toMatchObject({ arguments: { a: 5, b: 1 } });

    // Operators still read every card whole.
    expect((await gw.request('GET', `/api/approvals/${theirs}`)).json().arguments).toEqual({ a: SECRET_ARG, b: 1 });
  });
});
