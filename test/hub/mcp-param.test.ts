/**
 * `Mcp-Param-*` headers (SEP-2243) through the hub, both directions: the hub checks the headers agents
 * send against the tool's `x-mcp-header` arguments (HTTP 400, JSON-RPC -32020 on a missing, undecodable
 * or disagreeing one, as the SDK's server answers), and sends them on its own calls to a 2026-07-28
 * upstream — an SDK v2 server, which refuses a call without them — on the direct path and on the SDK
 * client's path alike. A real gateway on loopback, an SDK v2 upstream on 127.0.0.2, SDK v2 agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import { fromJsonSchema, type McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkParamHeaders, encodeParamValue, paramHeadersFor } from '../../src/upstream/param-headers.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'raw-agent', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

const ROUTE_SCHEMA = {
  type: 'object',
  properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' },
    priority: { type: 'integer', 'x-mcp-header': 'Priority' },
    query: { type: 'string' },
  },
};

function register(server: McpServer): void {
  server.registerTool(
    'route',
    {
      description: 'Routes by region.',
      inputSchema: fromJsonSchema<{ region?: string; priority?: number; query?: string }>(ROUTE_SCHEMA as never),
    },
    async ({ region, priority }) => ({
      content: [{ type: 'text' as const, text: `region=${region ?? '-'} priority=${priority ?? '-'}` }],
    }),
  );
  // An annotation on an object is invalid: a client must leave the tool out (and so never call it).
  server.registerTool(
    'bad_route',
    {
      description: 'Invalid x-mcp-header.',
      inputSchema: fromJsonSchema<{ where?: object }>({
        type: 'object',
        properties: { where: { type: 'object', 'x-mcp-header': 'Where' } },
      } as never),
    },
    async () => ({ content: [{ type: 'text' as const, text: 'should not be reached' }] }),
  );
}

describe('Mcp-Param headers (SEP-2243) through the hub', { timeout: 60_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  let token: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'geo' } })).statusCode).toBe(
      201,
    );
    const policy = await gw.request('PATCH', '/api/mcp/servers/geo/tools', {
      body: { mode: 'all', allow: ['route', 'bad_route'], defaultTier: 'blocked' },
    });
    expect(policy.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/geo/test')).json().ok).toBe(true);
    token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'router' } })).json().token;
    base = await gw.listen();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await upstream?.close();
    await gw?.close();
  });

  /** A raw 2026-07-28 tools/call to the hub with the standard headers right and `extra` headers added. */
  const rawCall = async (path: string, name: string, args: Record<string, unknown>, extra: Record<string, string>) => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': name,
        ...extra,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name, arguments: args, _meta: ENVELOPE },
      }),
    });
    const text = await response.text();
    const json = text.startsWith('{') ? JSON.parse(text) : JSON.parse(text.split('data: ')[1] ?? 'null');
    return { status: response.status, body: json as { error?: { code: number; message: string }; result?: unknown } };
  };

  const lastUpstreamCall = () => upstream.log.withMethod('tools/call').at(-1)?.headers ?? {};

  it('lists the x-mcp-header annotations to agents unchanged; a tool with an invalid one is left out', async () => {
    const agent = await connectAgent(`${base}/mcp`, token, { era: 'modern' });
    clients.push(agent);
    const listed = (await agent.listTools()).tools;
    const tool = listed.find((t) => t.name === 'geo__route');
    // Gatehouse, as the upstream's client, excluded it at the handshake (the SDK v2 client's SEP-2243 MUST).
    const { discoveredTools } = (await gw.request('GET', '/api/mcp/servers/geo')).json();
    expect(discoveredTools.map((t: { name: string }) => t.name).sort()).toEqual(['echo', 'route']);
    expect(listed.map((t) => t.name)).not.toContain('geo__bad_route');
    expect(tool?.inputSchema.properties).toMatchObject({
      region: { 'x-mcp-header': 'Region' },
      priority: { 'x-mcp-header': 'Priority' },
    });
  });

  it('an SDK v2 agent mirrors the headers, the hub accepts them and sends them on to the upstream (direct path)', async () => {
    const agent = await connectAgent(`${base}/mcp`, token, { era: 'modern' });
    clients.push(agent);
    await agent.listTools();
    const result = await agent.callTool({
      name: 'geo__route',
      arguments: { region: 'eu-west 1 ', priority: 3, query: 'q' },
    });
    expect(result.isError).toBeFalsy();
    expect(result.content).toEqual([{ type: 'text', text: 'region=eu-west 1  priority=3' }]);
    const headers = lastUpstreamCall();
    // A value with trailing whitespace travels in the Base64 sentinel; an integer in decimal; unannotated never.
    expect(headers['mcp-param-region']).toBe(encodeParamValue('eu-west 1 '));
    expect(headers['mcp-param-region']).toMatch(/^=\?base64\?/);
    expect(headers['mcp-param-priority']).toBe('3');
    expect(headers['mcp-param-query']).toBeUndefined();
  });

  it('sends them on the SDK client path too (a call with progress), and on /mcp/s/{id}', async () => {
    const agent = await connectAgent(`${base}/mcp/s/geo`, token, { era: 'modern' });
    clients.push(agent);
    await agent.listTools();
    const result = await agent.callTool(
      { name: 'route', arguments: { region: 'ap-south', priority: 9 } },
      {
        onprogress: () => {},
      },
    );
    expect(result.content).toEqual([{ type: 'text', text: 'region=ap-south priority=9' }]);
    const headers = lastUpstreamCall();
    expect(headers['mcp-param-region']).toBe('ap-south');
    expect(headers['mcp-param-priority']).toBe('9');
  });

  it('a 2025-era agent needs no headers (the hub still sends them to the 2026-07-28 upstream)', async () => {
    const agent = await connectAgent(`${base}/mcp`, token, { era: 'legacy' });
    clients.push(agent);
    const result = await agent.callTool({ name: 'geo__route', arguments: { region: 'us', priority: 1 } });
    expect(result.content).toEqual([{ type: 'text', text: 'region=us priority=1' }]);
    expect(lastUpstreamCall()['mcp-param-region']).toBe('us');
  });

  it('refuses a missing, disagreeing or undecodable header with 400 / -32020, before the upstream is asked', async () => {
    const calls = upstream.log.count('tools/call');
    const missing = await rawCall('/mcp', 'geo__route', { region: 'eu' }, {});
    expect(missing.status).toBe(400);
    expect(missing.body.error?.code).toBe(-32020);
    expect(missing.body.error?.message).toContain('Mcp-Param-Region');

    const wrong = await rawCall('/mcp', 'geo__route', { region: 'eu' }, { 'mcp-param-region': 'us' });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error?.code).toBe(-32020);

    const badBase64 = await rawCall(
      '/mcp/s/geo',
      'route',
      { region: 'Hello' },
      { 'Mcp-Param-Region': '=?base64?SGVsbG8?=' },
    );
    expect(badBase64.status).toBe(400);
    expect(badBase64.body.error?.code).toBe(-32020);

    const wrongNumber = await rawCall('/mcp', 'geo__route', { priority: 2 }, { 'mcp-param-priority': '3' });
    expect(wrongNumber.status).toBe(400);
    expect(upstream.log.count('tools/call')).toBe(calls);
  });

  it('accepts a matching header (Base64 or plain, any name case), and none for an absent argument', async () => {
    const base64 = await rawCall(
      '/mcp',
      'geo__route',
      { region: 'Hello' },
      { 'MCP-PARAM-REGION': '=?base64?SGVsbG8=?=' },
    );
    expect(base64.status).toBe(200);
    expect(base64.body.result).toMatchObject({ content: [{ type: 'text', text: 'region=Hello priority=-' }] });
    const numeric = await rawCall('/mcp', 'geo__route', { priority: 42 }, { 'mcp-param-priority': '42.0' });
    expect(numeric.status).toBe(200);
    const none = await rawCall('/mcp', 'geo__route', { query: 'x' }, {});
    expect(none.status).toBe(200);
    // A literal that only looks like Base64 is a literal.
    const literal = await rawCall('/mcp', 'geo__route', { region: 'SGVsbG8=' }, { 'mcp-param-region': 'SGVsbG8=' });
    expect(literal.status).toBe(200);
  });
});

describe('Mcp-Param rules (the SDK v2 ones)', () => {
  it('mirrors only valid declarations, and checks as a server must', () => {
    expect(paramHeadersFor(ROUTE_SCHEMA, { region: 'eu', priority: 5, query: 'q' })).toEqual({
      'Mcp-Param-Region': 'eu',
      'Mcp-Param-Priority': '5',
    });
    expect(paramHeadersFor(ROUTE_SCHEMA, { region: null })).toEqual({});
    expect(paramHeadersFor(ROUTE_SCHEMA, { region: 'héllo' })).toEqual({
      'Mcp-Param-Region': `=?base64?${Buffer.from('héllo').toString('base64')}?=`,
    });
    // An annotation under anyOf (not reachable through properties alone) invalidates the tool: nothing is sent.
    const unreachable = { type: 'object', anyOf: [{ properties: { a: { type: 'string', 'x-mcp-header': 'A' } } }] };
    expect(paramHeadersFor(unreachable, { a: 'x' })).toEqual({});
    // Two names equal but for case: invalid too.
    const duplicate = {
      type: 'object',
      properties: { a: { type: 'string', 'x-mcp-header': 'Name' }, b: { type: 'string', 'x-mcp-header': 'name' } },
    };
    expect(paramHeadersFor(duplicate, { a: 'x', b: 'y' })).toEqual({});
    const header = (headers: Record<string, string>) => (name: string) => headers[name];
    expect(checkParamHeaders(ROUTE_SCHEMA, { region: 'eu' }, header({ 'mcp-param-region': ' eu ' }))).toBeUndefined();
    expect(checkParamHeaders(ROUTE_SCHEMA, { region: 'eu' }, header({}))?.cell).toBe('param-header-missing');
    expect(checkParamHeaders(ROUTE_SCHEMA, {}, header({ 'mcp-param-region': 'ignored' }))).toBeUndefined();
  });
});
