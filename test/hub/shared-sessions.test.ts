/**
 * 2025-era sessions in the shared store: two `LegacySessions` on one PostgreSQL stand for two replicas
 * (each with its own store connection and LISTEN, as two processes have). A session opened on one is
 * served by the other — rebuilt with its negotiated version, client capabilities and log level — also
 * after the first is gone; another token's request for it is 404; the per-token cap counts the fleet;
 * a DELETE on one replica ends the copy the other holds. On SQLite nothing is stored.
 */
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/db.js';
import { openStore } from '../../src/store/db.js';
import { LegacySessions } from '../../src/surfaces/sessions.js';
import { SharedSessionStore } from '../../src/surfaces/shared-sessions.js';
import { eventually } from '../helpers/eventually.js';
import { freshStore, POSTGRES_AVAILABLE, postgresTarget, sqliteTarget } from '../helpers/stores.js';

const LEGACY = '2025-06-18';

/** A server that reports what its session knows: the client's capabilities and info, and log messages. */
function build() {
  const server = new McpServer({ name: 'probe', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('whoami', { description: 'what this session knows of its client' }, async (ctx) => {
    await ctx.mcpReq.log('info', 'an info line');
    await ctx.mcpReq.log('error', 'an error line');
    return {
      content: [
        {
          type: 'text',
          text: JSON.stringify({
            capabilities: server.server.getClientCapabilities(),
            client: server.server.getClientVersion(),
          }),
        },
      ],
    };
  });
  return server.server;
}

interface Replica {
  sessions: LegacySessions;
  shared: SharedSessionStore | undefined;
  store: Store;
}

function replica(store: Store): Replica {
  const shared = store.kind === 'postgres' ? new SharedSessionStore(store, 60_000) : undefined;
  const sessions = new LegacySessions({
    idleMs: 60_000,
    maxSessions: 1000,
    maxRequestBodySize: 1_000_000,
    ...(shared ? { shared: { store: shared, surface: 'hub' } } : {}),
  });
  return { sessions, shared, store };
}

async function post(
  r: Replica,
  owner: string,
  body: Record<string, unknown>,
  sessionId?: string,
  maxPerToken = 100,
): Promise<{ status: number; id: string | null; messages: Array<Record<string, unknown>> }> {
  const request = new Request('http://127.0.0.1/mcp', {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY } : {}),
    },
  });
  const tokenId = owner.split('|')[0] as string;
  const answer = await r.sessions.handle(
    request,
    { authInfo: { token: tokenId, clientId: tokenId, scopes: [] }, parsedBody: body },
    owner,
    build,
    { tokenId, admit: async () => ({ maxPerToken }) },
  );
  const text = await answer.text();
  const messages = text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line.length > 6)
    .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
  return { status: answer.status, id: answer.headers.get('mcp-session-id'), messages };
}

const initialize = (name: string) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: LEGACY,
    capabilities: { roots: { listChanged: true } },
    clientInfo: { name, version: '7' },
  },
});

describe('sessions in the shared store', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function twoReplicas(): Promise<[Replica, Replica]> {
    const first = await freshStore(postgresTarget);
    cleanups.push(first.cleanup);
    // The second replica: its own pool and LISTEN connection on the same schema.
    const second = await openStore({ dataDir: first.dataDir, databaseUrl: first.databaseUrl });
    cleanups.push(() => second.close());
    const a = replica(first.store);
    const b = replica(second);
    cleanups.push(async () => {
      await a.sessions.close();
      await b.sessions.close();
      a.shared?.close();
      b.shared?.close();
    });
    return [a, b];
  }

  it.skipIf(!POSTGRES_AVAILABLE)(
    'serves a session on another replica, with its handshake and log level, after its opener is gone',
    async () => {
      const [a, b] = await twoReplicas();
      const opened = await post(a, 'tok1|*', initialize('agent-one'));
      expect(opened.status).toBe(200);
      const id = opened.id as string;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      expect(opened.messages[0]).toMatchObject({ result: { protocolVersion: LEGACY } });
      // The level is set through replica A; the call runs on replica B.
      const level = await post(
        a,
        'tok1|*',
        { jsonrpc: '2.0', id: 2, method: 'logging/setLevel', params: { level: 'error' } },
        id,
      );
      expect(level.status).toBe(200);
      // Replica A goes away (its copies close; the shared session does not end).
      await a.sessions.close();
      const call = await post(
        b,
        'tok1|*',
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'whoami', arguments: {} } },
        id,
      );
      expect(call.status).toBe(200);
      const logs = call.messages.filter((m) => m.method === 'notifications/message');
      // Only the error line passes the level the agent set on the other replica.
      expect(logs.map((m) => (m.params as { data: unknown }).data)).toEqual(['an error line']);
      const result = call.messages.find((m) => m.id === 3) as { result: { content: Array<{ text: string }> } };
      expect(JSON.parse(result.result.content[0]?.text as string)).toEqual({
        capabilities: { roots: { listChanged: true } },
        client: { name: 'agent-one', version: '7' },
      });
      // Another token presenting the id gets what an unknown id gets.
      const foreign = await post(b, 'tok2|*', { jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} }, id);
      expect(foreign.status).toBe(404);
      const unknown = await post(
        b,
        'tok1|*',
        { jsonrpc: '2.0', id: 5, method: 'tools/list', params: {} },
        crypto.randomUUID(),
      );
      expect(unknown.status).toBe(404);
    },
  );

  it.skipIf(!POSTGRES_AVAILABLE)(
    'counts a token’s cap across replicas, and a DELETE on one ends the copy the other holds',
    async () => {
      const [a, b] = await twoReplicas();
      const first = await post(a, 'tok1|*', initialize('x'), undefined, 2);
      const second = await post(b, 'tok1|*', initialize('x'), undefined, 2);
      expect([first.status, second.status]).toEqual([200, 200]);
      expect(await a.sessions.fleetCountOf('tok1')).toBe(2);
      // Replica B now holds both (it serves a request of the first).
      const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };
      expect((await post(b, 'tok1|*', list, first.id as string)).status).toBe(200);
      expect(b.sessions.countOf('tok1')).toBe(2);
      // A third opening, on replica A, makes room from the token's least recently seen: the first.
      const third = await post(a, 'tok1|*', initialize('x'), undefined, 2);
      expect(third.status).toBe(200);
      expect(await b.sessions.fleetCountOf('tok1')).toBe(2);
      // Replica B drops its copy of the evicted session (told through LISTEN/NOTIFY).
      await eventually(() => expect(b.sessions.countOf('tok1')).toBe(1));
      expect((await post(a, 'tok1|*', list, first.id as string)).status).toBe(404);
      expect((await post(b, 'tok1|*', list, first.id as string)).status).toBe(404);
      // The agent ends the second session through replica A; the copy B holds goes with it.
      const ended = await a.sessions.handle(
        new Request('http://127.0.0.1/mcp', {
          method: 'DELETE',
          headers: { 'mcp-session-id': second.id as string, 'mcp-protocol-version': LEGACY },
        }),
        { authInfo: { token: 'tok1', clientId: 'tok1', scopes: [] }, parsedBody: undefined },
        'tok1|*',
        build,
        { tokenId: 'tok1', admit: async () => ({ maxPerToken: 2 }) },
      );
      expect(ended.status).toBe(200);
      await eventually(() => expect(b.sessions.countOf('tok1')).toBe(0));
      expect((await post(b, 'tok1|*', list, second.id as string)).status).toBe(404);
      expect(await a.sessions.fleetCountOf('tok1')).toBe(1);
      expect((await post(b, 'tok1|*', list, third.id as string)).status).toBe(200);
    },
  );

  it('keeps sessions in the process on SQLite: nothing is written to the store', async () => {
    const place = await freshStore(sqliteTarget);
    cleanups.push(place.cleanup);
    const r = replica(place.store);
    cleanups.push(() => r.sessions.close());
    const opened = await post(r, 'tok1|*', initialize('x'));
    expect(opened.status).toBe(200);
    const rows = await place.store.db.selectFrom('mcp_sessions').selectAll().execute();
    expect(rows).toEqual([]);
    expect(r.sessions.countOf('tok1')).toBe(1);
  });
});
