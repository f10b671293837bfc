/**
 * 2025-era sessions in the shared store, so any replica on one PostgreSQL can serve a session another
 * replica opened (and one that died opened): a row per session holds what rebuilding its server needs —
 * the token and scope it is bound to, the `initialize` params (negotiated version, client capabilities
 * and info) and the log level the agent set. Rows expire (`expires_at`, pushed forward at most every
 * quarter of the idle time, so a busy session costs no write per request).
 *
 * The per-token cap counts rows here, under a per-token transaction lock, so it holds across the fleet.
 * A session ended anywhere (DELETE, evicted to make room, expired) is announced on the
 * `gatehouse_sessions` channel; every replica drops its in-process copy.
 *
 * What concerns a session's work on another replica goes on `gatehouse_session_messages` (`SessionMessage`):
 * with no affinity, the request an agent's `notifications/cancelled` names may run on another replica than the
 * one the notification reached, a subscription made on one replica may be ended on another, and an update a
 * subscription hears on one replica must reach the agent's GET stream, which another replica may hold.
 *
 * A resource subscription outlives the replica that made it: each one is a row naming its holder (this
 * process's tag), and every replica holding subscriptions holds the lock `mcp-sessions-replica:<tag>` (a
 * PostgreSQL session lock, released when the process or its connection dies). `takeOverOrphans` finds holders
 * whose lock is free — dead — and moves their rows to this replica, which subscribes again.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Store } from '../store/db.js';
import { parseJson } from '../store/json.js';
import type { LockHandle } from '../store/locks.js';

const CHANNEL = 'gatehouse_sessions';
const MESSAGES = 'gatehouse_session_messages';
/** A cancellation's reason, as far as it is passed on (a NOTIFY payload stays small). */
const MAX_REASON = 500;
/** PostgreSQL refuses a NOTIFY payload of 8000 bytes; a message that long (an id, a URI) is not sent. */
const MAX_PAYLOAD = 7_900;

/** What one replica tells the others about a session's work (see the top of this file). */
export type SessionMessage =
  /** The agent cancelled request `requestId`. */
  | { kind: 'cancelled'; sessionId: string; requestId: string | number; reason?: string | undefined }
  /** An upstream updated `uri`, which the session subscribed to here: the replica holding its GET stream says so. */
  | { kind: 'updated'; sessionId: string; uri: string }
  /** The agent unsubscribed from `uri` (as it named it): the replica where it subscribed lets go. */
  | { kind: 'unsubscribed'; sessionId: string; uri: string };

function isSessionMessage(value: unknown): value is SessionMessage {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  if (typeof m.sessionId !== 'string') return false;
  if (m.kind === 'cancelled') return typeof m.requestId === 'string' || typeof m.requestId === 'number';
  return (m.kind === 'updated' || m.kind === 'unsubscribed') && typeof m.uri === 'string';
}

export interface SharedSessionRow {
  id: string;
  surface: string;
  owner: string;
  tokenId: string;
  /** The `initialize` request's params, as the agent sent them. */
  init: Record<string, unknown>;
  logLevel: string | null;
  /** The principal that opened it (JSON-safe, no secret), to rebuild the session without a request; null on old rows. */
  principal: unknown;
}

/** A subscription moved to this replica from one that died: subscribe again, or forget it. */
export interface OrphanedSubscription {
  sessionId: string;
  uri: string;
}

const replicaLock = (tag: string) => `mcp-sessions-replica:${tag}`;

export type Admission = { ok: true; evicted: string[] } | { ok: false };

export class SharedSessionStore {
  private readonly unsubscribe: () => void;
  private readonly closedListeners = new Set<(id: string) => void>();
  private readonly messageListeners = new Set<(message: SessionMessage) => void>();
  /** Tells this process's own messages from the others' (it acted on those itself). */
  private readonly tag = randomUUID();
  private readonly reconnectListeners = new Set<() => void>();
  /** Held while this replica relays subscriptions: its loss tells the others they are orphaned. */
  private replicaLock: Promise<LockHandle | undefined> | undefined;

  constructor(
    private readonly store: Store,
    readonly idleMs: number,
  ) {
    const off = store.subscribe(CHANNEL, (payload) => {
      for (const id of payload.split(',')) {
        if (id) for (const listener of this.closedListeners) listener(id);
      }
    });
    const offMessages = store.subscribe(MESSAGES, (payload) => {
      const told = parseJson<{ from?: unknown; message?: unknown } | null>(payload, null);
      if (!told || told.from === this.tag || !isSessionMessage(told.message)) return;
      for (const listener of this.messageListeners) listener(told.message);
    });
    const offReconnect = store.onReconnect(() => {
      for (const listener of this.reconnectListeners) listener();
    });
    this.unsubscribe = () => {
      off();
      offMessages();
      offReconnect();
    };
  }

  /** Told of every session ended in any process (including this one). */
  onClosed(listener: (id: string) => void): () => void {
    this.closedListeners.add(listener);
    return () => this.closedListeners.delete(listener);
  }

  /** Told of what the other replicas say about sessions' work (`SessionMessage`). */
  onMessage(listener: (message: SessionMessage) => void): () => void {
    this.messageListeners.add(listener);
    return () => this.messageListeners.delete(listener);
  }

  /** Tells the other replicas (best effort, as the spec's cancellation and updates are). */
  async tellOthers(message: SessionMessage): Promise<void> {
    const bounded =
      message.kind === 'cancelled' && message.reason !== undefined
        ? { ...message, reason: message.reason.slice(0, MAX_REASON) }
        : message;
    const text = JSON.stringify({ from: this.tag, message: bounded });
    if (Buffer.byteLength(text) < MAX_PAYLOAD) await this.store.publish(MESSAGES, text);
  }

  /** Told when ends may have been missed (the LISTEN connection was down): check what is cached. */
  onReconnect(listener: () => void): () => void {
    this.reconnectListeners.add(listener);
    return () => this.reconnectListeners.delete(listener);
  }

  /**
   * Records a new session of `row.tokenId` if its cap allows: at the cap, its own least recently seen
   * session gives way (returned in `evicted`); over the backstop with none of its own to give up, refused.
   * One transaction under a per-token lock, so concurrent openings on several replicas cannot overshoot.
   */
  async admit(row: SharedSessionRow, maxPerToken: number, backstop: number): Promise<Admission> {
    const now = Date.now();
    const result = await this.store.db.transaction().execute(async (trx) => {
      if (this.store.kind === 'postgres') {
        await sql`select pg_advisory_xact_lock(hashtextextended(current_schema() || ':mcp_sessions:' || ${row.tokenId}, 0))`.execute(
          trx,
        );
      }
      const live = (q: typeof trx) =>
        q.selectFrom('mcp_sessions').where('surface', '=', row.surface).where('expires_at', '>', now);
      const mine = await live(trx)
        .where('token_id', '=', row.tokenId)
        .select(['id'])
        .orderBy('last_seen', 'asc')
        .orderBy('created_at', 'asc')
        .execute();
      const evicted: string[] = [];
      if (mine.length >= maxPerToken) {
        evicted.push(...mine.slice(0, mine.length - maxPerToken + 1).map((r) => r.id));
      } else {
        const total = await live(trx)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirst();
        if (Number(total?.n ?? 0) >= backstop) {
          const first = mine[0];
          if (!first) return { ok: false } as const;
          evicted.push(first.id);
        }
      }
      if (evicted.length > 0) await trx.deleteFrom('mcp_sessions').where('id', 'in', evicted).execute();
      await trx
        .insertInto('mcp_sessions')
        .values({
          id: row.id,
          surface: row.surface,
          owner: row.owner,
          token_id: row.tokenId,
          init: JSON.stringify(row.init),
          log_level: row.logLevel,
          principal: row.principal === null || row.principal === undefined ? null : JSON.stringify(row.principal),
          created_at: now,
          last_seen: now,
          expires_at: now + this.idleMs,
        })
        .execute();
      return { ok: true, evicted } as const;
    });
    if (result.ok && result.evicted.length > 0) await this.announce(result.evicted);
    return result;
  }

  /** The live session `id`, if its row exists and has not expired. */
  async get(id: string): Promise<SharedSessionRow | undefined> {
    const row = await this.store.db
      .selectFrom('mcp_sessions')
      .selectAll()
      .where('id', '=', id)
      .where('expires_at', '>', Date.now())
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      id: row.id,
      surface: row.surface,
      owner: row.owner,
      tokenId: row.token_id,
      init: parseJson<Record<string, unknown>>(row.init, {}),
      logLevel: row.log_level,
      principal: row.principal === null ? null : parseJson<unknown>(row.principal, null),
    };
  }

  /** The ids among `ids` that no longer live in the store. */
  async missing(ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const present = new Set<string>();
    for (let i = 0; i < ids.length; i += 500) {
      const rows = await this.store.db
        .selectFrom('mcp_sessions')
        .select('id')
        .where('id', 'in', ids.slice(i, i + 500))
        .where('expires_at', '>', Date.now())
        .execute();
      for (const row of rows) present.add(row.id);
    }
    return ids.filter((id) => !present.has(id));
  }

  /** How many live sessions `tokenId` holds on `surface`, across the fleet. */
  async countOf(surface: string, tokenId: string): Promise<number> {
    const row = await this.store.db
      .selectFrom('mcp_sessions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('surface', '=', surface)
      .where('token_id', '=', tokenId)
      .where('expires_at', '>', Date.now())
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Pushes the session's expiry forward (it was seen at `at`). */
  async touch(id: string, at: number): Promise<void> {
    await this.store.db
      .updateTable('mcp_sessions')
      .set({ last_seen: at, expires_at: at + this.idleMs })
      .where('id', '=', id)
      .execute();
  }

  async setLogLevel(id: string, level: string): Promise<void> {
    await this.store.db.updateTable('mcp_sessions').set({ log_level: level }).where('id', '=', id).execute();
  }

  /** Ends a session everywhere: its row goes, and every replica drops its copy. */
  async remove(id: string): Promise<void> {
    await this.store.db.deleteFrom('mcp_sessions').where('id', '=', id).execute();
    await this.announce([id]);
  }

  /** Ends every session a principal holds on `surface`, everywhere (access lost): the rows go, every replica drops its copies. */
  async removeSessionsOf(surface: string, principalId: string): Promise<void> {
    const gone = await this.store.db
      .deleteFrom('mcp_sessions')
      .where('surface', '=', surface)
      .where('token_id', '=', principalId)
      .returning('id')
      .execute();
    await this.announce(gone.map((row) => row.id));
  }

  /**
   * Records that this replica relays session `sessionId`'s subscription to `uri` (after the upstream took it).
   * A session that has ended meanwhile records nothing (its row is gone; the reference refuses the insert).
   */
  async recordSubscription(sessionId: string, uri: string): Promise<void> {
    if (!(await this.holdReplicaLock())) return;
    await this.store.db
      .insertInto('mcp_session_subscriptions')
      .values({ session_id: sessionId, uri, holder: this.tag, created_at: Date.now() })
      .onConflict((oc) => oc.columns(['session_id', 'uri']).doUpdateSet({ holder: this.tag }))
      .execute()
      .catch(() => {});
  }

  /** The agent unsubscribed (on whichever replica): the subscription is no one's to take over any more. */
  async forgetSubscription(sessionId: string, uri: string): Promise<void> {
    await this.store.db
      .deleteFrom('mcp_session_subscriptions')
      .where('session_id', '=', sessionId)
      .where('uri', '=', uri)
      .execute();
  }

  /**
   * The subscriptions of `surface`'s sessions that replicas which died relayed, now this replica's: a holder
   * whose lock this replica can take is gone (a live one holds it). Under that lock its rows change hands in
   * one statement, so two replicas sweeping at once never both take one.
   */
  async takeOverOrphans(surface: string): Promise<OrphanedSubscription[]> {
    const ofSurface = this.store.db.selectFrom('mcp_sessions').select('id').where('surface', '=', surface);
    const holders = await this.store.db
      .selectFrom('mcp_session_subscriptions')
      .select('holder')
      .distinct()
      .where('holder', '<>', this.tag)
      .where('session_id', 'in', ofSurface)
      .execute();
    if (holders.length === 0 || !(await this.holdReplicaLock())) return [];
    const taken: OrphanedSubscription[] = [];
    for (const { holder } of holders) {
      const dead = await this.store.locks.acquire(replicaLock(holder));
      if (!dead) continue;
      try {
        const rows = await this.store.db
          .updateTable('mcp_session_subscriptions')
          .set({ holder: this.tag })
          .where('holder', '=', holder)
          .where('session_id', 'in', ofSurface)
          .returning(['session_id', 'uri'])
          .execute();
        taken.push(...rows.map((row) => ({ sessionId: row.session_id, uri: row.uri })));
      } finally {
        await dead.release();
      }
    }
    return taken;
  }

  /**
   * The subscriptions of `sessionIds` another replica relays now (their rows name another holder). This replica
   * holds its lock again first, so that the others stop taking its remaining rows for a dead replica's.
   */
  async relayedElsewhere(sessionIds: readonly string[]): Promise<OrphanedSubscription[]> {
    await this.holdReplicaLock();
    const rows = await this.store.db
      .selectFrom('mcp_session_subscriptions')
      .select(['session_id', 'uri'])
      .where('session_id', 'in', sessionIds)
      .where('holder', '<>', this.tag)
      .execute();
    return rows.map((row) => ({ sessionId: row.session_id, uri: row.uri }));
  }

  /** Deletes expired rows (any replica may; a row deleted twice is no harm). */
  async sweep(): Promise<number> {
    const result = await this.store.db
      .deleteFrom('mcp_sessions')
      .where('expires_at', '<=', Date.now())
      .executeTakeFirst();
    return Number(result.numDeletedRows ?? 0);
  }

  close(): void {
    // The lock goes with the store's lock connection when the process stops; released now, the others take
    // this replica's subscriptions over at their next sweep.
    void this.replicaLock?.then((handle) => handle?.release()).catch(() => {});
    this.replicaLock = undefined;
    this.unsubscribe();
    this.closedListeners.clear();
    this.messageListeners.clear();
    this.reconnectListeners.clear();
  }

  /** This replica's own lock, taken on first need and again after it was lost (its connection dropped). */
  private async holdReplicaLock(): Promise<boolean> {
    for (let attempt = 0; attempt < 2; attempt++) {
      this.replicaLock ??= this.store.locks.acquire(replicaLock(this.tag)).catch(() => undefined);
      const current = this.replicaLock;
      const held = await current;
      if (held && !held.signal.aborted) return true;
      if (this.replicaLock === current) this.replicaLock = undefined;
    }
    return false;
  }

  private async announce(ids: readonly string[]): Promise<void> {
    // NOTIFY payloads stay under 8000 bytes: a UUID is 36 characters, so 150 ids a message.
    for (let i = 0; i < ids.length; i += 150) {
      await this.store.publish(CHANNEL, ids.slice(i, i + 150).join(',')).catch(() => {});
    }
  }
}
