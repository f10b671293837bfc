/**
 * Search mode's optional embeddings (issue 22), against a local embeddings endpoint whose vectors are
 * a hashed bag of words with a few synonyms (test/fixtures/embeddings-server.ts): on, a query with no
 * word in common with a tool finds it by meaning — never a blocked, quarantined or hidden tool — and
 * an unchanged tool is never embedded twice; off, BM25 alone and not one request; the endpoint
 * failing, stalling, answering garbage or refused by the egress guard, BM25 results and no error,
 * logged once. Real gateway, real SDK upstream and client; the client and the fusion on their own too.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../src/config.js';
import { createEgressGuard } from '../../src/egress/guard.js';
import { GatehouseError } from '../../src/errors.js';
import { LlmClient } from '../../src/memory/llm.js';
import { sealKeyFrom } from '../../src/secrets/seal.js';
import { ToolEmbeddings } from '../../src/surfaces/hub/search/embeddings.js';
import { type IndexedTool, ToolIndex } from '../../src/surfaces/hub/search/tool-index.js';
import { type EmbeddingsFixture, embedText, startEmbeddingsServer } from '../fixtures/embeddings-server.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_SECRET_KEY, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const LLM_KEY = 'sk-test-embeddings-key-77';
const FAILED_LINE = 'Search embeddings failed';

interface Hit {
  name: string;
  verdict: string;
}
interface Page {
  tools: Hit[];
  count: number;
  total: number;
}

const structured = (result: unknown) => (result as { structuredContent: Record<string, unknown> }).structuredContent;

describe('search mode with embeddings', () => {
  let gw: TestGateway | undefined;
  let shop: McpFixture;
  let embeddings: EmbeddingsFixture;
  let withNewTool = false;
  const clients: Client[] = [];

  const registerShop = (server: McpServer) => {
    server.registerTool(
      'create_invoice',
      {
        description: 'Bill a customer for an order; the invoice is emailed to them.',
        inputSchema: z.object({ customer_id: z.string(), amount_cents: z.number() }),
      },
      async () => ({ content: [{ type: 'text', text: 'invoiced' }] }),
    );
    server.registerTool(
      'lookup_customer',
      {
        description: 'Read a customer record: name, address and payment status.',
        inputSchema: z.object({ customer_id: z.string() }),
      },
      async () => ({ content: [{ type: 'text', text: 'customer' }] }),
    );
    server.registerTool(
      'ship_package',
      {
        description: 'Send a package to a postal address by ground mail.',
        inputSchema: z.object({ address: z.string(), weight_grams: z.number() }),
      },
      async () => ({ content: [{ type: 'text', text: 'shipped' }] }),
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

  /** A gateway with a search-mode agent over the shop (policy: one gated, one blocked, one quarantined). */
  async function start(env: Record<string, string>): Promise<{ client: Client; gw: TestGateway }> {
    const started = await startTestGateway(sqliteTarget, {
      GATEHOUSE_LLM_URL: embeddings.url,
      GATEHOUSE_LLM_KEY: LLM_KEY,
      GATEHOUSE_LLM_PRIVATE_NETWORK: 'true',
      GATEHOUSE_EMBEDDINGS_MODEL: 'fixture-embed',
      GATEHOUSE_EMBEDDINGS_TIMEOUT_MS: '400',
      ...env,
    });
    gw = started;
    const installed = await started.request('POST', '/api/mcp/install', { body: { url: shop.url, id: 'shop' } });
    expect(installed.statusCode, installed.body).toBeLessThan(300);
    const policy = {
      mode: 'all',
      allow: ['lookup_customer', 'ship_package'],
      gated: ['create_invoice'],
      blocked: ['purge_ledger'],
      defaultTier: 'allow',
    };
    expect((await started.request('PATCH', '/api/mcp/servers/shop/tools', { body: policy })).statusCode).toBe(200);
    expect((await started.request('POST', '/api/mcp/servers/shop/test')).json().ok).toBe(true);
    withNewTool = true;
    expect((await started.request('POST', '/api/mcp/servers/shop/test')).json().verdicts.export_invoices).toBe(
      'quarantined',
    );
    const agent = (
      await started.request('POST', '/api/tokens', { body: { role: 'agent', name: 'finder', toolView: 'search' } })
    ).json() as { token: string };
    const base = await started.listen();
    const client = await connectAgent(`${base}/mcp`, agent.token, { era: 'modern' });
    clients.push(client);
    return { client, gw: started };
  }

  async function search(client: Client, query: string): Promise<Page> {
    const result = await client.callTool({ name: 'gatehouse__search_tools', arguments: { query, limit: 50 } });
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    return structured(result) as unknown as Page;
  }
  const names = async (client: Client, query: string) => (await search(client, query)).tools.map((t) => t.name);
  const documentRequests = () => embeddings.requests.filter((r) => r.input.some((text) => text.startsWith('shop__')));
  const failureLines = (g: TestGateway) => g.logs.filter((line) => line.includes(FAILED_LINE));

  beforeEach(async () => {
    withNewTool = false;
    shop = await startModernServer({ host: PUBLIC_TEST_HOST, tools: [], register: registerShop });
    embeddings = await startEmbeddingsServer();
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw?.close();
    gw = undefined;
    await shop.close();
    await embeddings.close();
  });

  it('on: finds a tool by meaning alone, never a blocked or quarantined one, and embeds an unchanged tool once', async () => {
    const { client, gw } = await start({ GATEHOUSE_SEARCH_EMBEDDINGS: 'on' });
    // "receipt" shares no word with any tool; the fixture's model puts it beside "invoice".
    await eventually(async () => {
      expect(await names(client, 'receipt')).toEqual(['shop__create_invoice']);
    });
    const found = await search(client, 'receipt');
    expect(found.tools[0]).toMatchObject({ name: 'shop__create_invoice', verdict: 'gated' });
    // Two synonyms, two words of the tool: found, allowed.
    expect((await search(client, 'courier consignment')).tools).toMatchObject([
      { name: 'shop__ship_package', verdict: 'allow' },
    ]);
    // "wipe" means "erase": the blocked purge_ledger is the closest, and it never appears. Nor does the
    // quarantined export_invoices, close to "receipt" as well.
    expect(await names(client, 'wipe')).toEqual([]);
    expect(await names(client, 'wipe receipt')).toEqual(['shop__create_invoice']);
    // A server filter applies to what only the vectors found, as to BM25's finds.
    const elsewhere = await client.callTool({
      name: 'gatehouse__search_tools',
      arguments: { query: 'receipt', server: 'vault' },
    });
    expect((structured(elsewhere) as unknown as Page).tools).toEqual([]);
    // BM25's own finds stay, fused with the vectors; the same search answers the same bytes.
    const first = await client.callTool({ name: 'gatehouse__search_tools', arguments: { query: 'customer receipt' } });
    const again = await client.callTool({ name: 'gatehouse__search_tools', arguments: { query: 'customer receipt' } });
    expect(JSON.stringify(again)).toBe(JSON.stringify(first));
    expect((structured(first) as unknown as Page).tools.map((t) => t.name).sort()).toEqual([
      'shop__create_invoice',
      'shop__lookup_customer',
    ]);
    // Pages of a hybrid search walk the same ranking (the query's vector is kept, the cursor is the fused rank).
    const whole = (structured(first) as unknown as Page).tools.map((t) => t.name);
    const paged: string[] = [];
    let cursor: string | undefined;
    do {
      const page = structured(
        await client.callTool({
          name: 'gatehouse__search_tools',
          arguments: { query: 'customer receipt', limit: 1, ...(cursor ? { cursor } : {}) },
        }),
      ) as unknown as Page & { nextCursor?: string };
      paged.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    expect(paged).toEqual(whole);

    // The endpoint saw the configured model and the sealed key; the documents are the indexed text,
    // only usable tools', each once.
    expect(embeddings.requests.every((r) => r.model === 'fixture-embed')).toBe(true);
    expect(embeddings.requests.every((r) => r.authorization === `Bearer ${LLM_KEY}`)).toBe(true);
    const embedded = documentRequests().flatMap((r) => r.input);
    expect(embedded.map((text) => text.split('\n')[0]).sort()).toEqual([
      'shop__create_invoice',
      'shop__lookup_customer',
      'shop__ship_package',
    ]);
    expect(embedded.find((text) => text.startsWith('shop__ship_package'))).toContain('weight_grams');
    expect(gw.logs.join('')).not.toContain(LLM_KEY);

    // The catalog changes (ship_package becomes gated): a new index, and not one document embedded again.
    const requestsBefore = documentRequests().length;
    const policy = { mode: 'all', allow: ['lookup_customer'], gated: ['create_invoice', 'ship_package'] };
    expect(
      (await gw.request('PATCH', '/api/mcp/servers/shop/tools', { body: { ...policy, blocked: ['purge_ledger'] } }))
        .statusCode,
    ).toBe(200);
    await eventually(async () => {
      expect((await search(client, 'courier consignment')).tools).toMatchObject([
        { name: 'shop__ship_package', verdict: 'gated' },
      ]);
    });
    expect(documentRequests().length).toBe(requestsBefore);
    // A query asked before is not embedded again either (paging, the same search again).
    const queries = embeddings.requests.filter((r) => r.input[0] === 'courier consignment').length;
    await search(client, 'courier consignment');
    expect(embeddings.requests.filter((r) => r.input[0] === 'courier consignment').length).toBe(queries);
    expect(failureLines(gw)).toEqual([]);
  });

  it('off: BM25 alone, exactly as without an endpoint, and not one request to it', async () => {
    const { client } = await start({});
    expect(await names(client, 'receipt')).toEqual([]);
    expect(await names(client, 'courier consignment')).toEqual([]);
    expect(await names(client, 'invoice')).toEqual(['shop__create_invoice']);
    expect(await names(client, 'postal address')).toEqual(['shop__ship_package', 'shop__lookup_customer']);
    expect(embeddings.requests).toEqual([]);
  });

  it('needs the language-model endpoint: on without GATEHOUSE_LLM_URL refuses to start, naming it', () => {
    const env = { NODE_ENV: 'test', GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY, GATEHOUSE_SEARCH_EMBEDDINGS: 'on' };
    expect(() => loadConfig({ env })).toThrow(/GATEHOUSE_SEARCH_EMBEDDINGS=on needs GATEHOUSE_LLM_URL/);
    expect(loadConfig({ env: { ...env, GATEHOUSE_LLM_URL: 'https://llm.example/v1' } }).searchEmbeddings).toBe('on');
  });

  it('failing: the endpoint answering 500 leaves BM25 results, no error, one log line', async () => {
    embeddings.mode = 'broken';
    const { client, gw } = await start({ GATEHOUSE_SEARCH_EMBEDDINGS: 'on' });
    for (let i = 0; i < 3; i++) {
      expect(await names(client, 'invoice')).toEqual(['shop__create_invoice']);
      expect(await names(client, 'receipt')).toEqual([]);
    }
    await eventually(() => expect(failureLines(gw)).toHaveLength(1));
    // Backing off: three more searches ask the broken endpoint nothing.
    const asked = embeddings.requests.length;
    for (const query of ['customer', 'package', 'ledger']) await search(client, query);
    expect(embeddings.requests.length).toBe(asked);
    expect(failureLines(gw)).toHaveLength(1);
    expect(failureLines(gw)[0]).toContain('http_500');
  });

  it('slow: a query embedding past its deadline leaves that search to BM25, answered in time', async () => {
    const { client, gw } = await start({ GATEHOUSE_SEARCH_EMBEDDINGS: 'on' });
    await eventually(async () => {
      expect(await names(client, 'receipt')).toEqual(['shop__create_invoice']);
    });
    embeddings.mode = 'stall';
    const started = performance.now();
    expect(await names(client, 'customer payment')).toEqual(['shop__lookup_customer', 'shop__create_invoice']);
    // The deadline is 400 ms; the search did not wait for the stalled endpoint beyond it (bounded, generous).
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await names(client, 'consignment')).toEqual([]);
    expect(failureLines(gw)).toHaveLength(1);
    expect(failureLines(gw)[0]).toContain('timeout');
  });

  it('refused by the egress guard (a loopback endpoint not marked private): BM25, no error, nothing sent', async () => {
    const { client, gw } = await start({ GATEHOUSE_SEARCH_EMBEDDINGS: 'on', GATEHOUSE_LLM_PRIVATE_NETWORK: 'false' });
    expect(await names(client, 'invoice')).toEqual(['shop__create_invoice']);
    expect(await names(client, 'receipt')).toEqual([]);
    await eventually(() => expect(failureLines(gw)).toHaveLength(1));
    expect(embeddings.requests).toEqual([]);
  });
});

describe('the embeddings client', () => {
  let fixture: EmbeddingsFixture;
  const guard = createEgressGuard({ policy: 'private', allowHttp: true });
  const client = (timeoutMs = 2_000, maxEmbeddingBytes?: number) =>
    new LlmClient({
      url: fixture.url,
      model: 'chat',
      embeddingsModel: 'fixture-embed',
      apiKey: LLM_KEY,
      sealKey: sealKeyFrom(Buffer.from(TEST_SECRET_KEY, 'hex')),
      timeoutMs,
      fetch: guard.fetch,
      ...(maxEmbeddingBytes ? { maxEmbeddingBytes } : {}),
    });
  const failure = async (promise: Promise<unknown>) => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(GatehouseError);
    const known = error as GatehouseError;
    expect(known.code).toBe('search.embeddings_failed');
    expect(known.message).not.toContain(LLM_KEY);
    return known.details?.reason;
  };

  beforeEach(async () => {
    fixture = await startEmbeddingsServer();
  });
  afterEach(async () => {
    await fixture.close();
  });

  it('posts {model, input} to {url}/embeddings and answers data[i].embedding in order', async () => {
    const vectors = await client().embed(['read a file', 'Bill a customer']);
    expect(vectors).toEqual([embedText('read a file'), embedText('Bill a customer')]);
    expect(fixture.requests).toEqual([
      { authorization: `Bearer ${LLM_KEY}`, model: 'fixture-embed', input: ['read a file', 'Bill a customer'] },
    ]);
    expect(await client().embed([])).toEqual([]);
  });

  it('fails typed: HTTP errors, wrong shapes, deadlines, oversized answers', async () => {
    fixture.mode = 'broken';
    expect(await failure(client().embed(['x']))).toBe('http_500');
    fixture.mode = 'garbage';
    expect(await failure(client().embed(['x', 'y']))).toBe('shape');
    fixture.mode = 'stall';
    expect(await failure(client(5_000).embed(['x'], { timeoutMs: 150 }))).toBe('timeout');
    fixture.mode = 'ok';
    // 512 dimensions of "0," are over 1 KiB: the cap refuses the answer.
    expect(await failure(client(2_000, 1024).embed(['x']))).toBe('response');
  });
});

describe('hybrid ranking and the embeddings cache', () => {
  const tool = (exposed: string, description: string, verdict = 'allow'): IndexedTool => ({
    exposed,
    serverId: exposed.split('__')[0] as string,
    definition: { name: exposed.split('__')[1] as string, description, inputSchema: { type: 'object' } },
    verdict,
  });
  const tools = [
    tool('fs__read_file', 'Read the contents of a file.'),
    tool('fs__write_file', 'Create or overwrite a file.'),
    tool('mail__send_message', 'Send an electronic letter to a recipient.'),
    tool('mail__delete_message', 'Remove a letter.', 'blocked'),
  ];
  const fixtureEmbedder = (log: string[][], state: { fail: boolean }) => ({
    async embed(texts: string[]) {
      log.push(texts);
      if (state.fail) throw new GatehouseError('search.embeddings_failed', 'down', { reason: 'http_503' });
      return texts.map(embedText);
    },
  });
  const quietLogger = (lines: string[]) => ({
    warn: (_: unknown, message?: string) => lines.push(`warn ${message}`),
    info: (message: unknown) => lines.push(`info ${String(message)}`),
  });

  it('fuses BM25 and cosine by reciprocal rank, deterministically, filtered like BM25', async () => {
    const index = ToolIndex.of(tools);
    const calls: string[][] = [];
    const lines: string[] = [];
    const embeddings = new ToolEmbeddings({
      embedder: fixtureEmbedder(calls, { fail: false }),
      logger: quietLogger(lines) as never,
      queryTimeoutMs: 1_000,
      minSimilarity: 0.2,
    });
    expect(await embeddings.semantic(index, 'letter')).toBeUndefined(); // nothing embedded yet: BM25 alone
    await embeddings.settled();
    // The blocked tool is not indexed, so not embedded either.
    expect(calls.flat().map((text) => text.split('\n')[0])).toEqual([
      'fs__read_file',
      'fs__write_file',
      'mail__send_message',
    ]);
    const semantic = await embeddings.semantic(index, 'letter');
    expect(semantic).toBeDefined();
    const everything = () => true;
    // "letter" is in send_message's text only: BM25 and cosine agree.
    expect(index.query('letter', everything, 10, false, semantic).map((h) => h.tool.exposed)).toEqual([
      'mail__send_message',
    ]);
    // "file letter": the fusion keeps every BM25 hit, and the same query ranks the same way again.
    const fusedQuery = await embeddings.semantic(index, 'file letter');
    const fused = index.query('file letter', everything, 10, false, fusedQuery);
    expect(fused.map((h) => h.tool.exposed).sort()).toEqual(['fs__read_file', 'fs__write_file', 'mail__send_message']);
    expect(index.query('file letter', everything, 10, false, fusedQuery)).toEqual(fused);
    // A visibility filter applies to what only the vectors found.
    const noMail = (t: IndexedTool) => t.serverId !== 'mail';
    const onlyByMeaning = await embeddings.semantic(index, 'recipient electronic');
    expect(index.query('zzz', noMail, 10, false, onlyByMeaning)).toEqual([]);
    expect(index.query('zzz', everything, 10, false, onlyByMeaning).map((h) => h.tool.exposed)).toEqual([
      'mail__send_message',
    ]);
    // A new index of the same texts embeds nothing again.
    const before = calls.length;
    const rebuilt = ToolIndex.of([...tools]);
    embeddings.prepare(rebuilt);
    await embeddings.settled();
    expect(calls.length).toBe(before);
    expect(await embeddings.semantic(rebuilt, 'letter')).toBeDefined();
    expect(lines).toEqual([]);
  });

  it('a failure logs once, backs off, and recovers when the endpoint answers again', async () => {
    let now = 1_000;
    const calls: string[][] = [];
    const lines: string[] = [];
    const state = { fail: true };
    const index = ToolIndex.of(tools);
    const embeddings = new ToolEmbeddings({
      embedder: fixtureEmbedder(calls, state),
      logger: quietLogger(lines) as never,
      queryTimeoutMs: 1_000,
      minSimilarity: 0.2,
      retryMs: 10_000,
      now: () => now,
    });
    embeddings.prepare(index);
    await embeddings.settled();
    expect(calls).toHaveLength(1);
    // Backing off: searches ask nothing and get BM25 alone.
    for (let i = 0; i < 5; i++) expect(await embeddings.semantic(index, 'letter')).toBeUndefined();
    await embeddings.settled();
    expect(calls).toHaveLength(1);
    expect(lines).toEqual([expect.stringContaining(FAILED_LINE)]);
    // Past the retry period, the endpoint answers again: the documents are embedded, the failure is over.
    state.fail = false;
    now += 10_001;
    expect(await embeddings.semantic(index, 'letter')).toBeUndefined(); // this search starts the pass
    await embeddings.settled();
    expect(await embeddings.semantic(index, 'letter')).toBeDefined();
    expect(lines).toEqual([expect.stringContaining(FAILED_LINE), expect.stringContaining('answer again')]);
  });
});
