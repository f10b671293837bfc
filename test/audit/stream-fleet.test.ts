/**
 * The live event stream never skips: replicas (stores on one database) writing events concurrently,
 * every subscriber on every replica receives every event, counted; and events published while a
 * replica's LISTEN connection is down reach it as soon as it is back, without waiting for another.
 */
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { EventHub, type StreamEvent } from '../../src/audit/stream.js';
import { openStore, type Store } from '../../src/store/db.js';
import { eventually } from '../helpers/eventually.js';
import {
  POSTGRES_AVAILABLE,
  postgresTarget,
  type StoreTarget,
  sqliteTarget,
  TEST_DATABASE_URL,
} from '../helpers/stores.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Replica {
  store: Store;
  hub: EventHub;
  /** Per subscriber, the ids received. */
  received: number[][];
}

async function replicas(target: StoreTarget, n: number, urlParams: Record<string, string>[] = []): Promise<Replica[]> {
  const place = await target.fresh();
  cleanups.push(() => place.cleanup());
  const out: Replica[] = [];
  for (let i = 0; i < n; i++) {
    let databaseUrl = place.databaseUrl;
    if (databaseUrl && urlParams[i]) {
      const url = new URL(databaseUrl);
      for (const [k, v] of Object.entries(urlParams[i]!)) url.searchParams.set(k, v);
      databaseUrl = url.toString();
    }
    const store = await openStore({ dataDir: place.dataDir, databaseUrl });
    const hub = await EventHub.open(store);
    cleanups.push(async () => {
      hub.close();
      await store.close();
    });
    const received: number[][] = [[], []];
    for (const ids of received) hub.subscribe((event: StreamEvent) => ids.push(event.id));
    out.push({ store, hub, received });
  }
  return out;
}

/** Many concurrent writes from the `writers`: single events and batches, interleaved. */
async function writeConcurrently(writers: Replica[], rounds: number): Promise<number> {
  let total = 0;
  const writes: Promise<void>[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const [r, replica] of writers.entries()) {
      // Single events and batches of hundreds (a batch's rows draw ids while other batches draw theirs).
      const size = round % 3 === 0 ? 1 : 50 + ((round * 37 + r * 11) % 400);
      total += size;
      writes.push(
        replica.hub.publishMany(
          Array.from({ length: size }, (_, i) => ({ type: 'tool.called' as const, data: { r, round, i } })),
        ),
      );
    }
  }
  await Promise.all(writes);
  return total;
}

function expectEveryEvent(fleet: Replica[], total: number) {
  for (const replica of fleet) {
    for (const ids of replica.received) {
      expect(ids.length).toBe(total);
      expect(new Set(ids).size).toBe(total);
    }
  }
}

describe('event stream across replicas [sqlite]', () => {
  it('every subscriber receives every event of concurrent writers', async () => {
    const fleet = await replicas(sqliteTarget, 1);
    const total = await writeConcurrently(fleet, 30);
    await eventually(() => expectEveryEvent(fleet, total));
  });
});

describe.skipIf(!POSTGRES_AVAILABLE)('event stream across replicas [postgres]', () => {
  it('every subscriber on every replica receives every event of concurrent writers, counted', async () => {
    // Two replicas write; every replica reads, the third only reads (its reads wait for no write of its own).
    const fleet = await replicas(postgresTarget, 3);
    const total = await writeConcurrently(fleet.slice(0, 2), 30);
    await eventually(() => expectEveryEvent(fleet, total), 20_000);
    // In id order, so `Last-Event-ID` resumes where a subscriber stopped.
    for (const replica of fleet)
      for (const ids of replica.received) expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it('does not step past an event whose commit is slower than a later one', async () => {
    const fleet = await replicas(postgresTarget, 3);
    const [slow, fast] = fleet;
    // A slow commit (a disk hiccup, a busy replica): inserting a row marked "slow" takes 300 ms after its id is drawn.
    await sql`create function gh_test_slow_insert() returns trigger language plpgsql as
      $$ begin if new.data like '%"slow"%' then perform pg_sleep(0.3); end if; return new; end $$`.execute(
      slow!.store.db,
    );
    await sql`create trigger gh_test_slow before insert on stream_events for each row execute function gh_test_slow_insert()`.execute(
      slow!.store.db,
    );
    const slowWrite = slow!.hub.publish('settings.changed', { slow: true });
    await new Promise((resolve) => setTimeout(resolve, 50)); // its id is drawn
    await fast!.hub.publish('settings.changed', { fast: true });
    await slowWrite;
    await eventually(() => expectEveryEvent(fleet, 2));
  });

  it("delivers events published while a replica's LISTEN connection was down once it is back", async () => {
    const name = `gh_listen_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const [writer, reader] = await replicas(postgresTarget, 2, [{}, { application_name: name }]);
    await writer!.hub.publish('settings.changed', { n: 0 });
    await eventually(() => expect(reader!.received[0]).toHaveLength(1));

    // The reader's LISTEN connection dies (its last statement was LISTEN).
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    try {
      const killed = await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and query like 'LISTEN%'`,
        [name],
      );
      expect(killed.rowCount).toBe(1);
    } finally {
      await admin.end();
    }
    // Published while it is down: no NOTIFY reaches it. Nothing is published after.
    await writer!.hub.publishMany([
      { type: 'settings.changed', data: { n: 1 } },
      { type: 'settings.changed', data: { n: 2 } },
    ]);
    await eventually(() => expect(reader!.received[0]).toHaveLength(3));
    expect(reader!.received[1]).toHaveLength(3);
  });
});
