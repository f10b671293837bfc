/**
 * Keeps the registry's lists current while upstreams change them. Each enabled Streamable HTTP
 * server whose tools are pinned gets one watch: a connection of its own that hears the upstream's
 * list-changed notifications (both eras, `upstream/list-watch.ts`); stdio servers are heard on their
 * supervised connection and call `schedule` themselves. A notification schedules a refresh — the
 * registry's handshake, in the background: lists stored, changed tools quarantined, agents told.
 *
 * A watch that drops (its 2026-07-28 subscription ends, or its 2025-era session's periodic ping
 * fails: an upstream that restarted forgot the session) reconnects with backoff and refreshes once connected again, since a change may have come
 * and gone unheard meanwhile; so does every watch started with the gateway, or by a change of its
 * record (another URL, headers or network policy; enabled again).
 *
 * Across a fleet, one replica watches each upstream: a watch holds the store's lock
 * `list-watch:<id>` while it runs (`store/locks.ts`), so a change is refreshed and audited once.
 * The other replicas try for the lock every `lockRetryMs`; when the watching replica dies or
 * stops, one of them takes over, and refreshes once connected (a change may have gone unheard); on a
 * fleet's shared locks every watch refreshes once connected, since no replica can tell a takeover apart.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { findGatehouseError } from '../errors.js';
import type { Logger } from '../logging.js';
import { parseJson } from '../store/json.js';
import { LocalLocks, type LockHandle, type Locks } from '../store/locks.js';
import type { ServerTable } from '../store/schema.js';
import type { ListWatchHandle, UpstreamPool, UpstreamTarget } from '../upstream/index.js';
import { type ServerStore, type StoredAuth, upstreamTargetOf } from './records.js';
import type { RefreshTrigger } from './service.js';

export interface ListWatchTimings {
  /** Notifications within this window make one refresh. */
  debounceMs: number;
  /** The first reconnect waits this long, doubling per failure up to `retryMaxMs`. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** How often an idle watch on a 2025-era session checks that the session still works. */
  pingIntervalMs: number;
  /** A watch that lasted less than this counts as a failure: an upstream that drops every watch at once backs off. */
  stableMs: number;
  /** At most one refresh per server per this interval, however often its upstream says its lists changed. */
  minRefreshIntervalMs: number;
  /** How often a replica that does not hold a server's watch lock tries to take it over. */
  lockRetryMs: number;
}

export const DEFAULT_LIST_WATCH_TIMINGS: ListWatchTimings = {
  debounceMs: 300,
  retryBaseMs: 1_000,
  retryMaxMs: 60_000,
  pingIntervalMs: 30_000,
  stableMs: 60_000,
  minRefreshIntervalMs: 5_000,
  lockRetryMs: 5_000,
};

export interface ListWatchersOptions {
  records: ServerStore;
  poolFor(privateNetwork: boolean): UpstreamPool;
  /** The registry's background handshake (`Registry.refresh`); `signal` aborts when the watches close. */
  refresh(id: string, trigger: RefreshTrigger, signal: AbortSignal): Promise<unknown>;
  logger: Logger;
  timings?: Partial<ListWatchTimings>;
  /** The store's locks (one watcher per server across the fleet); process-local when not given. */
  locks?: Locks;
}

export class ListWatchers {
  private readonly watches = new Map<string, ServerWatch>();
  /** Per server, the sync in progress: events for one server are applied in order. */
  private readonly syncs = new Map<string, Promise<void>>();
  private readonly refreshes: RefreshQueue;
  private readonly timings: ListWatchTimings;
  /** Aborted by `close()`: ends the waits and the refreshes in flight. */
  private readonly closing = new AbortController();
  private readonly locks: Locks;

  constructor(private readonly options: ListWatchersOptions) {
    this.timings = { ...DEFAULT_LIST_WATCH_TIMINGS, ...options.timings };
    this.locks = options.locks ?? new LocalLocks();
    this.refreshes = new RefreshQueue(this.timings, options.refresh, options.logger, this.closing.signal);
  }

  private get closed(): boolean {
    return this.closing.signal.aborted;
  }

  /**
   * Watches every server that should be watched; each refreshes once connected (changes while
   * Gatehouse was down). A store that cannot be read yet is tried again, with backoff, until closed.
   */
  async start(): Promise<void> {
    for (let failures = 0; !this.closed; failures++) {
      try {
        for (const server of await this.options.records.all()) await this.sync(server.id, true);
        return;
      } catch (error) {
        this.options.logger.warn({ err: error }, 'list watches could not read the servers; trying again');
        await this.pause(failures);
      }
    }
  }

  /**
   * A server's record may have changed: start, restart (new URL, headers or network policy) or stop
   * its watch; a watch started here refreshes once connected when `refreshOnConnect`.
   */
  sync(id: string, refreshOnConnect = false): Promise<void> {
    const next = (this.syncs.get(id) ?? Promise.resolve()).then(() => this.syncNow(id, refreshOnConnect));
    const settled = next.catch((error) =>
      this.options.logger.warn({ server: id, err: error }, 'list watch sync failed'),
    );
    this.syncs.set(id, settled);
    void settled.then(() => {
      if (this.syncs.get(id) === settled) this.syncs.delete(id);
    });
    return settled;
  }

  /** An upstream said a list changed (stdio servers report it here). */
  schedule(id: string, trigger: RefreshTrigger): void {
    if (!this.closed) this.refreshes.schedule(id, trigger);
  }

  /** The servers being watched, for tests and diagnostics. */
  watched(): string[] {
    return [...this.watches.keys()].sort();
  }

  /** The servers this replica watches now, holding their lock (the others watch elsewhere in the fleet). */
  holding(): string[] {
    return [...this.watches.values()]
      .filter((w) => w.holding)
      .map((w) => w.id)
      .sort();
  }

  async close(): Promise<void> {
    this.closing.abort();
    await Promise.all([...this.syncs.values()]);
    await Promise.all([...this.watches.values()].map((watch) => watch.stop()));
    this.watches.clear();
    await this.refreshes.close();
  }

  private async syncNow(id: string, refreshOnConnect: boolean, failures = 0): Promise<void> {
    let row: ServerTable | undefined;
    try {
      row = this.closed ? undefined : await this.options.records.getRow(id);
    } catch (error) {
      if (findGatehouseError(error)?.code !== 'mcp.not_found') {
        // The store failed, not the record: keep the watch as it is, and look again later.
        this.options.logger.warn({ server: id, err: error }, 'list watch could not read its server; trying again');
        await this.pause(failures);
        if (!this.closed) return this.syncNow(id, refreshOnConnect, failures + 1);
        return;
      }
    }
    let wanted: ReturnType<ListWatchers['targetOf']>;
    try {
      wanted = row && isWatchable(row) ? this.targetOf(row) : undefined;
    } catch (error) {
      // Its credentials cannot be opened (an env reference gone): no watch until the record is fixed.
      this.options.logger.warn({ server: id, err: error }, 'list watch cannot reach this server');
    }
    const current = this.watches.get(id);
    if (current && current.fingerprint === wanted?.fingerprint) return;
    if (current) {
      this.watches.delete(id);
      await current.stop();
    }
    if (!wanted || this.closed) return;
    const pool = this.options.poolFor(wanted.privateNetwork);
    this.watches.set(
      id,
      new ServerWatch(id, wanted.fingerprint, wanted.target, pool, {
        timings: this.timings,
        logger: this.options.logger,
        refreshOnConnect,
        changed: (trigger) => this.schedule(id, trigger),
        locks: this.locks,
      }),
    );
  }

  /** Waits before retry `failures` (backoff, as the watches reconnect); a close ends the wait. */
  private pause(failures: number): Promise<void> {
    const { retryBaseMs, retryMaxMs } = this.timings;
    const wait = Math.min(retryMaxMs, retryBaseMs * 2 ** failures);
    return sleep(wait, undefined, { signal: this.closing.signal }).catch(() => {});
  }

  private targetOf(row: ServerTable) {
    const connection = this.options.records.connectionOf(row);
    if (connection.transport === 'stdio') return undefined;
    const target = upstreamTargetOf(connection, row.id);
    // A digest, so the header values (secrets) are not kept around twice.
    const fingerprint = createHash('sha256')
      .update(
        JSON.stringify([
          connection.url,
          Object.entries(connection.headers).sort(),
          connection.privateNetwork,
          connection.transport,
        ]),
      )
      .digest('hex');
    return { target, fingerprint, privateNetwork: connection.privateNetwork };
  }
}

/** Enabled, over HTTP, and pinned by a first handshake (before that there is nothing to keep current). */
function isWatchable(row: ServerTable): boolean {
  // An OAuth server's lists are read with a grant's short-lived token, by a handshake; no standing watch holds one.
  if (row.enabled !== 1 || row.transport === 'stdio' || row.pinned_at === null) return false;
  return parseJson<StoredAuth>(row.auth, { type: 'none' }).type !== 'oauth';
}

interface WatchOwner {
  timings: ListWatchTimings;
  logger: Logger;
  refreshOnConnect: boolean;
  changed(trigger: RefreshTrigger): void;
  locks: Locks;
}

/**
 * One server's watch: take the server's lock (trying again every `lockRetryMs` while another replica
 * holds it), then connect, listen, ping while idle, reconnect with backoff — until stopped or the
 * lock is lost, when it is released and contended for again.
 */
class ServerWatch {
  private readonly stopping = new AbortController();
  private readonly done: Promise<void>;
  private lock: LockHandle | undefined;

  constructor(
    readonly id: string,
    readonly fingerprint: string,
    private readonly target: UpstreamTarget,
    private readonly pool: UpstreamPool,
    private readonly owner: WatchOwner,
  ) {
    this.done = this.run();
  }

  /** Whether this replica holds the server's watch lock (and so watches it). */
  get holding(): boolean {
    return this.lock !== undefined && !this.lock.signal.aborted;
  }

  stop(): Promise<void> {
    this.stopping.abort();
    return this.done;
  }

  private async run(): Promise<void> {
    const { signal } = this.stopping;
    // Across a fleet, a watch refreshes once connected even when it was started by a handshake that had just
    // seen the lists: a replica can hear of that handshake late (after the replica that watched meanwhile was
    // drained), and a free lock taken on the first try says nothing of who held it before.
    let refreshOnConnect = this.owner.refreshOnConnect || this.owner.locks.shared;
    while (!signal.aborted) {
      const lock = await this.owner.locks.acquire(`list-watch:${this.id}`).catch((error) => {
        this.owner.logger.debug({ server: this.id, err: error }, 'list watch lock unavailable');
        return undefined;
      });
      if (!lock) {
        // Another replica watches meanwhile; what changed once that one is gone will not have been heard here.
        refreshOnConnect = true;
        await sleep(this.owner.timings.lockRetryMs, undefined, { signal }).catch(() => {});
        continue;
      }
      this.lock = lock;
      try {
        await this.watchWhileHeld(AbortSignal.any([signal, lock.signal]), refreshOnConnect);
      } finally {
        this.lock = undefined;
        await lock.release();
      }
      // Lost the lock (its connection died): whoever watches next refreshes, as a change may have gone unheard.
      refreshOnConnect = true;
    }
  }

  private async watchWhileHeld(signal: AbortSignal, refreshOnConnect: boolean): Promise<void> {
    const { timings, logger } = this.owner;
    let failures = 0;
    let connectedBefore = false;
    while (!signal.aborted) {
      let handle: ListWatchHandle | undefined;
      let connectedAt: number | undefined;
      try {
        handle = await this.pool.watchLists(this.target, () => this.owner.changed('list_changed'), signal);
        connectedAt = Date.now();
        if (connectedBefore || refreshOnConnect) this.owner.changed('reconnected');
        connectedBefore = true;
        await this.watch(handle, signal);
      } catch (error) {
        if (signal.aborted) break;
        // The first failure is news; a server that stays down is reported once, not every minute.
        const log = failures === 0 ? logger.warn.bind(logger) : logger.debug.bind(logger);
        log({ server: this.id, err: error, failures: failures + 1 }, 'list watch lost its upstream; reconnecting');
      } finally {
        await handle?.close().catch(() => {});
      }
      // Only a watch that lasted starts the backoff over: one dropped at once (or never made) is a failure.
      const lasted = connectedAt !== undefined && Date.now() - connectedAt >= timings.stableMs;
      failures = lasted ? 0 : failures + 1;
      if (signal.aborted) break;
      const wait = failures === 0 ? 0 : Math.min(timings.retryMaxMs, timings.retryBaseMs * 2 ** (failures - 1));
      await sleep(wait, undefined, { signal }).catch(() => {});
    }
  }

  /** Until the watch ends (resolves) or its ping fails (rejects); a stop resolves it. */
  private async watch(handle: ListWatchHandle, signal: AbortSignal): Promise<void> {
    const { ping } = handle;
    if (!ping) {
      // 2026-07-28: no session to check; the subscription ends when the upstream or the way to it does.
      let onStop = () => {};
      const stopped = new Promise<void>((resolve) => {
        onStop = resolve;
        signal.addEventListener('abort', onStop, { once: true });
      });
      await Promise.race([handle.ended, stopped]).finally(() => signal.removeEventListener('abort', onStop));
      return;
    }
    let ended = false;
    void handle.ended.then(() => {
      ended = true;
    });
    while (!signal.aborted && !ended) {
      const tick = sleep(this.owner.timings.pingIntervalMs, 'ping' as const, { signal }).catch(
        () => 'stopped' as const,
      );
      const outcome = await Promise.race([handle.ended.then(() => 'ended' as const), tick]);
      if (outcome !== 'ping') return;
      await ping();
    }
  }
}

/**
 * Per server: notifications within the debounce window make one refresh, at most one refresh starts
 * per `minRefreshIntervalMs`, and one arriving during a refresh makes one more after it.
 */
class RefreshQueue {
  private readonly entries = new Map<
    string,
    { timer?: NodeJS.Timeout; running?: Promise<void>; trigger: RefreshTrigger; again?: RefreshTrigger }
  >();
  /** When each server's last refresh started (kept after its entry is gone, for the rate limit). */
  private readonly lastStarted = new Map<string, number>();

  constructor(
    private readonly timings: Pick<ListWatchTimings, 'debounceMs' | 'minRefreshIntervalMs'>,
    private readonly refresh: (id: string, trigger: RefreshTrigger, signal: AbortSignal) => Promise<unknown>,
    private readonly logger: Logger,
    private readonly closing: AbortSignal,
  ) {}

  schedule(id: string, trigger: RefreshTrigger): void {
    if (this.closing.aborted) return;
    const entry = this.entries.get(id);
    if (entry?.running) {
      entry.again ??= trigger;
      return;
    }
    if (entry?.timer) return;
    const earliest = (this.lastStarted.get(id) ?? Number.NEGATIVE_INFINITY) + this.timings.minRefreshIntervalMs;
    const delay = Math.max(this.timings.debounceMs, earliest - Date.now());
    const next = { trigger, timer: setTimeout(() => this.run(id), delay) };
    next.timer.unref();
    this.entries.set(id, next);
  }

  private run(id: string): void {
    const entry = this.entries.get(id);
    if (!entry || this.closing.aborted) return;
    entry.timer = undefined;
    this.lastStarted.set(id, Date.now());
    entry.running = this.refresh(id, entry.trigger, this.closing)
      .then(
        () => undefined,
        (error) => {
          if (!this.closing.aborted) this.logger.warn({ server: id, err: error }, 'list refresh failed');
        },
      )
      .finally(() => {
        const again = entry.again;
        this.entries.delete(id);
        if (again) this.schedule(id, again);
      });
  }

  /** Cancels what waits, and waits for the refreshes in flight (`closing` aborted them). */
  async close(): Promise<void> {
    for (const entry of this.entries.values()) clearTimeout(entry.timer);
    await Promise.all([...this.entries.values()].map((entry) => entry.running));
    this.entries.clear();
  }
}
