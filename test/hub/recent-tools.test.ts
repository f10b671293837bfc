/**
 * Search mode's recent tools are the fleet's, not a process's (issue 22): two replicas on one store —
 * two gateways on one PostgreSQL schema, or two app instances on one SQLite file — list the same recent
 * tools for an agent whichever of them served its calls; a replica holding the agent's 2025-era session
 * tells it its list changed when the call went through another (PostgreSQL's messages). The writes are
 * batched off the call path, each agent's rows bounded, and they outlive a restart.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RecentTools } from '../../src/surfaces/hub/search/recent.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, freshStore, type StoreTarget } from '../helpers/stores.js';

const META = [
  'gatehouse__approval_status',
  'gatehouse__call_tool',
  'gatehouse__describe_tool',
  'gatehouse__search_tools',
];

describeEachStore('recent tools, shared through the store', (target: StoreTarget) => {
  describe('the store-backed list', () => {
    let place: Awaited<ReturnType<typeof freshStore>>;
    let second: Awaited<ReturnType<typeof freshStore>>['store'] | undefined;
    const lists: RecentTools[] = [];

    beforeEach(async () => {
      place = await freshStore(target);
    });
    afterEach(async () => {
      await Promise.all(lists.splice(0).map((l) => l.close()));
      await second?.close();
      second = undefined;
      await place.cleanup();
    });

    /** A second replica's connection to the same database (its own Store, as another process has). */
    async function replica() {
      const { openStore } = await import('../../src/store/db.js');
      second = await openStore({ dataDir: place.dataDir, databaseUrl: place.databaseUrl });
      return second;
    }

    const rowsOf = (agent: string) =>
      place.store.db
        .selectFrom('recent_tools')
        .select(['name', 'used_at'])
        .where('token_id', '=', agent)
        .orderBy('name')
        .execute();

    it('answers every replica the same list, and a change made on one is seen on the other', async () => {
      const remote: string[][] = [];
      const a = new RecentTools({ store: place.store });
      const b = new RecentTools({ store: await replica(), onRemoteChange: (ids) => remote.push([...ids]) });
      lists.push(a, b);
      expect(a.record('agent-1', 'files__echo', 2)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 2));
      expect(a.record('agent-1', 'files__add', 2)).toBe(true);
      // The replica that served the calls answers at once, from its cache.
      expect(await a.recent('agent-1', 2)).toEqual(['files__add', 'files__echo']);
      await a.flush();
      expect(await b.recent('agent-1', 2)).toEqual(['files__add', 'files__echo']);
      expect(await b.recent('agent-2', 2)).toEqual([]);
      // A third tool through the other replica: the oldest leaves, on both.
      await new Promise((resolve) => setTimeout(resolve, 2));
      expect(b.record('agent-1', 'files__sum', 2)).toBe(true);
      await b.flush();
      expect(await b.recent('agent-1', 2)).toEqual(['files__add', 'files__sum']);
      await eventually(async () => expect(await a.recent('agent-1', 2)).toEqual(['files__add', 'files__sum']));
      if (target.kind === 'postgres') {
        // PostgreSQL carries the change to the replica holding the agent's sessions (never to its own).
        const seenByA: string[][] = [];
        const a2 = new RecentTools({ store: place.store, onRemoteChange: (ids) => seenByA.push([...ids]) });
        lists.push(a2);
        await eventually(() => expect(remote).toContainEqual(['agent-1'])); // A's changes reached B
        remote.length = 0;
        b.record('agent-1', 'files__echo', 2);
        await b.flush();
        await eventually(() => expect(seenByA).toContainEqual(['agent-1']));
        expect(remote).toEqual([]);
      }
    });

    it('writes calls that do not change a list in batches, off the call path, and bounds each agent’s rows', async () => {
      const list = new RecentTools({ store: place.store, flushMs: 60_000 });
      lists.push(list);
      list.record('agent-1', 'files__echo', 5);
      await list.flush();
      const [first] = await rowsOf('agent-1');
      expect(first?.name).toBe('files__echo');
      await new Promise((resolve) => setTimeout(resolve, 5));
      // Calls to a tool already listed: nothing reaches the store until the batch is written.
      for (let i = 0; i < 100; i++) expect(list.record('agent-1', 'files__echo', 5)).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(Number((await rowsOf('agent-1'))[0]?.used_at)).toBe(Number(first?.used_at));
      await list.flush();
      expect(Number((await rowsOf('agent-1'))[0]?.used_at)).toBeGreaterThan(Number(first?.used_at));
      // 60 different tools: the store keeps the 50 most recent.
      for (let i = 0; i < 60; i++) list.record('agent-2', `s__tool_${String(i).padStart(2, '0')}`, 5);
      await list.flush();
      const kept = (await rowsOf('agent-2')).map((r) => r.name);
      expect(kept).toHaveLength(50);
      expect(kept).not.toContain('s__tool_09');
      expect(kept).toContain('s__tool_10');
      expect(kept).toContain('s__tool_59');
    });

    it('outlives the process: a new one reads what the last one wrote', async () => {
      const before = new RecentTools({ store: place.store });
      before.record('agent-1', 'files__echo', 3);
      await before.close();
      const after = new RecentTools({ store: place.store });
      lists.push(after);
      expect(await after.recent('agent-1', 3)).toEqual(['files__echo']);
    });
  });

  describe('two gateways on one store', () => {
    let a: TestGateway;
    let b: TestGateway;
    let upstream: McpFixture;
    let agent: { id: string; token: string };
    const clients: Client[] = [];

    beforeEach(async () => {
      upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
      a = await startTestGateway(target);
      b = await startTestGateway(target, {}, {}, { dataDir: a.dataDir, databaseUrl: a.databaseUrl, cleanup: noop });
      expect(
        (await a.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
      ).toBe(201);
      expect((await a.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
      expect((await a.request('PATCH', '/api/settings', { body: { 'hub.search.recentTools': 2 } })).statusCode).toBe(
        200,
      );
      agent = (
        await a.request('POST', '/api/tokens', { body: { role: 'agent', name: 'fleet', toolView: 'search' } })
      ).json();
    });
    afterEach(async () => {
      await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
      await b?.close();
      await a?.close(); // owns the place: cleans it up
      await upstream?.close();
    });

    async function connect(gw: TestGateway, era: 'modern' | 'legacy', options = {}) {
      const client = await connectAgent(`${await gw.listen()}/mcp`, agent.token, { era, ...options });
      clients.push(client);
      return client;
    }

    it('lists on one replica the tools the agent called through the other', async () => {
      let changedOnB = 0;
      const onB = await connect(b, 'legacy', {
        client: {
          listChanged: {
            tools: {
              autoRefresh: false,
              debounceMs: 0,
              onChanged: () => {
                changedOnB += 1;
              },
            },
          },
        },
      });
      expect((await onB.listTools()).tools.map((t) => t.name).sort()).toEqual(META);
      const onA = await connect(a, 'modern');
      const called = await onA.callTool({
        name: 'gatehouse__call_tool',
        arguments: { name: 'files__echo', arguments: { text: 'from a' } },
      });
      expect(called.isError).toBeFalsy();
      // The other replica lists it beside the meta-tools, as its own calls would have.
      await eventually(async () =>
        expect((await onB.listTools()).tools.map((t) => t.name).sort()).toEqual([...META, 'files__echo'].sort()),
      );
      if (target.kind === 'postgres') await eventually(() => expect(changedOnB).toBeGreaterThan(0));
      // And a call through B is listed on A.
      await onB.callTool({
        name: 'gatehouse__call_tool',
        arguments: { name: 'files__add', arguments: { a: 1, b: 2 } },
      });
      await eventually(async () =>
        expect((await onA.listTools()).tools.map((t) => t.name).sort()).toEqual(
          [...META, 'files__add', 'files__echo'].sort(),
        ),
      );
      // A revoked token's list goes with it.
      const rows = () =>
        a.gateway.store.db.selectFrom('recent_tools').select('name').where('token_id', '=', agent.id).execute();
      await eventually(async () => expect((await rows()).length).toBe(2));
      expect((await a.request('DELETE', `/api/tokens/${agent.id}`)).statusCode).toBeLessThan(300);
      expect(await rows()).toEqual([]);
    });
  });
});

async function noop(): Promise<void> {}
