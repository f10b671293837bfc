/**
 * Opens the store: embedded SQLite (WAL, in the data folder) by default,
 * PostgreSQL when a `postgres://` URL is given (several replicas share it).
 * Also keeps a cheap change version per topic, so caches (settings) re-read
 * only when some process committed a change — never on a blind TTL.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Insertable,
  Kysely,
  PostgresDialect,
  SqliteDialect,
  SqliteDriver,
  sql,
} from 'kysely';
import type pg from 'pg';
import { GatehouseError } from '../errors.js';
import { LocalLocks, type Locks, PostgresLocks } from './locks.js';
import { migrate } from './migrations.js';
import type { Database } from './schema.js';

export type StoreKind = 'sqlite' | 'postgres';

/**
 * Counters to add to in a rollup table, in the same transaction as the rows they summarise: the row with
 * `key` is inserted, or its `add` columns are increased (an upsert). Give one increment per key per write,
 * in a stable order (PostgreSQL takes the row locks in that order, so concurrent writers never deadlock).
 */
export interface Increment {
  table: keyof Database & string;
  key: Readonly<Record<string, string | number>>;
  add: Readonly<Record<string, number>>;
}

/** Topics whose readers cache: a write to one bumps its version everywhere. */
export type ChangeTopic = 'settings' | 'tokens' | 'servers' | 'users' | 'sessions' | 'recent';

const CHANGE_CHANNEL = 'gatehouse_changes';

/** Channels for cross-process messages besides cache versions. */
export type MessageChannel =
  | 'gatehouse_events'
  | 'gatehouse_sessions'
  | 'gatehouse_session_messages'
  | 'gatehouse_recent'
  | 'gatehouse_rounds';
const MESSAGE_CHANNELS: readonly MessageChannel[] = [
  'gatehouse_events',
  'gatehouse_sessions',
  'gatehouse_session_messages',
  'gatehouse_recent',
  'gatehouse_rounds',
];

/** In-process listeners per channel, shared by both store kinds. */
class Listeners {
  private readonly byChannel = new Map<MessageChannel, Set<(payload: string) => void>>();
  add(channel: MessageChannel, listener: (payload: string) => void): () => void {
    let set = this.byChannel.get(channel);
    if (!set) {
      set = new Set();
      this.byChannel.set(channel, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }
  emit(channel: MessageChannel, payload: string): void {
    for (const listener of this.byChannel.get(channel) ?? []) {
      try {
        listener(payload);
      } catch {
        // one failing listener must not starve the others
      }
    }
  }
}

export interface Store {
  readonly kind: StoreKind;
  readonly db: Kysely<Database>;
  /** Where the data lives, for messages: a file path or the database URL without its password. */
  readonly location: string;
  /**
   * A value that changes whenever any process commits a change to `topic` (SQLite may also change it on
   * unrelated commits by other processes, which only costs a re-read). Compare, never interpret.
   */
  version(topic: ChangeTopic): string;
  /**
   * Runs writes whose commit need not wait for the disk (the audit trail's call rows, committed by group
   * before their calls are answered): SQLite `synchronous = NORMAL` on the one connection for their duration (the
   * WAL reaches the disk with the next synced commit or checkpoint), PostgreSQL `synchronous_commit
   * = off` for their transaction. Both stay crash-consistent; only a power cut can lose them. Every
   * other write keeps waiting for the disk, and none of this blocks the event loop on an fsync.
   */
  relaxedWrite<T>(fn: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  /**
   * Appends rows to `table` as one relaxed write (see `relaxedWrite`), atomically. The audit trail's
   * group commit: on SQLite a statement prepared once per column set, run in one transaction, with no
   * query building per call; on PostgreSQL one multi-row insert. `increments` (rollups of these rows) are
   * upserted in the same transaction: on SQLite by statements prepared once per shape, on PostgreSQL one
   * multi-row upsert per table.
   */
  relaxedInsert<T extends keyof Database & string>(
    table: T,
    rows: readonly Insertable<Database[T]>[],
    increments?: readonly Increment[],
  ): Promise<void>;
  /** Announces a committed change to `topic` to this and every other process. */
  changed(topic: ChangeTopic): Promise<void>;
  /**
   * Cross-process messages (PostgreSQL NOTIFY; within one process on SQLite, which has no replicas).
   * `publish` is best effort: a listener that was down re-reads from the table it is told about.
   */
  publish(channel: MessageChannel, payload: string): Promise<void>;
  subscribe(channel: MessageChannel, listener: (payload: string) => void): () => void;
  /**
   * Called whenever the cross-process message channel may have missed messages (PostgreSQL: after the
   * LISTEN connection is back); a listener re-reads what it is told about then.
   */
  onReconnect(listener: () => void): () => void;
  /** Named locks across every process on this store (`locks.ts`): one holder of a key at a time. */
  readonly locks: Locks;
  close(): Promise<void>;
}

/** How long a statement waits for another connection's write lock before it fails. */
const SQLITE_BUSY_WAIT_MS = 10_000;

const sleepMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs a statement, and while the file is locked by another connection (`SQLITE_BUSY`), again after
 * short asynchronous waits. better-sqlite3's own busy timeout waits synchronously, freezing the event
 * loop: the connection holding the lock could then never finish a transaction that spans several
 * turns of it (two handles in one process) and every request of this process would stall meanwhile.
 */
async function patiently<T>(run: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + SQLITE_BUSY_WAIT_MS;
  for (let wait = 1; ; wait = Math.min(wait * 2, 50)) {
    try {
      return await run();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('SQLITE_BUSY') || Date.now() >= deadline) throw error;
    }
    await sleepMs(wait);
  }
}

/** better-sqlite3's driver, but transactions take the write lock up front (`BEGIN IMMEDIATE`), so two
 * processes writing the same file wait for each other instead of failing on lock upgrade, and a locked
 * file is waited for without blocking the event loop (`patiently`). */
class ImmediateSqliteDriver extends SqliteDriver {
  private readonly patient = new WeakMap<DatabaseConnection, DatabaseConnection>();

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    let wrapped = this.patient.get(connection);
    if (!wrapped) {
      wrapped = {
        executeQuery: (query) => patiently(() => connection.executeQuery(query)),
        streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
      };
      this.patient.set(connection, wrapped);
    }
    return wrapped;
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly database: SqliteDatabase.Database) {
    super({ database });
  }
  override createDriver() {
    return new ImmediateSqliteDriver({ database: this.database });
  }
}

export interface StoreOptions {
  dataDir: string;
  databaseUrl?: string | undefined;
}

export async function openStore(options: StoreOptions): Promise<Store> {
  const store = options.databaseUrl ? await openPostgres(options.databaseUrl) : openSqlite(options.dataDir);
  try {
    await migrate(store.db, store.kind);
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

function openSqlite(dataDir: string): Store {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = join(dataDir, 'gatehouse.db');
  let raw: SqliteDatabase.Database;
  try {
    raw = new SqliteDatabase(file, { timeout: SQLITE_BUSY_WAIT_MS });
  } catch (error) {
    throw new GatehouseError('internal_error', `Cannot open the SQLite store at ${file}.`, undefined, { cause: error });
  }
  raw.pragma('journal_mode = WAL');
  // FULL: a commit is on disk before it is acknowledged, so not even a power cut loses an acknowledged write.
  raw.pragma('synchronous = FULL');
  raw.pragma('foreign_keys = ON');
  // Opened (nothing else runs yet): from now on no synchronous busy wait; a locked file is waited for
  // asynchronously (`patiently`).
  raw.pragma('busy_timeout = 0');
  const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect(raw) });
  // Prepared once (`raw.pragma()` would prepare a statement per call), and read once per turn of the event
  // loop: a request asks for several topics' versions in a row, and a commit by another process is not
  // told apart from one a moment later anyway.
  const dataVersionStatement = raw.prepare('pragma data_version').pluck();
  const relaxed = raw.prepare('pragma synchronous = NORMAL');
  const synced = raw.prepare('pragma synchronous = FULL');
  const insertStatements = new Map<string, SqliteDatabase.Statement>();
  const upsertStatements = new Map<string, SqliteDatabase.Statement>();
  const appendRows = raw.transaction(
    (table: string, rows: readonly Record<string, unknown>[], increments: readonly Increment[]) => {
      for (const row of rows) {
        const columns = Object.keys(row).filter((column) => row[column] !== undefined);
        const key = `${table}(${columns.join(',')})`;
        let insert = insertStatements.get(key);
        if (!insert) {
          // Names come from the typed row objects of this code base, never from input; quoted all the same.
          const quoted = columns.map((column) => `"${column.replaceAll('"', '""')}"`);
          insert = raw.prepare(
            `insert into "${table}" (${quoted.join(', ')}) values (${columns.map(() => '?').join(', ')})`,
          );
          insertStatements.set(key, insert);
        }
        insert.run(...columns.map((column) => row[column]));
      }
      for (const increment of increments) {
        const keys = Object.keys(increment.key);
        const adds = Object.keys(increment.add);
        const shape = `${increment.table}(${keys.join(',')}|${adds.join(',')})`;
        let upsert = upsertStatements.get(shape);
        if (!upsert) {
          upsert = raw.prepare(upsertSql(increment.table, keys, adds));
          upsertStatements.set(shape, upsert);
        }
        upsert.run(...keys.map((k) => increment.key[k]), ...adds.map((a) => increment.add[a]));
      }
    },
  );
  let dataVersionThisTurn: unknown;
  const dataVersion = () => {
    if (dataVersionThisTurn === undefined) {
      dataVersionThisTurn = dataVersionStatement.get();
      setImmediate(() => {
        dataVersionThisTurn = undefined;
      });
    }
    return dataVersionThisTurn;
  };
  const local = new Map<ChangeTopic, number>();
  const listeners = new Listeners();
  const locks = new LocalLocks();
  return {
    kind: 'sqlite',
    locks,
    // One process: its messages cannot be missed.
    onReconnect: () => () => {},
    publish: async (channel, payload) => listeners.emit(channel, payload),
    subscribe: (channel, listener) => listeners.add(channel, listener),
    db,
    location: file,
    // data_version changes when another connection (another process) commits; `local` covers our own writes.
    version: (topic) => `${dataVersion()}:${local.get(topic) ?? 0}`,
    changed: async (topic) => {
      local.set(topic, (local.get(topic) ?? 0) + 1);
    },
    relaxedInsert: (table, rows, increments = []) => {
      if (rows.length === 0 && increments.length === 0) return Promise.resolve();
      // Holding Kysely's one connection keeps these statements out of any transaction it has open.
      return db.connection().execute(() =>
        patiently(async () => {
          relaxed.run();
          try {
            appendRows.immediate(table, rows as readonly Record<string, unknown>[], increments);
          } finally {
            synced.run();
          }
        }),
      );
    },
    // The connection is held for the whole run, so no other write commits under the relaxed setting.
    relaxedWrite: (fn) =>
      db.connection().execute(async (connection) => {
        // Prepared once and run directly: this wraps every audit group, on the calls' path.
        relaxed.run();
        try {
          return await fn(connection);
        } finally {
          synced.run();
        }
      }),
    close: async () => {
      await locks.close();
      await db.destroy();
    },
  };
}

/** `insert … on conflict (keys) do update set add = add + excluded.add`, the same text on SQLite and PostgreSQL. */
function upsertSql(table: string, keys: readonly string[], adds: readonly string[]): string {
  // Names come from this code base's rollup definitions, never from input; quoted all the same.
  const q = (name: string) => `"${name.replaceAll('"', '""')}"`;
  const columns = [...keys, ...adds];
  return (
    `insert into ${q(table)} (${columns.map(q).join(', ')}) values (${columns.map(() => '?').join(', ')}) ` +
    `on conflict (${keys.map(q).join(', ')}) do update set ` +
    adds.map((a) => `${q(a)} = ${q(table)}.${q(a)} + excluded.${q(a)}`).join(', ')
  );
}

/** Query parameters the PostgreSQL driver (pg-connection-string) reads as secrets. */
const SECRET_QUERY_PARAMETERS = ['password', 'sslpassword'];

/** A database URL fit for messages: the password, if any, replaced, in the user part and the query alike. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    for (const name of [...parsed.searchParams.keys()]) {
      if (SECRET_QUERY_PARAMETERS.includes(name.toLowerCase())) parsed.searchParams.set(name, '***');
    }
    return parsed.toString();
  } catch {
    return 'postgres://(unparseable URL)';
  }
}

/** How long opening a PostgreSQL connection may take (the pool's and the LISTEN connection's). */
const POSTGRES_CONNECT_MS = 10_000;

async function openPostgres(url: string): Promise<Store> {
  // Loaded only for PostgreSQL: a SQLite gateway (the default) starts without it.
  const { default: pgModule } = await import('pg');
  // int8 (counts, bigserial ids) as numbers: every value Gatehouse stores there is far below 2^53.
  pgModule.types.setTypeParser(20, (value: string) => Number(value));
  const pool = new pgModule.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: POSTGRES_CONNECT_MS });
  pool.on('error', () => {}); // an idle client's failure surfaces on the next query instead of crashing
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    await sql`select 1`.execute(db);
  } catch (error) {
    await db.destroy();
    throw new GatehouseError('internal_error', `Cannot reach PostgreSQL at ${redactUrl(url)}.`, undefined, {
      cause: error,
    });
  }

  const counters = new Map<ChangeTopic, number>();
  let listening = false;
  let epoch = 0;
  let closed = false;
  let listener: pg.Client | undefined;
  const listeners = new Listeners();
  const reconnected = new Set<() => void>();
  let connectedOnce = false;
  const locks = new PostgresLocks(url);

  const bumpAll = () => {
    for (const topic of ['settings', 'tokens', 'servers', 'users', 'sessions'] as const)
      counters.set(topic, (counters.get(topic) ?? 0) + 1);
  };
  const listen = async (): Promise<void> => {
    if (closed) return;
    // A connect that stalls is retried like one that fails, or this replica would stay deaf for good.
    const client = new pgModule.Client({ connectionString: url, connectionTimeoutMillis: POSTGRES_CONNECT_MS });
    client.on('notification', (message) => {
      if (message.channel === CHANGE_CHANNEL) {
        const topic = message.payload as ChangeTopic;
        counters.set(topic, (counters.get(topic) ?? 0) + 1);
      } else listeners.emit(message.channel as MessageChannel, message.payload ?? '');
    });
    // An error, or an end without one (the server closed the connection): listen again until it works.
    const lost = () => {
      if (listener !== client) return;
      listening = false;
      listener = undefined;
      client.end().catch(() => {});
      relisten();
    };
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGE_CHANNEL}`);
      for (const channel of MESSAGE_CHANNELS) await client.query(`LISTEN ${channel}`);
    } catch (error) {
      client.end().catch(() => {});
      throw error;
    }
    listener = client;
    listening = true;
    // Anything may have changed while we were not listening.
    bumpAll();
    if (connectedOnce) {
      for (const fn of reconnected) {
        try {
          fn();
        } catch {
          // one failing listener must not starve the others
        }
      }
    }
    connectedOnce = true;
  };
  // Until it works again: a database that stays down for a while must not leave this replica deaf.
  const relisten = () => {
    if (!closed) setTimeout(() => void listen().catch(relisten), 500).unref();
  };
  await listen();

  return {
    kind: 'postgres',
    db,
    location: redactUrl(url),
    // While the LISTEN connection is down nothing can be trusted: every call returns a fresh value.
    version: (topic) => (listening ? `${counters.get(topic) ?? 0}` : `down:${++epoch}`),
    changed: async (topic) => {
      counters.set(topic, (counters.get(topic) ?? 0) + 1);
      await sql`select pg_notify(${CHANGE_CHANNEL}, ${topic})`.execute(db);
    },
    publish: async (channel, payload) => {
      await sql`select pg_notify(${channel}, ${payload})`.execute(db);
    },
    subscribe: (channel, listener) => listeners.add(channel, listener),
    onReconnect: (fn) => {
      reconnected.add(fn);
      return () => reconnected.delete(fn);
    },
    locks,
    relaxedInsert: async (table, rows, increments = []) => {
      if (rows.length === 0 && increments.length === 0) return;
      // biome-ignore lint/suspicious/noExplicitAny: the table is generic; the rows are typed by the caller
      const anyTable = db as Kysely<any>;
      if (increments.length === 0) {
        // Rows alone (an audit group): one statement, committed on its own, instead of begin, `set local`, insert
        // and commit — a round trip each, and this runs for every group of calls. `set_config(…, true)` is
        // `set local` for the statement's own transaction, so its commit does not wait for the WAL flush either
        // (and nothing outlives it on a pooled connection); the CTE runs because the RETURNING reads it.
        await anyTable
          .with('relaxed', (qb) =>
            qb.selectNoFrom(sql<string>`set_config('synchronous_commit', 'off', true)`.as('mode')),
          )
          .insertInto(table)
          .values(rows as readonly Record<string, unknown>[] as Record<string, unknown>[])
          .returning(sql<string>`(select mode from relaxed)`.as('mode'))
          .execute();
        return;
      }
      await db.transaction().execute(async (trx) => {
        await sql`set local synchronous_commit = off`.execute(trx);
        // biome-ignore lint/suspicious/noExplicitAny: the table is generic; the rows are typed by the caller
        const untyped = trx as Kysely<any>;
        if (rows.length > 0)
          await untyped
            .insertInto(table)
            .values(rows as readonly Record<string, unknown>[] as Record<string, unknown>[])
            .execute();
        // One multi-row upsert per table and shape, in the order given (keys are unique within a write).
        const groups = new Map<string, Increment[]>();
        for (const increment of increments) {
          const shape = `${increment.table}(${Object.keys(increment.key).join(',')}|${Object.keys(increment.add).join(',')})`;
          const group = groups.get(shape);
          if (group) group.push(increment);
          else groups.set(shape, [increment]);
        }
        for (const group of groups.values()) {
          const first = group[0] as Increment;
          const keys = Object.keys(first.key);
          const adds = Object.keys(first.add);
          await untyped
            .insertInto(first.table)
            .values(group.map((i) => ({ ...i.key, ...i.add })))
            .onConflict((oc) =>
              oc
                .columns(keys)
                .doUpdateSet(
                  Object.fromEntries(
                    adds.map((a) => [a, sql`${sql.ref(`${first.table}.${a}`)} + ${sql.ref(`excluded.${a}`)}`]),
                  ),
                ),
            )
            .execute();
        }
      });
    },
    relaxedWrite: (fn) =>
      db.transaction().execute(async (trx) => {
        await sql`set local synchronous_commit = off`.execute(trx);
        return fn(trx);
      }),
    close: async () => {
      closed = true;
      await listener?.end().catch(() => {});
      await locks.close();
      await db.destroy();
    },
  };
}
