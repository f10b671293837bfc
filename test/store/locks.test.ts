/**
 * The store's named locks: one holder per key; released on release or close; on PostgreSQL, across
 * stores (replicas) on one schema, with hand-over when the holder's connection dies.
 */
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.js';
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
});
