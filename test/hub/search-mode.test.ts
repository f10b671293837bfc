/**
 * Search mode on /mcp (issue 22): a token's `toolView`, the meta-tools (search, describe, call) over a
 * real SDK upstream on 127.0.0.2, and a call through `gatehouse__call_tool` whose approval card and
 * audit row are a direct call's but for the `via` mark — in both protocol eras, on both stores.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

const ERAS = ['modern', 'legacy'] as const;
const META = [
  'gatehouse__approval_status',
  'gatehouse__call_tool',
  'gatehouse__describe_tool',
  'gatehouse__search_tools',
];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const structured = (result: unknown) => (result as { structuredContent: Record<string, unknown> }).structuredContent;

interface Hit {
  name: string;
  server: string;
  verdict: string;
  arguments: string[];
  description?: string;
}

describeEachStore('search mode', (target) => {
  let gw: TestGateway;
  let billing: McpFixture;
  let vault: McpFixture;
  let base: string;
  let searcher: { id: string; token: string };
  let lister: { id: string; token: string };
  /** Turned on after the first handshake: `export_invoices` then appears, and is quarantined as new. */
  let withNewTool = false;
  const clients: Client[] = [];

  const registerBilling = (server: McpServer) => {
    server.registerTool(
      'create_invoice',
      {
        description: 'Bill a customer for an order; the invoice is emailed to them.',
        inputSchema: z.object({ customer_id: z.string(), amount_cents: z.number() }),
      },
      async ({ customer_id }) => ({ content: [{ type: 'text', text: `invoiced ${customer_id}` }] }),
    );
    server.registerTool(
      'lookup_customer',
      {
        description: 'Read a customer record: name, address and payment status.',
        inputSchema: z.object({ customer_id: z.string() }),
      },
      async ({ customer_id }) => ({ content: [{ type: 'text', text: `customer ${customer_id}` }] }),
    );
    server.registerTool(
      'purge_ledger',
      { description: 'Erase every invoice in the ledger.', inputSchema: z.object({ confirm: z.boolean() }) },
      async () => ({ content: [{ type: 'text', text: 'purged' }] }),
    );
    if (withNewTool) {
      server.registerTool(
        'export_invoices',
        { description: 'Export invoices as a spreadsheet.', inputSchema: z.object({ month: z.string() }) },
        async () => ({ content: [{ type: 'text', text: 'exported' }] }),
      );
    }
  };

  const registerVault = (server: McpServer) => {
    server.registerTool(
      'archive_invoice',
      { description: 'Archive an invoice in the vault.', inputSchema: z.object({ invoice_id: z.string() }) },
      async () => ({ content: [{ type: 'text', text: 'archived' }] }),
    );
  };

  async function connect(token: string, era: Era, options: Parameters<typeof connectAgent>[2] = {}): Promise<Client> {
    const client = await connectAgent(`${base}/mcp`, token, { era, ...options });
    clients.push(client);
    return client;
  }

  async function newToken(body: Record<string, unknown>) {
    const created = await gw.request('POST', '/api/tokens', { body });
    expect(created.statusCode, created.body).toBe(201);
    return created.json() as { id: string; token: string; toolView: string | null };
  }

  async function search(client: Client, args: Record<string, unknown>) {
    const result = await client.callTool({ name: 'gatehouse__search_tools', arguments: args });
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    return structured(result) as { tools: Hit[]; count: number; total: number; nextCursor?: string };
  }

  async function install(id: string, url: string, policy: Record<string, unknown>) {
    const installed = await gw.request('POST', '/api/mcp/install', { body: { url, id } });
    expect(installed.statusCode, installed.body).toBeLessThan(300);
    expect((await gw.request('PATCH', `/api/mcp/servers/${id}/tools`, { body: policy })).statusCode).toBe(200);
    expect((await gw.request('POST', `/api/mcp/servers/${id}/test`)).json().ok).toBe(true);
  }

  /** The call rows of the audit trail, once `expected` are written (rows are group-committed). */
  async function callRows(expected: number): Promise<Record<string, unknown>[]> {
    for (let i = 0; i < 100; i++) {
      await gw.gateway.audit.flush();
      const body = (await gw.request('GET', '/api/audit?kind=call&limit=500')).json();
      if (body.total >= expected) return body.events;
      await sleep(20);
    }
    throw new Error(`fewer than ${expected} audit rows`);
  }

  beforeEach(async () => {
    withNewTool = false;
    gw = await startTestGateway(target);
    billing = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register: registerBilling });
    vault = await startModernServer({ host: PUBLIC_TEST_HOST, tools: [], register: registerVault });
    await install('billing', billing.url, {
      mode: 'all',
      allow: ['echo', 'lookup_customer'],
      gated: ['create_invoice'],
      blocked: ['purge_ledger'],
      defaultTier: 'allow',
    });
    await install('vault', vault.url, { mode: 'all', allow: ['archive_invoice'], defaultTier: 'allow' });
    // The vault is exposed to another group: a default agent never finds its tools.
    expect(
      (await gw.request('PATCH', '/api/mcp/servers/vault/exposure', { body: { groups: ['finance'] } })).statusCode,
    ).toBeLessThan(300);
    // A tool that appears after the first handshake waits in quarantine.
    withNewTool = true;
    expect((await gw.request('POST', '/api/mcp/servers/billing/test')).json().verdicts.export_invoices).toBe(
      'quarantined',
    );
    searcher = await newToken({ role: 'agent', name: 'searcher', toolView: 'search' });
    lister = await newToken({ role: 'agent', name: 'lister' });
    base = await gw.listen();
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await billing.close();
    await vault.close();
    await gw.close();
  });

  for (const era of ERAS) {
    it(`lists the meta-tools instead of the catalog, and finds tools by description words and argument names (${era})`, async () => {
      const client = await connect(searcher.token, era);
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(META);
      expect(client.getInstructions()).toContain('gatehouse__search_tools');

      // Words of a description ("bill", "order") find the tool, with its verdict.
      const billed = await search(client, { query: 'bill for an order' });
      expect(billed.tools[0]).toMatchObject({
        name: 'billing__create_invoice',
        server: 'billing',
        verdict: 'gated',
        arguments: ['customer_id', 'amount_cents'],
      });
      // An argument name finds it too; the allowed tool states `allow`.
      const byArgument = await search(client, { query: 'amount_cents' });
      expect(byArgument.tools.map((t) => t.name)).toEqual(['billing__create_invoice']);
      const lookup = (await search(client, { query: 'customer payment status' })).tools[0];
      expect(lookup).toMatchObject({ name: 'billing__lookup_customer', verdict: 'allow' });

      // Blocked, quarantined and other groups' tools never appear, whatever the query.
      const hidden = ['billing__purge_ledger', 'billing__export_invoices', 'vault__archive_invoice'];
      for (const query of ['erase ledger', 'purge_ledger', 'export spreadsheet', 'export_invoices', 'archive vault']) {
        const found = (await search(client, { query, limit: 50 })).tools.map((t) => t.name);
        expect(found.filter((name) => hidden.includes(name))).toEqual([]);
      }
      expect((await search(client, { query: 'erase ledger spreadsheet vault' })).tools).toEqual([]);
      const invoices = await search(client, { query: 'invoice', limit: 50 });
      expect(invoices.tools.map((t) => t.name)).toEqual(['billing__create_invoice']);

      // Describe gives the whole pinned definition; a blocked tool is not there to describe.
      const described = structured(
        await client.callTool({ name: 'gatehouse__describe_tool', arguments: { name: 'billing__create_invoice' } }),
      );
      expect(described).toMatchObject({
        server: 'billing',
        verdict: 'gated',
        tool: {
          name: 'billing__create_invoice',
          description: 'Bill a customer for an order; the invoice is emailed to them.',
          inputSchema: { type: 'object', properties: { customer_id: { type: 'string' } } },
        },
      });
      expect(described.pinHash).toMatch(/^[0-9a-f]{64}$/);
      const blocked = await client.callTool({
        name: 'gatehouse__describe_tool',
        arguments: { name: 'billing__purge_ledger' },
      });
      expect(blocked.isError).toBe(true);
      expect(structured(blocked)).toMatchObject({ status: 'error', error: { code: 'search.unknown_tool' } });
    });
  }

  it('pages results with a stable cursor, in a deterministic order, filtered by server', async () => {
    const client = await connect(searcher.token, 'modern');
    const query = { query: 'customer invoice echo' };
    const all = await search(client, { ...query, limit: 50 });
    expect(all.tools.length).toBe(3);
    expect(await search(client, { ...query, limit: 50 })).toEqual(all);
    // One at a time, through the cursor: the same tools in the same order, none twice.
    const walked: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await search(client, { ...query, limit: 1, ...(cursor ? { cursor } : {}) });
      expect(page.count).toBe(1);
      walked.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    expect(walked).toEqual(all.tools.map((t) => t.name));
    // A cursor belongs to its search.
    const first = await search(client, { ...query, limit: 1 });
    const foreign = await client.callTool({
      name: 'gatehouse__search_tools',
      arguments: { query: 'something else', cursor: first.nextCursor },
    });
    expect(structured(foreign)).toMatchObject({ status: 'error', error: { code: 'tool.invalid_arguments' } });
    expect((await search(client, { query: 'customer', server: 'nope' })).tools).toEqual([]);
    expect((await search(client, { query: 'customer', server: 'billing' })).tools.length).toBe(2);
    // Bad arguments are a refusal the model reads.
    const bad = await client.callTool({ name: 'gatehouse__search_tools', arguments: { query: '' } });
    expect(structured(bad)).toMatchObject({ status: 'error', error: { code: 'tool.invalid_arguments' } });
  });

  for (const era of ERAS) {
    it(`a gated call through gatehouse__call_tool makes a direct call's approval card and audit row, marked via (${era})`, async () => {
      const client = await connect(searcher.token, era);
      const args = { customer_id: 'c-42', amount_cents: 1200 };
      const direct = structured(await client.callTool({ name: 'billing__create_invoice', arguments: args }));
      const carried = structured(
        await client.callTool({
          name: 'gatehouse__call_tool',
          arguments: { name: 'billing__create_invoice', arguments: args },
        }),
      );
      expect(direct.status).toBe('pending_approval');
      expect(carried.status).toBe('pending_approval');
      expect(Object.keys(carried).sort()).toEqual(Object.keys(direct).sort());
      expect(carried.detail).toBe(direct.detail);

      const card = async (id: unknown) => {
        const {
          id: _id,
          createdAt: _c,
          expiresAt: _e,
          ...rest
        } = (await gw.request('GET', `/api/approvals/${id}`)).json();
        return rest as Record<string, unknown> & { detail: Record<string, unknown> };
      };
      const directCard = await card(direct.approval_id);
      const carriedCard = await card(carried.approval_id);
      expect(carriedCard.detail).toEqual({ ...directCard.detail, via: 'call_tool' });
      expect({ ...carriedCard, detail: null }).toEqual({ ...directCard, detail: null });
      expect(directCard).toMatchObject({ tool: 'create_invoice', exposedName: 'billing__create_invoice' });

      const rows = await callRows(2);
      const strip = (row: Record<string, unknown>) => {
        const { id: _id, at: _at, latencyMs: _l, approvalId: _a, data, ...rest } = row;
        return { rest, data };
      };
      const [newer, older] = rows.map(strip) as [ReturnType<typeof strip>, ReturnType<typeof strip>];
      expect(newer.rest).toEqual(older.rest);
      expect(older.data).toBeNull();
      expect(newer.data).toEqual({ via: 'call_tool' });
      expect(newer.rest).toMatchObject({ tool: 'create_invoice', verdict: 'gated', outcome: 'pending_approval' });
      expect(billing.stats.calls.create_invoice ?? 0).toBe(0);

      // An allowed tool runs through call_tool and answers as the upstream did; a blocked one is refused.
      const ran = await client.callTool({
        name: 'gatehouse__call_tool',
        arguments: { name: 'billing__lookup_customer', arguments: { customer_id: 'c-7' } },
      });
      expect(ran.content).toEqual([{ type: 'text', text: 'customer c-7' }]);
      const refused = await client.callTool({
        name: 'gatehouse__call_tool',
        arguments: { name: 'billing__purge_ledger', arguments: { confirm: true } },
      });
      expect(structured(refused)).toMatchObject({ status: 'error', error: { code: 'tool.blocked' } });
    });
  }

  it('takes the view from the token, else from hub.toolView; other agents have no meta-tools', async () => {
    const plain = await connect(lister.token, 'modern');
    const names = (await plain.listTools()).tools.map((t) => t.name);
    expect(names).toContain('billing__create_invoice');
    expect(names).not.toContain('gatehouse__search_tools');
    await expect(plain.callTool({ name: 'gatehouse__search_tools', arguments: { query: 'x' } })).rejects.toThrow(
      /not found/,
    );

    // The platform default moves the token without a view of its own; a token's own view wins.
    expect((await gw.request('PATCH', '/api/settings', { body: { 'hub.toolView': 'search' } })).statusCode).toBe(200);
    expect((await plain.listTools()).tools.map((t) => t.name).sort()).toEqual(META);
    expect((await gw.request('PATCH', `/api/tokens/${lister.id}`, { body: { toolView: 'all' } })).json()).toMatchObject(
      { toolView: 'all' },
    );
    expect((await plain.listTools()).tools.map((t) => t.name)).toContain('billing__create_invoice');

    // A toolset view is validated as a name; one not defined lists nothing, and says so.
    await gw.request('PATCH', `/api/tokens/${searcher.id}`, { body: { toolView: 'toolset:finance-tools' } });
    const viewer = await connect(searcher.token, 'legacy');
    expect((await viewer.listTools()).tools.map((t) => t.name)).toEqual(['gatehouse__approval_status']);
    expect(viewer.getInstructions()).toContain('toolset "finance-tools", which is not defined');

    for (const toolView of ['everything', 'toolset:', 'toolset:Bad Name', 7]) {
      const refused = await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'x', toolView } });
      expect(refused.statusCode).toBe(400);
      expect(refused.json().error.code).toBe('validation_error');
    }
    const operator = await gw.request('POST', '/api/tokens', {
      body: { role: 'operator', name: 'op', toolView: 'search' },
    });
    expect(operator.statusCode).toBe(400);
    expect((await gw.request('PATCH', '/api/settings', { body: { 'hub.toolView': 'sometimes' } })).statusCode).toBe(
      400,
    );
  });

  it('lists recently called tools beside the meta-tools when set, and tells the agent its list changed', async () => {
    expect((await gw.request('PATCH', '/api/settings', { body: { 'hub.search.recentTools': 2 } })).statusCode).toBe(
      200,
    );
    let changed = 0;
    const client = await connect(searcher.token, 'legacy', {
      client: {
        listChanged: {
          tools: {
            autoRefresh: false,
            debounceMs: 0,
            onChanged: () => {
              changed += 1;
            },
          },
        },
      },
    });
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(META);
    await client.callTool({
      name: 'gatehouse__call_tool',
      arguments: { name: 'billing__lookup_customer', arguments: { customer_id: 'c-1' } },
    });
    for (let i = 0; i < 100 && changed === 0; i++) await sleep(20);
    expect(changed).toBeGreaterThan(0);
    const listed = (await client.listTools()).tools;
    expect(listed.map((t) => t.name).sort()).toEqual([...META, 'billing__lookup_customer'].sort());
    // Listed as a direct list would advertise it, and callable directly.
    expect(listed.find((t) => t.name === 'billing__lookup_customer')?.inputSchema).toMatchObject({
      properties: { customer_id: { type: 'string' } },
    });
    const direct = await client.callTool({ name: 'billing__lookup_customer', arguments: { customer_id: 'c-2' } });
    expect(direct.content).toEqual([{ type: 'text', text: 'customer c-2' }]);
  });
});
