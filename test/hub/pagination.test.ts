/**
 * Paginated aggregation: hub lists longer than `GATEHOUSE_LIST_PAGE_SIZE` come in pages with stable
 * cursors, in both eras (the first modern page through the fast path too), for tools, prompts and
 * resources; a cursor from one replica continues on another; a cursor that is not ours is -32602.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { encodeCursor, pageOf } from '../../src/surfaces/cursor.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

const PAGE = 7;
const TOOLS = 30;
const PROMPTS = 10;
const RESOURCES = 9;

const register = (server: McpServer) => {
  // Registered out of name order: pages come in name order all the same.
  for (let i = TOOLS - 1; i >= 0; i--) {
    server.registerTool(`tool_${String(i).padStart(2, '0')}`, { inputSchema: z.object({}) }, async () => ({
      content: [{ type: 'text', text: `${i}` }],
    }));
  }
  for (let i = 0; i < PROMPTS; i++) {
    server.registerPrompt(`prompt_${i}`, { description: `prompt ${i}` }, async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: `${i}` } }],
    }));
  }
  for (let i = 0; i < RESOURCES; i++) {
    server.registerResource(`r${i}`, `test://doc/${i}`, { mimeType: 'text/plain' }, async (uri) => ({
      contents: [{ uri: uri.href, text: `${i}` }],
    }));
  }
};

/**
 * Walks a list page by page. The SDK client walks every page itself when called without a cursor (as
 * agents do); a cursor after the empty key asks for the raw first page, so each page is seen here.
 */
async function allPages<T>(
  kind: string,
  list: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor?: string | undefined }>,
): Promise<{ items: T[]; pages: number[]; aggregate: T[] }> {
  const aggregate = (await list(undefined)).items;
  const items: T[] = [];
  const pages: number[] = [];
  let cursor: string | undefined = encodeCursor(kind, '');
  do {
    const page = await list(cursor);
    items.push(...page.items);
    pages.push(page.items.length);
    cursor = page.nextCursor;
  } while (cursor !== undefined && pages.length < 100);
  return { items, pages, aggregate };
}

describeEachStore('hub list pagination', (target) => {
  const gateways: TestGateway[] = [];
  const clients: Client[] = [];
  let upstream: McpFixture;

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    for (const gw of gateways.splice(0)) await gw.close();
    await upstream?.close();
  });

  async function setUp(era: Era): Promise<Client> {
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: [], register });
    const gw = await startTestGateway(target, { GATEHOUSE_LIST_PAGE_SIZE: String(PAGE) });
    gateways.push(gw);
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'docs' } })).statusCode).toBe(
      201,
    );
    expect((await gw.request('POST', '/api/mcp/servers/docs/test')).json().ok).toBe(true);
    const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'a' } })).json();
    const client = await connectAgent(`${await gw.listen()}/mcp`, agent.token, { era });
    clients.push(client);
    return client;
  }

  for (const era of ['modern', 'legacy'] as const) {
    it(`pages tools, prompts and resources with cursors, each item once, in name order (${era})`, async () => {
      const client = await setUp(era);
      const tools = await allPages('tools', async (cursor) => {
        const r = await client.listTools(cursor ? { cursor } : {}, { cacheMode: 'bypass' });
        return { items: r.tools.map((t) => t.name), nextCursor: r.nextCursor };
      });
      const expected = [
        ...Array.from({ length: TOOLS }, (_, i) => `docs__tool_${String(i).padStart(2, '0')}`),
        'gatehouse__approval_status',
      ].sort();
      expect(tools.items).toEqual(expected);
      expect(tools.pages).toEqual([7, 7, 7, 7, 3]);
      expect(tools.aggregate).toEqual(expected);

      const prompts = await allPages('prompts', async (cursor) => {
        const r = await client.listPrompts(cursor ? { cursor } : {}, { cacheMode: 'bypass' });
        return { items: r.prompts.map((p) => p.name), nextCursor: r.nextCursor };
      });
      expect(prompts.items).toEqual(Array.from({ length: PROMPTS }, (_, i) => `docs__prompt_${i}`).sort());
      expect(prompts.pages).toEqual([7, 3]);
      expect(prompts.aggregate).toEqual(prompts.items);

      const resources = await allPages('resources', async (cursor) => {
        const r = await client.listResources(cursor ? { cursor } : {}, { cacheMode: 'bypass' });
        return { items: r.resources.map((p) => p.uri), nextCursor: r.nextCursor };
      });
      expect(resources.items).toHaveLength(RESOURCES);
      expect(new Set(resources.items).size).toBe(RESOURCES);
      expect(resources.pages).toEqual([7, 2]);
      expect(resources.aggregate).toEqual(resources.items);

      // A cursor of another list, or not ours at all, is invalid params.
      await expect(client.listTools({ cursor: encodeCursor('prompts', 'x') }, { cacheMode: 'bypass' })).rejects.toThrow(
        /cursor/i,
      );
      await expect(client.listTools({ cursor: 'not-a-cursor' }, { cacheMode: 'bypass' })).rejects.toThrow(/cursor/i);
    });
  }
});

describe.skipIf(!POSTGRES_AVAILABLE)('hub list pagination across replicas [postgres]', () => {
  it("continues a cursor from one replica on another's", async () => {
    const upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: [], register });
    const place = await postgresTarget.fresh();
    const gateways: TestGateway[] = [];
    const clients: Client[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        gateways.push(await startTestGateway(postgresTarget, { GATEHOUSE_LIST_PAGE_SIZE: String(PAGE) }, {}, place));
      }
      const [a, b] = gateways;
      await a!.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'docs' } });
      expect((await a!.request('POST', '/api/mcp/servers/docs/test')).json().ok).toBe(true);
      const agent = (await a!.request('POST', '/api/tokens', { body: { role: 'agent', name: 'a' } })).json();
      for (const gw of gateways) clients.push(await connectAgent(`${await gw.listen()}/mcp`, agent.token));
      // Alternate replicas page by page, as a balancer would.
      const tools = await allPages('tools', async (cursor) => {
        const client = clients[Math.floor(Math.random() * 2)]!;
        const r = await client.listTools(cursor ? { cursor } : {}, { cacheMode: 'bypass' });
        return { items: r.tools.map((t) => t.name), nextCursor: r.nextCursor };
      });
      expect(tools.items).toHaveLength(TOOLS + 1);
      expect(new Set(tools.items).size).toBe(TOOLS + 1);
      expect(tools.pages).toEqual([7, 7, 7, 7, 3]);
      expect(b).toBeDefined();
    } finally {
      await Promise.all(clients.map((c) => c.close().catch(() => {})));
      for (const gw of gateways) await gw.close();
      await upstream.close();
      await place.cleanup();
    }
  });
});

describe('list cursors', () => {
  const key = (s: string) => s;
  it('are stable while the list changes between pages: nothing sent twice, nothing still there missed', () => {
    const first = pageOf('tools', ['d', 'a', 'c', 'b', 'e'], key, undefined, 2);
    expect(first.items).toEqual(['a', 'b']);
    // Before the next page: 'b' (the cursor's own item) is removed, 'aa' (before it) and 'bb' (after) added.
    const second = pageOf('tools', ['a', 'aa', 'bb', 'c', 'd', 'e'], key, first.nextCursor, 2);
    expect(second.items).toEqual(['bb', 'c']);
    const third = pageOf('tools', ['a', 'aa', 'bb', 'c', 'd', 'e'], key, second.nextCursor, 2);
    expect(third).toEqual({ items: ['d', 'e'] });
    // A list that fits in a page comes whole, as it is.
    expect(pageOf('tools', ['b', 'a'], key, undefined, 2)).toEqual({ items: ['b', 'a'] });
  });
});
