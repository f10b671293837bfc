/**
 * `q` on an admin list tool reads the whole route through (not only its first 500 rows), filters, then
 * applies the caller's `limit`/`offset`; `total` counts the matches. A real gateway, the SDK client.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { connectAgent } from '../helpers/agents.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

describe('admin list tools with q', () => {
  let gw: TestGateway | undefined;
  let client: Client | undefined;
  afterEach(async () => {
    await client?.close().catch(() => {});
    await gw?.close();
  });

  it('filters every row, pages the matches with limit/offset, and reports their total', async () => {
    gw = await startTestGateway(sqliteTarget);
    // 540 tokens: every tenth is named "needle-…", and 4 of them sit past the route’s 500-row page.
    const needles: string[] = [];
    for (let i = 0; i < 540; i++) {
      const name = i % 10 === 3 ? `needle-${String(i).padStart(3, '0')}` : `hay-${i}`;
      if (name.startsWith('needle')) needles.push(name);
      expect((await gw.request('POST', '/api/tokens', { body: { role: 'agent', name } })).statusCode).toBe(201);
    }
    await gw.request('PATCH', '/api/settings', {
      body: { 'mcp.adminEnabled': true, 'mcp.scope.tokens': 'read' },
    });
    const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'lister' } })).json();
    const base = await gw.listen();
    const lister = await connectAgent(`${base}/mcp/admin`, agent.token, { name: 'lister' });
    client = lister;
    const list = async (args: Json) =>
      ((await lister.callTool({ name: 'token_list', arguments: { args } })) as { structuredContent: Json })
        .structuredContent;

    const all = await list({ q: 'NEEDLE', limit: 500, fields: 'name' });
    expect(all.total).toBe(needles.length);
    expect(all.count).toBe(needles.length);
    expect(all.tokens.map((t: Json) => t.name).sort()).toEqual([...needles].sort());

    const page = await list({ q: 'needle', limit: 5, offset: 50 });
    expect(page.total).toBe(needles.length);
    expect(page.count).toBe(4);
    expect(page.tokens).toHaveLength(4);
    const names = new Set((await list({ q: 'needle', limit: 500 })).tokens.map((t: Json) => t.name));
    for (const t of page.tokens) expect(names.has(t.name)).toBe(true);

    const first = await list({ q: 'needle', limit: 10 });
    expect(first.count).toBe(10);
    expect(first.total).toBe(needles.length);
  }, 60_000);
});
