/**
 * The tools each agent called most recently: a convenience of search mode, never a permission. Listed
 * by name, so an agent's list only changes when a new tool enters it.
 *
 * Shared by every replica through the store (`recent_tools`, at most `MAX_PER_AGENT` rows per token),
 * with an in-process cache so a call never waits for the store:
 * - `record` (on every call) updates the cache at once and queues the write; queued writes go in one
 *   upsert every `flushMs`. A call that changes the agent's list (a tool enters it) is written at once,
 *   then announced: the `recent` change topic moves (every replica's cached lists are re-read on their
 *   next use, behind the store's cheap version check, as settings are) and a message names the agents,
 *   so the replicas holding their sessions tell them their list changed.
 * - `recent` (on a list) answers from the cache while the topic has not moved; otherwise one read of
 *   the agent's rows, merged with the writes still queued here.
 * What a replica lists is therefore exact for every change of the list; only the order among the tools
 * already listed (which decides the next one to leave it) may lag another replica's calls by up to
 * `flushMs`. Without a store (tests of the pieces), the same in process memory only.
 */
import type { Logger } from '../../../logging.js';
import type { Store } from '../../../store/db.js';

const MAX_PER_AGENT = 50;
const MAX_AGENTS = 10_000;
/** Queued writes kept while the store refuses them; past it the oldest agents' are dropped. */
const MAX_QUEUED = 10_000;
const DEFAULT_FLUSH_MS = 250;
/** NOTIFY payloads stay under 8000 bytes: token ids are short, 100 a message is far below it. */
const IDS_PER_MESSAGE = 100;
const CHANNEL = 'gatehouse_recent';

interface Cached {
  /** Exposed names, most recent first. */
  names: string[];
  /** The store's `recent` version the names were read at ('' when never read: re-read on first use). */
  version: string;
}

export interface RecentToolsOptions {
  store?: Store | undefined;
  /** How long a call's write may wait to share one upsert with others (default 250 ms). */
  flushMs?: number;
  /** Another replica changed these agents' lists: tell their sessions here. */
  onRemoteChange?: (agentIds: readonly string[]) => void;
  logger?: Logger | undefined;
}

export class RecentTools {
  private readonly byAgent = new Map<string, Cached>();
  /** Writes not yet handed to the store: agent → name → last call (ms). */
  private queued = new Map<string, Map<string, number>>();
  /** The writes of the upsert in flight (still merged into reads until it commits). */
  private writing = new Map<string, Map<string, number>>();
  /** Agents whose list changed since the last flush: announced once their rows are written. */
  private changed = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private closed = false;
  private lastStamp = 0;
  /** Tells this process's own messages from other replicas'. */
  private readonly instance = Math.random().toString(36).slice(2, 10);
  private readonly store: Store | undefined;
  private readonly flushMs: number;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: RecentToolsOptions = {}) {
    this.store = options.store;
    this.flushMs = options.flushMs ?? DEFAULT_FLUSH_MS;
    const store = this.store;
    if (!store) {
      this.unsubscribe = () => {};
      return;
    }
    const unsubscribe = store.subscribe(CHANNEL, (payload) => this.remoteChange(payload));
    const unreconnect = store.onReconnect(() => this.byAgent.clear());
    this.unsubscribe = () => {
      unsubscribe();
      unreconnect();
    };
  }

  /** Notes a call; true when `name` was not among the agent's `window` most recent before. */
  record(agentId: string, name: string, window: number): boolean {
    const cached = this.byAgent.get(agentId) ?? { names: [], version: '' };
    const names = cached.names;
    const at = names.indexOf(name);
    const entered = at < 0 || at >= window;
    if (at >= 0) names.splice(at, 1);
    names.unshift(name);
    if (names.length > MAX_PER_AGENT) names.length = MAX_PER_AGENT;
    this.remember(agentId, cached);
    if (!this.store || this.closed) return entered && window > 0;
    let mine = this.queued.get(agentId);
    if (!mine) {
      mine = new Map();
      this.queued.set(agentId, mine);
    }
    // Strictly increasing within this process: calls in one millisecond keep their order.
    this.lastStamp = Math.max(Date.now(), this.lastStamp + 1);
    mine.set(name, this.lastStamp);
    this.dropExcess();
    if (entered && window > 0) {
      this.changed.add(agentId);
      this.schedule(0);
    } else this.schedule(this.flushMs);
    return entered && window > 0;
  }

  /** The agent's `count` most recent tools, in name order (the same set lists the same bytes). */
  async recent(agentId: string, count: number): Promise<string[]> {
    if (count <= 0) return [];
    return (await this.namesOf(agentId)).slice(0, count).sort();
  }

  /** Writes what is queued now (tests, shutdown); stops early when the store refuses it (a retry is set). */
  async flush(): Promise<void> {
    for (;;) {
      if (this.flushing) {
        await this.flushing;
        continue;
      }
      if (this.queued.size === 0) return;
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      if (!(await this.startFlush())) return;
    }
  }

  async close(): Promise<void> {
    await this.flush().catch(() => undefined);
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.unsubscribe();
  }

  // --- internals -------------------------------------------------------------------------------------------

  private async namesOf(agentId: string): Promise<string[]> {
    const cached = this.byAgent.get(agentId);
    if (!this.store) return cached?.names ?? [];
    // Read before the rows: a change committed meanwhile leaves this entry stale, so it is read again.
    const version = this.store.version('recent');
    if (cached && cached.version === version) return cached.names;
    const rows = await this.store.db
      .selectFrom('recent_tools')
      .select(['name', 'used_at'])
      .where('token_id', '=', agentId)
      .orderBy('used_at', 'desc')
      .orderBy('name')
      .limit(MAX_PER_AGENT)
      .execute();
    const at = new Map<string, number>(rows.map((r) => [r.name, Number(r.used_at)]));
    // This process's writes not yet committed are newer than what the store holds.
    for (const pending of [this.writing.get(agentId), this.queued.get(agentId)]) {
      for (const [name, ms] of pending ?? []) if ((at.get(name) ?? -1) < ms) at.set(name, ms);
    }
    const names = [...at.entries()]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, MAX_PER_AGENT)
      .map(([name]) => name);
    this.remember(agentId, { names, version });
    return names;
  }

  /** Map order is insertion order: re-inserting keeps the most active agents, the oldest go first. */
  private remember(agentId: string, cached: Cached): void {
    this.byAgent.delete(agentId);
    this.byAgent.set(agentId, cached);
    if (this.byAgent.size > MAX_AGENTS) this.byAgent.delete(this.byAgent.keys().next().value as string);
  }

  private dropExcess(): void {
    while (this.queued.size > MAX_QUEUED) this.queued.delete(this.queued.keys().next().value as string);
  }

  private schedule(ms: number): void {
    if (this.flushing) return; // the flush in flight schedules the next one
    if (this.timer) {
      if (ms > 0) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.startFlush();
    }, ms);
    this.timer.unref();
  }

  /** Hands the queued writes to the store; resolves false when it refused them (retried later). */
  private startFlush(): Promise<boolean> {
    if (this.flushing || this.queued.size === 0 || !this.store) return Promise.resolve(true);
    this.writing = this.queued;
    this.queued = new Map();
    const changed = [...this.changed];
    this.changed.clear();
    const done = this.write(this.store, this.writing, changed).then(
      () => {
        this.writing = new Map();
        return true;
      },
      (error) => {
        // Back in front of what was queued since (newer calls win), and retried later.
        for (const [agentId, names] of this.writing) {
          const queued = this.queued.get(agentId) ?? new Map<string, number>();
          for (const [name, ms] of names) if ((queued.get(name) ?? -1) < ms) queued.set(name, ms);
          this.queued.set(agentId, queued);
        }
        this.writing = new Map();
        for (const id of changed) this.changed.add(id);
        this.dropExcess();
        this.options.logger?.warn({ err: error }, 'recent tools: writing to the store failed (will retry)');
        if (this.timer) clearTimeout(this.timer);
        this.timer = setTimeout(() => {
          this.timer = undefined;
          void this.startFlush();
        }, 1000);
        this.timer.unref();
        return false;
      },
    );
    this.flushing = done.then(() => {
      this.flushing = undefined;
      if (this.queued.size > 0 && !this.timer && !this.closed) this.schedule(this.changed.size > 0 ? 0 : this.flushMs);
    });
    return done;
  }

  /** One upsert for the batch (a row only moves forward in time), the lists trimmed, then the announcement. */
  private async write(store: Store, batch: Map<string, Map<string, number>>, changed: string[]): Promise<void> {
    const rows = [...batch].flatMap(([tokenId, names]) =>
      [...names].map(([name, usedAt]) => ({ token_id: tokenId, name, used_at: usedAt })),
    );
    await store.db.transaction().execute(async (trx) => {
      for (let i = 0; i < rows.length; i += 500) {
        await trx
          .insertInto('recent_tools')
          .values(rows.slice(i, i + 500))
          .onConflict((oc) =>
            oc
              .columns(['token_id', 'name'])
              .doUpdateSet({ used_at: (eb) => eb.ref('excluded.used_at') })
              .where('recent_tools.used_at', '<', (eb) => eb.ref('excluded.used_at')),
          )
          .execute();
      }
      // A list only grows when a tool enters it: keep each such agent's newest rows.
      for (const tokenId of changed) {
        await trx
          .deleteFrom('recent_tools')
          .where('token_id', '=', tokenId)
          .where('name', 'not in', (eb) =>
            eb
              .selectFrom('recent_tools')
              .select('name')
              .where('token_id', '=', tokenId)
              .orderBy('used_at', 'desc')
              .orderBy('name')
              .limit(MAX_PER_AGENT),
          )
          .execute();
      }
    });
    if (changed.length === 0) return;
    // Every replica's cached lists are read again on their next use; these agents' sessions are told.
    await store.changed('recent');
    for (let i = 0; i < changed.length; i += IDS_PER_MESSAGE) {
      await store
        .publish(CHANNEL, `${this.instance}|${changed.slice(i, i + IDS_PER_MESSAGE).join(',')}`)
        .catch(() => undefined);
    }
  }

  private remoteChange(payload: string): void {
    const bar = payload.indexOf('|');
    if (bar < 0 || payload.slice(0, bar) === this.instance) return;
    const ids = payload
      .slice(bar + 1)
      .split(',')
      .filter((id) => id !== '');
    for (const id of ids) this.byAgent.delete(id);
    if (ids.length > 0) this.options.onRemoteChange?.(ids);
  }
}
