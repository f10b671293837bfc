/**
 * Named locks across the fleet: at most one holder of a key at a time, in every process on one store.
 *
 * PostgreSQL: session-level advisory locks (`pg_try_advisory_lock`) on one dedicated connection per
 * process, so a lock lives exactly as long as its holder does — a replica that dies (or whose
 * connection drops) releases every lock it held, and another replica's next `acquire` takes it over
 * (hand-over). The key is hashed with the schema's name, so stores in different schemas of one
 * database never contend. SQLite has one process: the lock is a process-local set.
 *
 * Within one process a key is held at most once too (advisory locks are re-entrant per connection).
 * A handle's `signal` aborts when the lock is lost (the connection died) or released: the holder
 * stops its work then. Generic on purpose: list watches (one watcher per upstream) and token
 * refreshes (one refresh per grant) both use it.
 */
import type pg from 'pg';

export interface LockHandle {
  readonly key: string;
  /** Aborted when the lock is released or lost (its connection died): stop the work it guards. */
  readonly signal: AbortSignal;
  /** Gives the lock up; idempotent. */
  release(): Promise<void>;
}

export interface Locks {
  /**
   * Whether other processes take these locks too (PostgreSQL): a lock taken on the first try may have been
   * another replica's a moment ago, so whatever it guarded may have changed unseen meanwhile.
   */
  readonly shared: boolean;
  /** Takes `key` if no one (in any process) holds it; `undefined` when someone does. Never waits. */
  acquire(key: string): Promise<LockHandle | undefined>;
  /**
   * Runs `fn` while holding `key` and releases it after; `{ ran: false }` without running it when
   * someone else holds the key. `fn` should stop when `signal` aborts (the lock was lost).
   */
  withLock<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }>;
  /** Releases every lock this process holds. */
  close(): Promise<void>;
}

interface Held {
  controller: AbortController;
  release(): Promise<void>;
}

abstract class BaseLocks implements Locks {
  abstract readonly shared: boolean;
  protected readonly held = new Map<string, Held>();
  protected closed = false;

  abstract acquire(key: string): Promise<LockHandle | undefined>;

  async withLock<T>(
    key: string,
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<{ ran: true; value: T } | { ran: false }> {
    const handle = await this.acquire(key);
    if (!handle) return { ran: false };
    try {
      return { ran: true, value: await fn(handle.signal) };
    } finally {
      await handle.release();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.held.values()].map((h) => h.release()));
  }

  /** Records a lock held here and answers its handle; `unlock` gives it up in the store. */
  protected hold(key: string, unlock: () => Promise<void>): LockHandle {
    const controller = new AbortController();
    let released: Promise<void> | undefined;
    const entry: Held = {
      controller,
      release: () => {
        released ??= (async () => {
          if (this.held.get(key) === entry) this.held.delete(key);
          controller.abort();
          await unlock().catch(() => {});
        })();
        return released;
      },
    };
    this.held.set(key, entry);
    return { key, signal: controller.signal, release: entry.release };
  }
}

/** One process: a set of keys. */
export class LocalLocks extends BaseLocks {
  readonly shared = false;

  async acquire(key: string): Promise<LockHandle | undefined> {
    if (this.closed || this.held.has(key)) return undefined;
    return this.hold(key, async () => {});
  }
}

export interface PostgresLocksOptions {
  /** How often a connection holding locks is checked (a dead one loses them; default 5 s). */
  heartbeatMs?: number;
  /**
   * How long the connection may take to open, or to answer one query, before it counts as dead (default 10 s).
   * Its queries never wait on a lock (`pg_try_…`), so one that takes this long is a stalled connection.
   */
  deadlineMs?: number;
}

/** Advisory locks on a connection of their own, opened on first use and again after it dies. */
export class PostgresLocks extends BaseLocks {
  readonly shared = true;
  private client: Promise<pg.Client> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly heartbeatMs: number;
  private readonly deadlineMs: number;
  /** The connection's queries, one at a time (pg deprecates overlapping queries on one client). */
  private queries: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly url: string,
    options: PostgresLocksOptions = {},
  ) {
    super();
    this.heartbeatMs = options.heartbeatMs ?? 5_000;
    this.deadlineMs = options.deadlineMs ?? 10_000;
  }

  async acquire(key: string): Promise<LockHandle | undefined> {
    if (this.closed || this.held.has(key)) return undefined;
    const opened = this.connection();
    const client = await opened;
    const { rows } = await this.query<{ ok: boolean }>(
      opened,
      'select pg_try_advisory_lock(hashtextextended(current_schema() || $1, 0)) as ok',
      [`:${key}`],
    );
    if (!rows[0]?.ok) return undefined;
    // Raced with another acquire of the same key in this process (same connection: re-entrant): undo ours.
    if (this.held.has(key) || this.closed) {
      await this.unlock(client, key);
      return undefined;
    }
    return this.hold(key, () => this.unlock(client, key));
  }

  override async close(): Promise<void> {
    await super.close();
    clearInterval(this.heartbeat);
    const client = this.client;
    this.client = undefined;
    await client?.then((c) => c.end()).catch(() => {});
  }

  private async unlock(client: pg.Client, key: string): Promise<void> {
    // A lock on a connection that is gone was released with it.
    const opened = this.client;
    if (opened === undefined || (await opened.catch(() => undefined)) !== client) return;
    await this.query(opened, 'select pg_advisory_unlock(hashtextextended(current_schema() || $1, 0))', [`:${key}`]);
  }

  /**
   * A query on the lock connection. One that fails or times out leaves the connection's locks unknown (a
   * timed-out `pg_try_advisory_lock` may have taken its key after all), so the connection is dropped, which
   * releases all of them in the server, and their holders are told.
   */
  private async query<R extends pg.QueryResultRow>(
    opened: Promise<pg.Client>,
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    const run = this.queries.then(async () => (await opened).query<R>(text, values));
    this.queries = run.catch(() => {});
    try {
      return await run;
    } catch (error) {
      this.lost(opened);
      throw error;
    }
  }

  private connection(): Promise<pg.Client> {
    if (!this.client) {
      let opened: Promise<pg.Client> | undefined;
      const lost = () => opened && this.lost(opened);
      // Loaded only for PostgreSQL (see db.ts).
      opened = import('pg').then(async ({ default: pgModule }) => {
        const client = new pgModule.Client({
          connectionString: this.url,
          keepAlive: true,
          application_name: 'gatehouse-locks',
          connectionTimeoutMillis: this.deadlineMs,
          query_timeout: this.deadlineMs,
        });
        client.on('error', lost);
        client.on('end', lost);
        await client.connect();
        return client;
      });
      this.client = opened;
      opened.catch(lost);
      this.heartbeat ??= setInterval(() => void this.check(), this.heartbeatMs);
      this.heartbeat.unref();
    }
    return this.client;
  }

  /** The connection died: every lock on it is gone (the server released them); holders are told. */
  private lost(client: Promise<pg.Client>): void {
    if (this.client !== client) return;
    this.client = undefined;
    void client.then((c) => c.end()).catch(() => {});
    for (const [key, entry] of this.held) {
      this.held.delete(key);
      entry.controller.abort();
    }
  }

  /** Notices a connection that died silently while locks are held. */
  private async check(): Promise<void> {
    const current = this.client;
    if (!current || this.held.size === 0) return;
    // `query` drops the connection (and tells the holders) when it fails.
    await this.query(current, 'select 1', []).catch(() => {});
  }
}
