/**
 * A memory's author is its `source`, set by Gatehouse from the caller's token: `memory_add` refuses a top-level
 * `source`, and refuses as well metadata keys that name an author (`source`, `author`, `creator`, `created_by`, in
 * any case or spelling), so no agent can make a memory read as another client's. Whatever a unit's metadata
 * says (rows written before this rule included), ownership — who may curate or delete a memory at once — and
 * every view of it (search, recall, list, history, REST, audit) read only the server-set `source`.
 * Two agents through real HTTP with the SDK client, both protocol eras.
 */
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;
type Era = 'modern' | 'legacy';

describe('memory_add metadata cannot name an author', () => {
  let gw: TestGateway;
  let base: string;
  let alice: { id: string; name: string; token: string };
  let bob: { id: string; name: string; token: string };
  const clients: Client[] = [];

  const connect = async (token: string, era: Era = 'modern') => {
    const client = new Client(
      { name: `memory-${era}`, version: '1.0.0' },
      era === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {},
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp/memory`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
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
  const settle = async (client: Client, operationId: string): Promise<Json> => {
    for (;;) {
      const op = await ok(client, 'memory_operation_get', { id: operationId });
      if (op.status !== 'pending' && op.status !== 'processing') return op;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    alice = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'alice' } })).json();
    bob = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'bob' } })).json();
    await gw.gateway.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(gw.gateway.app.server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
  });

  for (const era of ['modern', 'legacy'] as const) {
    it(`refuses metadata keys that name an author, with a typed error, and stores nothing [${era}]`, async () => {
      const a = await connect(alice.token, era);
      const attempts: Json[] = [
        { source: bob.id },
        { source: bob.name },
        { author: 'bob' },
        { Source: bob.id },
        { source_id: bob.id },
        { 'author-name': 'bob' },
        { created_by: bob.id },
        { CreatorName: bob.id },
        { topic: 'deploys', source: bob.id },
      ];
      for (const metadata of attempts) {
        const result = await call(a, 'memory_add', { text: 'Deploys are frozen on Fridays.', metadata });
        expect(result.isError, JSON.stringify(metadata)).toBe(true);
        const error = result.structuredContent.error as Json;
        expect(result.structuredContent.status).toBe('error');
        expect(error.code).toBe('mcp.memory_schema');
        // It says which key, and why: the author comes from the token.
        const key = Object.keys(metadata).find((k) => k !== 'topic') as string;
        expect(error.message).toContain(`metadata.${key}`);
        expect(error.message).toMatch(/token/);
        expect(error.issues).toEqual([{ path: `metadata.${key}`, message: expect.any(String) }]);
      }
      // Nothing was stored, and no retain was started.
      expect((await ok(a, 'memory_list', { state: 'all' })).items).toEqual([]);
      expect((await ok(a, 'memory_operation_list', {})).operations ?? []).toEqual([]);

      // Metadata that names no author is kept as given (a document's origin under another key included).
      const kept = await ok(a, 'memory_add', {
        text: 'The release train leaves on Tuesdays.',
        metadata: {
          topic: 'releases',
          source_url: 'https://wiki.example/releases',
          client: 'Acme',
          owner: 'release-team',
          reviewed: true,
        },
      });
      await settle(a, kept.operation_id);
      const [unit] = (await ok(a, 'memory_search', { query: 'release train' })).results as Json[];
      expect(unit).toMatchObject({
        source: alice.id,
        metadata: {
          topic: 'releases',
          source_url: 'https://wiki.example/releases',
          client: 'Acme',
          owner: 'release-team',
          reviewed: true,
        },
      });
    });
  }

  it("ownership and every view read only the server-set source, whatever a unit's metadata claims", async () => {
    const a = await connect(alice.token);
    const b = await connect(bob.token);
    // A unit of alice's whose metadata claims bob (as a row written before the rule could): through the engine.
    const forged = await gw.gateway.memory.add(
      {
        text: 'Bob approved the Friday deploy freeze.',
        metadata: { source: bob.id, author: bob.name, client: bob.id },
      },
      'shared',
      { id: alice.id, name: alice.name },
    );
    await gw.gateway.memory.idle();
    await settle(a, forged.operation_id);
    // And one of bob's own.
    await settle(b, (await ok(b, 'memory_add', { text: 'Bob owns the deploy freeze calendar.' })).operation_id);

    const seenByBob = (await ok(b, 'memory_search', { query: 'deploy freeze' })).results as Json[];
    const spoof = seenByBob.find((r) => r.text.startsWith('Bob approved')) as Json;
    const bobs = seenByBob.find((r) => r.text.startsWith('Bob owns')) as Json;
    expect(spoof.source).toBe(alice.id);
    expect(bobs.source).toBe(bob.id);
    const recalled = (await ok(b, 'memory_recall', { query: 'deploy freeze' })).results as Json[];
    expect(recalled.find((r) => r.id === spoof.id)?.source).toBe(alice.id);
    expect(((await ok(b, 'memory_list', {})).items as Json[]).find((u) => u.id === spoof.id)?.source).toBe(alice.id);
    const history = await ok(b, 'memory_history', { id: spoof.id });
    expect(history.history[0]).toMatchObject({ action: 'created', actor: { id: alice.id } });
    // The dashboard's REST view.
    const rest = (await gw.request('GET', `/api/memory/units/${spoof.id}`)).json();
    expect(rest.unit.source).toBe(alice.id);

    // Bob may not treat it as his: curating or deleting it waits for an operator.
    expect((await ok(b, 'memory_curate', { id: spoof.id, state: 'invalidated' })).status).toBe('pending_approval');
    expect((await ok(b, 'memory_curate', { id: spoof.id, text: 'Rewritten.' })).status).toBe('pending_approval');
    expect((await ok(b, 'memory_delete', { ids: [spoof.id] })).status).toBe('pending_approval');
    // Alice, its real author, may, and gains nothing over bob's memory by it.
    expect(await ok(a, 'memory_curate', { id: spoof.id, text: 'Alice noted the Friday deploy freeze.' })).toMatchObject(
      { source: alice.id, state: 'valid' },
    );
    expect((await ok(a, 'memory_curate', { id: bobs.id, state: 'invalidated' })).status).toBe('pending_approval');
    expect((await ok(a, 'memory_delete', { ids: [bobs.id] })).status).toBe('pending_approval');

    // The audit trail names the caller of every memory call, never a claimed author.
    const audit = (await gw.request('GET', '/api/audit?limit=100')).json().events as Json[];
    const adds = audit.filter((e) => e.tool === 'memory_add');
    expect(adds.length).toBeGreaterThan(0);
    for (const event of adds) expect([alice.id, bob.id]).toContain(event.actorId);
  });
});
