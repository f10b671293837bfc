/**
 * The store's named locks: one holder per key; released on release or close; on PostgreSQL, across
 * stores (replicas) on one schema, with hand-over when the holder's connection dies.
 */
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.js';
import { PostgresLocks } from '../../src/store/locks.js';
import { eventually } from '../helpers/eventually.js';
import { POSTGRES_AVAILABLE, postgresTarget, sqliteTarget, TEST_DATABASE_URL } from '../helpers/stores.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function storesOnOnePlace(target: typeof sqliteTarget, n: number): Promise<Store[]> {
  const place = await target.fresh();
  cleanups.push(() => place.cleanup());
  const stores: Store[] = [];
  for (let i = 0; i < n; i++) {
    const store = await openStore(place);
    cleanups.push(() => store.close());
    stores.push(store);
  }
  return stores;
}

describe('locks [sqlite]', () => {
  it('holds a key once in the process, until released', async () => {
    const [store] = await storesOnOnePlace(sqliteTarget, 1);
    const locks = store!.locks;
    const first = await locks.acquire('k');
    expect(first).toBeDefined();
    expect(await locks.acquire('k')).toBeUndefined();
    expect(await locks.acquire('other')).toBeDefined();
    expect(await locks.withLock('k', async () => 'ran')).toEqual({ ran: false });
    await first!.release();
    expect(first!.signal.aborted).toBe(true);
    expect(await locks.withLock('k', async (signal) => (signal.aborted ? 'lost' : 'held'))).toEqual({
      ran: true,
      value: 'held',
    });
    expect(await locks.acquire('k')).toBeDefined();
  });
});

describe.skipIf(!POSTGRES_AVAILABLE)('locks [postgres]', () => {
  /** Kills the PostgreSQL session holding `key` of `store`'s schema (a replica that died); answers how many. */
  async function killHolder(store: Store, key: string): Promise<number> {
    const { rows: keys } = await sql<{
      k: string;
    }>`select hashtextextended(current_schema() || ${`:${key}`}, 0)::text as k`.execute(store.db);
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ pid: number }>(
        `select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1
            and ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
        [keys[0]!.k],
      );
      for (const { pid } of rows) await admin.query('select pg_terminate_backend($1)', [pid]);
      return rows.length;
    } finally {
      await admin.end();
    }
  }

  it('one holder across replicas; another takes over when the holder releases, closes or dies', async () => {
    const [a, b, c] = await storesOnOnePlace(postgresTarget, 3);
    const held = await a!.locks.acquire('list-watch:files');
    expect(held).toBeDefined();
    expect(await b!.locks.acquire('list-watch:files')).toBeUndefined();
    expect(await c!.locks.acquire('list-watch:files')).toBeUndefined();
    // Another key is free.
    const other = await b!.locks.acquire('list-watch:other');
    expect(other).toBeDefined();
    await other!.release();

    // Released: the next replica takes it.
    await held!.release();
    const byB = await b!.locks.acquire('list-watch:files');
    expect(byB).toBeDefined();
    expect(await a!.locks.acquire('list-watch:files')).toBeUndefined();

    // The holder closes (a replica stopping): released with it.
    await b!.close();
    const byC = await c!.locks.acquire('list-watch:files');
    expect(byC).toBeDefined();
    expect(byC!.signal.aborted).toBe(false);

    // The holder dies (its session killed): it learns it lost the lock, and another replica takes over.
    expect(await killHolder(a!, 'list-watch:files')).toBe(1);
    await eventually(async () => expect(await a!.locks.acquire('list-watch:files')).toBeDefined());
    await eventually(() => expect(byC!.signal.aborted).toBe(true));
    // The dead holder's store still works: a new connection, and the key is now someone else's.
    expect(await c!.locks.acquire('list-watch:files')).toBeUndefined();
    expect(await c!.locks.acquire('fresh')).toBeDefined();
  });

  it('stores in different schemas do not contend', async () => {
    const [a] = await storesOnOnePlace(postgresTarget, 1);
    const [b] = await storesOnOnePlace(postgresTarget, 1);
    expect(await a!.locks.acquire('same')).toBeDefined();
    expect(await b!.locks.acquire('same')).toBeDefined();
  });

  it('gives up on a lock connection that stalls, within its deadline, drops its locks, and opens another', async () => {
    const place = await postgresTarget.fresh();
    cleanups.push(() => place.cleanup());
    // A TCP relay to PostgreSQL that can go silent (a stalled network path or server), or refuse to answer at all.
    const database = new URL(TEST_DATABASE_URL);
    let mode: 'relay' | 'silent' = 'relay';
    const sockets = new Set<Socket>();
    const relay = createServer((client) => {
      sockets.add(client);
      if (mode === 'silent') return; // accepts, then never says a word
      const server = connect(Number(database.port || 5432), database.hostname);
      sockets.add(server);
      client.on('data', (chunk) => mode === 'relay' && server.write(chunk));
      server.on('data', (chunk) => mode === 'relay' && client.write(chunk));
      for (const [a, b] of [
        [client, server],
        [server, client],
      ] as const) {
        a.on('error', () => b.destroy());
        a.on('close', () => b.destroy());
      }
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => relay.close(resolve));
    });
    const url = new URL(place.databaseUrl as string);
    url.host = `127.0.0.1:${(relay.address() as AddressInfo).port}`;
    const locks = new PostgresLocks(url.toString(), { deadlineMs: 300 });
    cleanups.push(() => locks.close());

    const held = await locks.acquire('stalls');
    expect(held).toBeDefined();
    // The connection goes silent mid-life: the next query fails at its deadline, and the locks on it are dropped.
    mode = 'silent';
    await expect(locks.acquire('another')).rejects.toThrow(/timeout/i);
    expect(held!.signal.aborted).toBe(true);
    // A new connection that never answers its startup fails at the deadline too, instead of waiting for ever.
    await expect(locks.acquire('another')).rejects.toThrow(/timeout/i);
    // The path is back: a fresh connection, and the key dropped with the stalled one is free again.
    mode = 'relay';
    expect(await locks.acquire('stalls')).toBeDefined();
  });
});
