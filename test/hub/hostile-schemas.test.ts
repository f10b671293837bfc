/**
 * Hostile upstream schemas cannot hold the gateway: a catastrophic-backtracking `pattern` runs on RE2
 * (so the call is refused at once and `/healthz` stays live), a pattern RE2 cannot express quarantines its
 * tool as `unsafe_schema` (counted on /metrics, not approvable), and `uniqueItems` finds JSON-equal
 * duplicates in linear time and refuses, typed, an array too large to check within the work budget. A real gateway, an SDK-built upstream on 127.0.0.2, SDK agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import { fromJsonSchema, type JsonSchemaType, type McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

type Json = Record<string, unknown>;
const structured = (result: unknown) => (result as { structuredContent: Json }).structuredContent;

const SCHEMAS: Record<string, Json> = {
  // 2^n backtracking paths on a native engine: 30 × "a" then "b" holds its loop for some 20 s.
  redos: { type: 'object', properties: { text: { type: 'string', pattern: '^(a|a)*$' } } },
  // Lookahead and backreference: RE2 cannot express either.
  lookahead: { type: 'object', properties: { text: { type: 'string', pattern: '^(?=a)\\w+$' } } },
  backref: {
    type: 'object',
    properties: { opts: { type: 'object', patternProperties: { '^(x)\\1$': { type: 'string' } } } },
  },
  unique: { type: 'object', properties: { list: { type: 'array', uniqueItems: true } } },
};

describe('hostile upstream schemas', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(): Promise<{ gw: TestGateway; base: string; agent: Client; upstream: McpFixture }> {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const register = (server: McpServer) => {
      for (const [name, schema] of Object.entries(SCHEMAS)) {
        server.registerTool(
          name,
          { description: `schema ${name}`, inputSchema: fromJsonSchema(schema as JsonSchemaType) },
          async () => ({ content: [{ type: 'text', text: `${name} ran` }] }),
        );
      }
    };
    const upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    cleanups.push(() => upstream.close());
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBe(201);
    await gw.request('PATCH', '/api/mcp/servers/files/tools', {
      body: { mode: 'all', allow: ['echo', ...Object.keys(SCHEMAS)], defaultTier: 'blocked' },
    });
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    const token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-one' } })).json();
    const base = await gw.listen();
    const agent = await connectAgent(`${base}/mcp`, token.token, { era: 'modern' });
    cleanups.push(() => agent.close());
    return { gw, base, agent, upstream };
  }

  it('runs a backtracking pattern in linear time: the call is refused and /healthz answers meanwhile', async () => {
    const s = await setup();
    const hostile = `${'a'.repeat(30)}b`;
    const [refused, health] = await Promise.all([
      s.agent.callTool({ name: 'files__redos', arguments: { text: hostile } }),
      fetch(`${s.base}/healthz`),
    ]);
    expect(health.status).toBe(200);
    expect(refused.isError).toBe(true);
    expect(structured(refused)).toMatchObject({ status: 'error', error: { code: 'tool.invalid_arguments' } });
    // The same pattern still accepts what it should.
    const ok = await s.agent.callTool({ name: 'files__redos', arguments: { text: 'aaaa' } });
    expect(ok.content).toEqual([{ type: 'text', text: 'redos ran' }]);
    // A native engine holds the loop far past this bound (so the test fails by its timeout, not a clock).
  }, 10_000);

  it('quarantines a tool whose pattern RE2 cannot express (unsafe_schema), counts it, and refuses its approval', async () => {
    const s = await setup();
    const pins = (await s.gw.request('GET', '/api/mcp/servers/files/pins')).json() as {
      pins: { tool: string; state: string; reason: string | null }[];
    };
    const byTool = Object.fromEntries(pins.pins.map((p) => [p.tool, { state: p.state, reason: p.reason }]));
    expect(byTool).toEqual({
      echo: { state: 'pinned', reason: null },
      redos: { state: 'pinned', reason: null },
      unique: { state: 'pinned', reason: null },
      lookahead: { state: 'quarantined', reason: 'unsafe_schema' },
      backref: { state: 'quarantined', reason: 'unsafe_schema' },
    });
    const metrics = (await s.gw.request('GET', '/metrics')).body;
    expect(metrics).toMatch(/gatehouse_schemas_refused_total\{reason="unsafe_schema"\} 2/);

    // A second handshake keeps them quarantined without counting them again.
    expect((await s.gw.request('POST', '/api/mcp/servers/files/test')).json().verdicts).toMatchObject({
      lookahead: 'quarantined',
      backref: 'quarantined',
    });
    expect((await s.gw.request('GET', '/metrics')).body).toMatch(
      /gatehouse_schemas_refused_total\{reason="unsafe_schema"\} 2/,
    );

    // Approving takes the hash the operator reviewed; even with it, an unsafe schema cannot be approved.
    const listed = (await s.gw.request('GET', '/api/mcp/servers/files/pins')).json();
    const reviewed = (listed.pins as { tool: string; pendingHash: string }[]).find((p) => p.tool === 'lookahead');
    const approve = await s.gw.request('POST', '/api/mcp/servers/files/pins/lookahead/approve', {
      body: { pendingHash: reviewed?.pendingHash },
    });
    expect(approve.statusCode).toBe(409);
    expect(approve.json().error).toMatchObject({ code: 'conflict', reason: 'unsafe_schema' });

    const refused = await s.agent.callTool({ name: 'files__lookahead', arguments: { text: 'abc' } });
    expect(refused.isError).toBe(true);
    expect(structured(refused)).toMatchObject({
      status: 'error',
      error: { code: 'tool.quarantined', reason: 'unsafe_schema' },
    });
    expect(s.upstream.stats.calls.lookahead ?? 0).toBe(0);
  });

  it('checks uniqueItems by JSON equality, and refuses 6,000 objects as too complex instead of comparing them pairwise', async () => {
    const s = await setup();
    const items = Array.from({ length: 500 }, (_, i) => ({ id: i, tags: ['x', i % 7], nested: { n: i } }));
    const ok = await s.agent.callTool({ name: 'files__unique', arguments: { list: items } });
    expect(ok.content).toEqual([{ type: 'text', text: 'unique ran' }]);
    // Same object with its keys in another order: JSON-equal, so a duplicate.
    const duplicate = { nested: { n: 17 }, tags: ['x', 17 % 7], id: 17 };
    const refused = await s.agent.callTool({ name: 'files__unique', arguments: { list: [...items, duplicate] } });
    expect(refused.isError).toBe(true);
    expect(structured(refused)).toMatchObject({ error: { code: 'tool.invalid_arguments' } });
    expect(JSON.stringify(structured(refused))).toMatch(/duplicate/);

    const many = Array.from({ length: 6000 }, (_, i) => ({ id: i, tags: ['x', i % 7], nested: { n: i } }));
    const tooMany = await s.agent.callTool({ name: 'files__unique', arguments: { list: many } });
    expect(tooMany.isError).toBe(true);
    expect(structured(tooMany)).toMatchObject({ status: 'error', error: { code: 'tool.arguments_too_complex' } });
  });
});
