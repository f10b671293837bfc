/**
 * `/mcp/memory` through real HTTP with the SDK client as two different agents, on both databases:
 * typed tool schemas, shared vs private isolation (both protocol eras), source injection, every
 * error code, retain operations polled to completion with their notices, gated deletes through the
 * approval queue, the settings switch, and the REST routes on the admin surface.
 */
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;
type Era = 'modern' | 'legacy';

describeEachStore('memory surface', (target) => {
  let gw: TestGateway;
  let base: string;
  let alice: { id: string; token: string };
  let bob: { id: string; token: string };
  const clients: Client[] = [];

  const connect = async (
    token: string,
    options: { era?: Era; headers?: Record<string, string>; path?: string } = {},
  ) => {
    const era = options.era ?? 'modern';
    const client = new Client(
      { name: `memory-${era}`, version: '1.0.0' },
      era === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {},
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}${options.path ?? '/mcp/memory'}`), {
        requestInit: { headers: { authorization: `Bearer ${token}`, ...options.headers } },
      }),
    );
    clients.push(client);
    return client;
  };
  const call = async (client: Client, name: string, args: Json = {}) =>
    (await client.callTool({ name, arguments: args })) as { isError?: boolean; structuredContent: Json };
  const ok = async (client: Client, name: string, args: Json = {}) => {
    const result = await call(client, name, args);
    expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
    return result.structuredContent;
  };
  const refused = async (client: Client, name: string, args: Json, code: string) => {
    const result = await call(client, name, args);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ status: 'error', error: { code, message: expect.any(String) } });
    return result.structuredContent.error as Json;
  };
  /** Polls memory_operation_get until the operation is no longer pending or processing. */
  const settle = async (client: Client, operationId: string): Promise<Json> => {
    for (;;) {
      const op = await ok(client, 'memory_operation_get', { id: operationId });
      if (op.status !== 'pending' && op.status !== 'processing') return op;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  beforeEach(async () => {
    gw = await startTestGateway(target);
    alice = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'alice' } })).json();
    bob = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'bob' } })).json();
    await gw.gateway.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(gw.gateway.app.server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
  });

  it('lists the 26 tools with real typed schemas and their limits', async () => {
    const client = await connect(alice.token);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names.filter((n) => n.startsWith('memory_'))).toHaveLength(26);
    expect(names).toContain('gatehouse__approval_status');
    const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema as Json]));
    expect(byName.memory_search?.required).toEqual(['query']);
    expect(byName.memory_search?.properties.limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 200 });
    expect(byName.memory_recall?.properties.max_tokens).toMatchObject({ maximum: 32768 });
    expect(byName.memory_recall?.properties.budget.enum).toEqual(['low', 'mid', 'high']);
    expect(byName.memory_add?.required).toEqual(['text']);
    expect(byName.memory_add?.properties.source).toBeUndefined();
    expect(byName.memory_delete?.required).toEqual(['ids']);
    expect(byName.memory_history?.properties.id.pattern).toBe('^[A-Za-z0-9_-]{1,64}$');
    expect(byName.memory_mental_model_create?.required).toEqual(['name', 'source_query']);
    expect(byName.memory_directive_create?.required).toEqual(['name', 'content']);
    expect(byName.memory_list?.additionalProperties).toBe(false);
    expect(byName.memory_list?.properties.args).toBeUndefined();
  });

  for (const era of ['modern', 'legacy'] as const) {
    it(`keeps private memory private and shares the rest [${era}]`, async () => {
      const a = await connect(alice.token, { era });
      const bPrivate = await connect(bob.token, { era, headers: { 'X-Gatehouse-Private': '1' } });
      const bHal0 = await connect(bob.token, { era, headers: { 'X-hal0-Private': 'true' } });
      const b = await connect(bob.token, { era });

      const shared = await ok(a, 'memory_add', { text: 'The team standup is at 09:30 in room Kepler.' });
      expect(shared).toEqual({
        id: expect.stringMatching(/^doc_/),
        timestamp: expect.any(String),
        operation_id: expect.any(String),
      });
      await settle(a, shared.operation_id);
      const secret = await ok(bPrivate, 'memory_add', { text: 'Bob prefers the standup notes in Kepler format.' });
      await settle(bPrivate, secret.operation_id);
      const hal0 = await ok(bHal0, 'memory_add', { text: 'Kepler room projector needs an HDMI adapter.' });
      await settle(bHal0, hal0.operation_id);

      const bobSees = (await ok(b, 'memory_search', { query: 'Kepler' })).results as Json[];
      expect(bobSees.map((r) => r.dataset).sort()).toEqual(['private:' + bob.id, 'private:' + bob.id, 'shared'].sort());
      const aliceSees = (await ok(a, 'memory_search', { query: 'Kepler' })).results as Json[];
      expect(aliceSees).toHaveLength(1);
      expect(aliceSees[0]).toMatchObject({ dataset: 'shared', source: alice.id, tags: [], metadata: {} });
      // Source is injected from the token; passing it raises.
      const sourceError = await refused(a, 'memory_add', { text: 'x', source: 'bob' }, 'mcp.memory_schema');
      expect(sourceError.detail).toMatch(/source/);
      // Naming another client's private dataset is a schema error, for reads and writes alike.
      await refused(a, 'memory_search', { query: 'Kepler', dataset: `private:${bob.id}` }, 'mcp.memory_schema');
      await refused(a, 'memory_add', { text: 'sneaky', dataset: `private:${bob.id}` }, 'mcp.memory_schema');
      await refused(a, 'memory_list', { dataset: `private:${bob.id}` }, 'mcp.memory_schema');
      // By id, another client's private memory does not exist.
      const bobUnit = bobSees.find((r) => r.dataset !== 'shared') as Json;
      await refused(a, 'memory_history', { id: bobUnit.id }, 'memory.not_found');
      await refused(a, 'memory_curate', { id: bobUnit.id, state: 'invalidated' }, 'memory.not_found');
      await refused(a, 'memory_delete', { ids: [bobUnit.id] }, 'memory.not_found');
      // And its own private dataset can be named explicitly.
      const own = (await ok(b, 'memory_list', { dataset: `private:${bob.id}` })).items as Json[];
      expect(own).toHaveLength(2);
      // Named datasets: agents and project:<id> are only read when named.
      await ok(a, 'memory_add', { text: 'Project apollo ships on Kepler day.', dataset: 'project:apollo' });
      await gw.gateway.memory.idle();
      expect((await ok(a, 'memory_search', { query: 'apollo' })).results).toHaveLength(0);
      expect((await ok(b, 'memory_search', { query: 'apollo', dataset: 'project:apollo' })).results).toHaveLength(1);
    });
  }

  it('reports retain yields: facts extracted, already known, nothing learned', async () => {
    const a = await connect(alice.token);
    const first = await ok(a, 'memory_add', { text: 'The VPN gateway is vpn.example.org.', tags: ['net'] });
    const done = await settle(a, first.operation_id);
    expect(done).toMatchObject({ kind: 'retain', status: 'completed', facts_extracted: 1 });
    const again = await ok(a, 'memory_add', { text: 'The VPN gateway is vpn.example.org.' });
    expect(again.id).toBe(first.id);
    expect(await settle(a, again.operation_id)).toMatchObject({
      status: 'completed',
      facts_extracted: 0,
      document_fact_count: 1,
      notice: expect.stringMatching(/content was already known/),
    });
    const zero = await ok(a, 'memory_add', { text: 'The VPN gateway is vpn.example.org.', context: 'wiki' });
    const zeroOp = await settle(a, zero.operation_id);
    expect(zeroOp).toMatchObject({ facts_extracted: 0, nothing_learned: true, notice: expect.any(String) });
    const ops = await ok(a, 'memory_operation_list', {});
    expect(ops.operations).toHaveLength(3);
    // Bob does not see Alice's operations.
    const b = await connect(bob.token);
    expect((await ok(b, 'memory_operation_list', {})).operations).toHaveLength(0);
    await refused(b, 'memory_operation_get', { id: first.operation_id }, 'memory.not_found');
    await refused(a, 'memory_operation_cancel', { id: first.operation_id }, 'memory.operation_state');
    await refused(a, 'memory_operation_retry', { id: first.operation_id }, 'memory.operation_state');
    expect(await ok(a, 'memory_tags_list', {})).toEqual({ tags: [{ tag: 'net', count: 1 }], count: 1 });
    expect(await ok(a, 'memory_bank_stats', {})).toMatchObject({ nodes: 1, documents: 2 });
  });

  it('answers every schema error as mcp.memory_schema', async () => {
    const a = await connect(alice.token);
    const cases: [string, Json][] = [
      ['memory_add', { text: '   ' }],
      ['memory_add', {}],
      ['memory_add', { text: 'x', fact_type: 'opinion' }],
      ['memory_add', { text: 'x', unknown: 1 }],
      ['memory_search', { query: 'x', limit: 201 }],
      ['memory_search', { query: 'x', limit: 0 }],
      ['memory_search', {}],
      ['memory_list', { limit: 500 }],
      ['memory_recall', { query: 'x', max_tokens: 32769 }],
      ['memory_recall', { query: 'x', budget: 'huge' }],
      ['memory_reflect', { query: 'x', max_tokens: 40000 }],
      ['memory_history', { id: 'bad id!' }],
      ['memory_history', { id: 'x'.repeat(65) }],
      ['memory_delete', { ids: [] }],
      ['memory_curate', { id: 'mem_x' }],
      ['memory_mental_model_update', { id: 'mm_x' }],
      ['memory_directive_update', { id: 'dir_x' }],
      ['memory_directive_create', { name: 'x' }],
      ['memory_mental_model_create', { name: 'x' }],
      ['memory_search', { query: 'x', dataset: 'elsewhere' }],
      ['memory_list', { cursor: '%%%' }],
      ['memory_add', { text: 'x', occurred_start: '1' }],
      ['memory_add', { text: 'x', occurred_start: 'next tuesday' }],
      ['memory_add', { text: 'x', occurred_start: '2025-06-01', occurred_end: '2020-01-01T00:00:00Z' }],
      ['memory_curate', { id: 'mem_x', occurred_start: '2025-06-01', occurred_end: '2020-01-01' }],
    ];
    for (const [name, args] of cases) {
      const error = await refused(a, name, args, 'mcp.memory_schema');
      expect(typeof error.detail, `${name} ${JSON.stringify(args)}`).toBe('string');
    }
    const curate = await refused(a, 'memory_curate', { id: 'mem_x' }, 'mcp.memory_schema');
    expect(curate.detail).toMatch(/at least one field/);
    await refused(a, 'memory_mental_model_get', { id: 'mm_missing' }, 'memory.not_found');
    await refused(a, 'memory_directive_get', { id: 'dir_missing' }, 'memory.not_found');
    await expect(call(a, 'memory_nope', {})).rejects.toThrow(/not found/);
  });

  it('curates non-destructively and deletes one own memory at once, everything else through approval', async () => {
    const a = await connect(alice.token);
    const b = await connect(bob.token);
    for (const text of ['Alpha fact about caching.', 'Beta fact about caching.', 'Gamma fact about caching.']) {
      await settle(a, (await ok(a, 'memory_add', { text })).operation_id);
    }
    await settle(b, (await ok(b, 'memory_add', { text: 'Bob fact about caching.' })).operation_id);
    const units = (await ok(a, 'memory_search', { query: 'caching', limit: 10 })).results as Json[];
    const mine = units.filter((u) => u.source === alice.id);
    const bobs = units.find((u) => u.source === bob.id) as Json;
    expect(mine).toHaveLength(3);

    const edited = await ok(a, 'memory_curate', { id: mine[0]?.id, text: 'Alpha fact about caching, corrected.' });
    expect(edited).toMatchObject({ text: 'Alpha fact about caching, corrected.', state: 'valid' });
    await ok(a, 'memory_curate', { id: mine[1]?.id, state: 'invalidated' });
    const history = await ok(a, 'memory_history', { id: mine[1]?.id });
    expect(history.history.map((h: Json) => h.action)).toEqual(['created', 'invalidated']);
    expect((await ok(a, 'memory_search', { query: 'caching' })).results).toHaveLength(3);

    // Another client's memory keeps its author's name: editing or invalidating it waits for an operator.
    const rewrite = await ok(a, 'memory_curate', { id: bobs.id, text: 'Rewritten by alice.' });
    expect(rewrite.status).toBe('pending_approval');
    const hide = await ok(a, 'memory_curate', { id: bobs.id, state: 'invalidated' });
    expect(hide.status).toBe('pending_approval');
    expect((await ok(b, 'memory_list', {})).items[0]).toMatchObject({
      text: 'Bob fact about caching.',
      state: 'valid',
    });
    await gw.request('POST', `/api/approvals/${hide.approval_id}/reject`, { body: { reason: 'not yours' } });
    await gw.request('POST', `/api/approvals/${rewrite.approval_id}/approve`, { body: {} });
    expect(await ok(a, 'gatehouse__approval_status', { approval_id: rewrite.approval_id, wait_s: 10 })).toMatchObject({
      status: 'executed',
      result: { text: 'Rewritten by alice.' },
    });
    const rewritten = await ok(b, 'memory_history', { id: bobs.id });
    expect(rewritten.history.at(-1)).toMatchObject({ actor: { id: alice.id } });

    // One id of its own: runs now.
    expect(await ok(a, 'memory_delete', { ids: [mine[2]?.id] })).toEqual({ deleted: 1 });
    // Bulk, and someone else's: pending approval, nothing deleted yet.
    const bulk = await ok(a, 'memory_delete', { ids: [mine[0]?.id, mine[1]?.id] });
    expect(bulk).toMatchObject({
      status: 'pending_approval',
      approval_id: expect.any(String),
      detail: expect.any(String),
    });
    const foreign = await ok(a, 'memory_delete', { ids: [bobs.id] });
    expect(foreign.status).toBe('pending_approval');
    expect((await ok(a, 'memory_list', { state: 'all' })).items).toHaveLength(3);
    const card = (await gw.request('GET', `/api/approvals/${bulk.approval_id}`)).json();
    expect(card).toMatchObject({
      surface: 'memory',
      tool: 'memory_delete',
      arguments: { ids: [mine[0]?.id, mine[1]?.id] },
    });
    // The card says what would go: each memory's text.
    expect(card.detail.items.map((item: Json) => item.text).sort()).toEqual([
      'Alpha fact about caching, corrected.',
      'Beta fact about caching.',
    ]);
    await gw.request('POST', `/api/approvals/${bulk.approval_id}/approve`, { body: {} });
    const executed = await ok(a, 'gatehouse__approval_status', { approval_id: bulk.approval_id, wait_s: 10 });
    expect(executed).toMatchObject({ status: 'executed', result: { deleted: 2 } });
    await gw.request('POST', `/api/approvals/${foreign.approval_id}/reject`, { body: { reason: 'not yours' } });
    expect(await ok(a, 'gatehouse__approval_status', { approval_id: foreign.approval_id, wait_s: 10 })).toMatchObject({
      status: 'rejected',
    });
    expect((await ok(b, 'memory_list', {})).items).toHaveLength(1);

    // Directives and mental models steer every agent: changes and deletes always wait for an operator.
    const directive = await ok(a, 'memory_directive_create', { name: 'style', content: 'Answer in English.' });
    const dirUpdate = await ok(a, 'memory_directive_update', { id: directive.id, content: 'Deploy without asking.' });
    expect(dirUpdate.status).toBe('pending_approval');
    const updateCard = (await gw.request('GET', `/api/approvals/${dirUpdate.approval_id}`)).json();
    expect(updateCard.detail).toMatchObject({
      before: { content: 'Answer in English.' },
      changes: { content: 'Deploy without asking.' },
    });
    expect(await ok(a, 'memory_directive_get', { id: directive.id })).toMatchObject({ content: 'Answer in English.' });
    await gw.request('POST', `/api/approvals/${dirUpdate.approval_id}/approve`, { body: {} });
    expect(await ok(a, 'gatehouse__approval_status', { approval_id: dirUpdate.approval_id, wait_s: 10 })).toMatchObject(
      {
        status: 'executed',
        result: { content: 'Deploy without asking.' },
      },
    );
    const dirDelete = await ok(a, 'memory_directive_delete', { id: directive.id });
    expect(dirDelete.status).toBe('pending_approval');
    const model = await ok(a, 'memory_mental_model_create', { name: 'caching', source_query: 'caching' });
    expect(model).toMatchObject({ mental_model_id: expect.any(String), operation_id: null });
    expect(await ok(a, 'memory_mental_model_refresh', { id: model.mental_model_id })).toMatchObject({
      status: 'unsupported',
    });
    const mmDelete = await ok(a, 'memory_mental_model_delete', { id: model.mental_model_id });
    expect(mmDelete.status).toBe('pending_approval');
    await gw.request('POST', `/api/approvals/${dirDelete.approval_id}/approve`, { body: {} });
    await gw.request('POST', `/api/approvals/${mmDelete.approval_id}/approve`, { body: {} });
    expect(await ok(a, 'gatehouse__approval_status', { approval_id: dirDelete.approval_id, wait_s: 10 })).toMatchObject(
      {
        status: 'executed',
        result: { deleted: directive.id },
      },
    );
    expect(await ok(a, 'gatehouse__approval_status', { approval_id: mmDelete.approval_id, wait_s: 10 })).toMatchObject({
      status: 'executed',
    });
    expect((await ok(a, 'memory_directive_list', {})).total).toBe(0);
    expect((await ok(a, 'memory_mental_model_list', {})).total).toBe(0);

    // Switched off between request and approval: the call ends out_of_scope and never runs.
    const kept = await ok(a, 'memory_directive_create', { name: 'keep', content: 'Keep me.' });
    const late = await ok(a, 'memory_directive_delete', { id: kept.id });
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.memoryEnabled': false } });
    await gw.request('POST', `/api/approvals/${late.approval_id}/approve`, { body: {} });
    await gw.gateway.approvals.idle();
    expect((await gw.request('GET', `/api/approvals/${late.approval_id}`)).json().status).toBe('out_of_scope');
    expect((await gw.request('GET', '/api/memory/directives')).json().total).toBe(1);
  });

  it('recalls within budget, consolidates, and reflects honestly without a language model', async () => {
    const a = await connect(alice.token);
    for (const text of [
      'The release train leaves every second Thursday.',
      'The release train leaves every 2nd Thursday.',
      'The release train leaves every second Thursday!',
    ]) {
      await settle(a, (await ok(a, 'memory_add', { text })).operation_id);
    }
    const recall = await ok(a, 'memory_recall', { query: 'release train', max_tokens: 200, budget: 'low' });
    expect(recall.results).toHaveLength(2);
    expect(recall.tokens).toBeLessThanOrEqual(200);
    const consolidated = await ok(a, 'memory_bank_consolidate', {});
    expect(consolidated).toEqual({ operation_id: expect.any(String), deduplicated: 1 });
    expect(await ok(a, 'memory_operation_get', { id: consolidated.operation_id })).toMatchObject({
      kind: 'consolidation',
      status: 'completed',
    });
    expect(await ok(a, 'memory_reflect', { query: 'When does the release train leave?' })).toMatchObject({
      status: 'unsupported',
    });
  });

  it('counts memory calls against the token rate limit', async () => {
    const limited = (
      await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'limited', rateLimit: 2 } })
    ).json();
    const client = await connect(limited.token);
    await ok(client, 'memory_bank_stats');
    await ok(client, 'memory_tags_list');
    const error = await refused(client, 'memory_bank_stats', {}, 'rate_limited');
    expect(error.details.retryAfterS).toBeGreaterThan(0);
  });

  it('is switched by mcp.memoryEnabled per request and needs an agent token', async () => {
    const post = (token: string) =>
      fetch(`${base}/mcp/memory`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
    expect((await gw.request('GET', '/info')).json().capabilities).toContain('memory');
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.memoryEnabled': false } });
    expect((await post(alice.token)).status).toBe(404);
    expect((await gw.request('GET', '/info')).json().capabilities).not.toContain('memory');
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.memoryEnabled': true } });
    expect((await post('not-a-token')).status).toBe(401);
    const client = await connect(alice.token);
    expect((await client.listTools()).tools.length).toBe(27);
  });

  it('serves the REST routes to operators and, by scope, on the admin surface', async () => {
    const a = await connect(alice.token);
    await settle(a, (await ok(a, 'memory_add', { text: 'Shared: the wiki moved to docs.example.org.' })).operation_id);
    const bPrivate = await connect(bob.token, { headers: { 'X-Gatehouse-Private': '1' } });
    await settle(
      bPrivate,
      (await ok(bPrivate, 'memory_add', { text: 'Private: bob wiki password hint.' })).operation_id,
    );

    const listed = (await gw.request('GET', '/api/memory/units')).json();
    expect(listed).toMatchObject({ count: 2, total: 2 });
    expect((await gw.request('GET', '/api/memory/search?query=wiki')).json().count).toBe(2);
    expect((await gw.request('GET', '/api/memory/units?limit=0')).statusCode).toBe(400);
    expect((await gw.request('GET', '/api/memory/stats')).json()).toMatchObject({ nodes: 2 });
    const unitId = listed.units[0].id;
    expect((await gw.request('GET', `/api/memory/units/${unitId}`)).json()).toMatchObject({ id: unitId });
    expect((await gw.request('GET', '/api/memory/units/nope')).statusCode).toBe(404);
    // Agents never reach REST directly.
    expect((await gw.request('GET', '/api/memory/units', { token: alice.token })).statusCode).toBe(403);

    // Mental models over REST: create, update, and a refresh that says plainly it cannot run without a model.
    const created = await gw.request('POST', '/api/memory/mental-models', {
      body: { name: 'Wiki', source_query: 'wiki' },
    });
    expect(created.statusCode).toBe(201);
    const modelId = created.json().mental_model_id as string;
    expect(modelId).toMatch(/^mm_/);
    const renamed = await gw.request('PATCH', `/api/memory/mental-models/${modelId}`, { body: { name: 'Docs' } });
    expect(renamed.json()).toMatchObject({ id: modelId, name: 'Docs' });
    expect((await gw.request('PATCH', `/api/memory/mental-models/${modelId}`, { body: {} })).statusCode).toBe(400);
    expect((await gw.request('POST', `/api/memory/mental-models/${modelId}/refresh`)).json()).toMatchObject({
      status: 'unsupported',
    });

    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true } });
    const admin = await connect(alice.token, { path: '/mcp/admin' });
    const names = async () => (await admin.listTools()).tools.map((t) => t.name);
    expect(await names()).not.toContain('memory_unit_list');
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.scope.memory': 'read' } });
    expect(await names()).toEqual(
      expect.arrayContaining(['memory_unit_list', 'memory_unit_search', 'memory_stats_get']),
    );
    expect(await names()).not.toContain('memory_unit_curate');
    const viaAdmin = (await admin.callTool({ name: 'memory_unit_search', arguments: { args: { query: 'wiki' } } }))
      .structuredContent as Json;
    // Through the admin surface an agent still sees only shared and its own private memory.
    expect(viaAdmin.results.map((r: Json) => r.dataset)).toEqual(['shared']);
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.scope.memory': 'write' } });
    const gated = (await admin.callTool({ name: 'memory_unit_delete', arguments: { args: { id: unitId } } }))
      .structuredContent as Json;
    expect(gated.status).toBe('pending_approval');
  });
});
