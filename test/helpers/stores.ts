/**
 * Runs a suite against both databases: a SQLite file in a temporary folder and
 * a fresh schema in the test PostgreSQL. PostgreSQL is skipped (saying so) when
 * unreachable — except under CI=true, where its absence fails the run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe } from 'vitest';
import { openStore, type Store } from '../../src/store/db.js';

export const TEST_DATABASE_URL = process.env.GATEHOUSE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function postgresReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

export const POSTGRES_AVAILABLE = await postgresReachable();
if (!POSTGRES_AVAILABLE) {
  if (process.env.CI === 'true') {
    throw new Error(`PostgreSQL is required under CI=true but ${TEST_DATABASE_URL} is unreachable.`);
  }
  process.stderr.write(
    `\n[gatehouse tests] PostgreSQL at ${TEST_DATABASE_URL} is unreachable: SKIPPING the PostgreSQL half.\n`,
  );
}

export interface StoreTarget {
  kind: 'sqlite' | 'postgres';
  /** A fresh, empty place for one store: a temp folder, or a new PostgreSQL schema. */
  fresh(): Promise<{ dataDir: string; databaseUrl: string | undefined; cleanup(): Promise<void> }>;
}

export const sqliteTarget: StoreTarget = {
  kind: 'sqlite',
  async fresh() {
    const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
    return { dataDir, databaseUrl: undefined, cleanup: async () => rmSync(dataDir, { recursive: true, force: true }) };
  },
};

export const postgresTarget: StoreTarget = {
  kind: 'postgres',
  async fresh() {
    const schema = `gh_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
    await admin.end();
    const url = new URL(TEST_DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${schema}`);
    const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
    return {
      dataDir,
      databaseUrl: url.toString(),
      async cleanup() {
        const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
        await client.connect();
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.end();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  },
};

/** `describe` once per database; the PostgreSQL block is skipped (visibly) when unreachable outside CI. */
export function describeEachStore(name: string, suite: (target: StoreTarget) => void): void {
  describe(`${name} [sqlite]`, () => suite(sqliteTarget));
  describe.skipIf(!POSTGRES_AVAILABLE)(`${name} [postgres]`, () => suite(postgresTarget));
}

/** Opens a store on a fresh place and returns it with its cleanup. */
export async function freshStore(
  target: StoreTarget,
): Promise<{ store: Store; dataDir: string; databaseUrl: string | undefined; cleanup(): Promise<void> }> {
  const place = await target.fresh();
  const store = await openStore(place);
  return {
    store,
    dataDir: place.dataDir,
    databaseUrl: place.databaseUrl,
    cleanup: async () => {
      await store.close();
      await place.cleanup();
    },
  };
}
