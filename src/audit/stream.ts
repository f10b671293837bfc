/**
 * The event stream behind `GET /api/mcp/stream`: every event is a row with a
 * monotonic id (so `Last-Event-ID` can resume), announced to every process
 * through the store's message channel, and fanned out to live subscribers.
 *
 * Never skips: on PostgreSQL, ids are handed out in commit order — each insert takes a transaction
 * lock (`pg_advisory_xact_lock`, schema-scoped) before its rows draw their ids, and holds it until
 * its commit is visible — so once a reader sees id n, every lower id is committed or never will be
 * (a rolled-back insert), and the cursor may move past it. Replicas' inserts queue on that lock for
 * the length of one small, unsynced commit. SQLite writers are serialized by the database itself.
 * A reader also catches up whenever its LISTEN connection is back (a poke may have been missed).
 */
import { sql } from 'kysely';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';

export type StreamEventType =
  | 'server.changed'
  | 'server.status'
  | 'server.event'
  | 'server.state'
  | 'tool.called'
  | 'tool.quarantined'
  | 'tool.approved'
  | 'approval.created'
  | 'approval.decided'
  | 'settings.changed'
  | 'token.changed'
  | 'user.changed'
  | 'server.auth';

export interface StreamEvent {
  id: number;
  type: StreamEventType;
  at: string;
  data: Record<string, unknown>;
}

export interface NewStreamEvent {
  type: StreamEventType;
  data: Record<string, unknown>;
}

const RETAINED_EVENTS = 10_000;
const PRUNE_EVERY = 500;
/** Rows per INSERT: 3 parameters each, far below SQLite's and PostgreSQL's parameter limits. */
const INSERT_CHUNK = 1000;
const CATCH_UP_PAGE = 1000;
/** How soon a catch-up whose read failed is tried again. */
const CATCH_UP_RETRY_MS = 250;

export class EventHub {
  private readonly listeners = new Set<(event: StreamEvent) => void>();
  private lastSeen = 0;
  private catchingUp: Promise<void> | undefined;
  /** A catch-up whose read failed is tried again after `CATCH_UP_RETRY_MS`: the poke it answered is not lost. */
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private again = false;
  private published = 0;
  private readonly unsubscribe: () => void;

  private constructor(private readonly store: Store) {
    const unsubscribe = store.subscribe('gatehouse_events', () => void this.catchUp());
    const unreconnect = store.onReconnect(() => void this.catchUp());
    this.unsubscribe = () => {
      unsubscribe();
      unreconnect();
    };
  }

  static async open(store: Store): Promise<EventHub> {
    const hub = new EventHub(store);
    const last = await store.db
      .selectFrom('stream_events')
      .select((eb) => eb.fn.max('id').as('id'))
      .executeTakeFirst();
    hub.lastSeen = Number(last?.id ?? 0);
    return hub;
  }

  /** Records an event and announces it; subscribers in every process receive it once. */
  async publish(type: StreamEventType, data: Record<string, unknown>): Promise<void> {
    await this.publishMany([{ type, data }]);
  }

  /**
   * Records several events in one statement (per `INSERT_CHUNK`) and announces them once: the way hot-path
   * events (`tool.called`, from the audit batch flush) reach the stream without a write per event.
   *
   * A relaxed write (see `Store.relaxedWrite`): the stream is a live view of records kept durably in
   * their own tables, so its rows need not wait for the disk — and a commit that waited would hold the
   * event loop on an fsync (some milliseconds) after every audit batch.
   */
  async publishMany(events: readonly NewStreamEvent[]): Promise<void> {
    if (events.length === 0) return;
    const at = nowIso();
    const rows = events.map((event) => ({ type: event.type, data: JSON.stringify(event.data), at }));
    if (this.store.kind === 'sqlite') {
      // The store's prepared insert, one transaction: a multi-row statement built and prepared for every
      // audit batch (its row count varies) cost more CPU than the rows themselves.
      await this.store.relaxedInsert('stream_events', rows);
    } else {
      await this.store.relaxedWrite(async (db) => {
        // Ids in commit order (see the top of this file); released by the commit itself.
        await sql`select pg_advisory_xact_lock(hashtextextended(current_schema() || ':stream_events', 0))`.execute(db);
        for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
          await db
            .insertInto('stream_events')
            .values(rows.slice(i, i + INSERT_CHUNK))
            .execute();
        }
      });
    }
    // Listeners re-read the table from their last id; the payload is only a hint.
    const first = events[0]?.type as StreamEventType;
    await this.store.publish('gatehouse_events', events.every((e) => e.type === first) ? first : 'batch');
    const before = this.published;
    this.published += events.length;
    if (Math.floor(before / PRUNE_EVERY) !== Math.floor(this.published / PRUNE_EVERY)) await this.prune();
  }

  subscribe(listener: (event: StreamEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Events after `id` (for Last-Event-ID resume), oldest first. */
  async since(id: number, limit = 1000): Promise<StreamEvent[]> {
    const rows = await this.store.db
      .selectFrom('stream_events')
      .selectAll()
      .where('id', '>', id)
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map((row) => ({
      id: Number(row.id),
      type: row.type as StreamEventType,
      at: row.at,
      data: parseJson<Record<string, unknown>>(row.data, {}),
    }));
  }

  close(): void {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.unsubscribe();
    this.listeners.clear();
  }

  /** Reads everything newer than the last event delivered; one reader at a time, re-run if poked meanwhile. */
  private async catchUp(): Promise<void> {
    if (this.catchingUp) {
      this.again = true;
      return this.catchingUp;
    }
    this.catchingUp = (async () => {
      do {
        this.again = false;
        const events = await this.since(this.lastSeen, CATCH_UP_PAGE).catch(() => undefined);
        if (events === undefined) {
          // A failed read (the store busy or briefly away) must not drop the events it was poked for: no other
          // poke may come (a quiet stream), and a subscriber (the supervisor, say) would never act on them.
          if (!this.closed && !this.retryTimer) {
            this.retryTimer = setTimeout(() => {
              this.retryTimer = undefined;
              void this.catchUp();
            }, CATCH_UP_RETRY_MS).unref();
          }
          break;
        }
        for (const event of events) {
          this.lastSeen = event.id;
          for (const listener of this.listeners) {
            try {
              listener(event);
            } catch {
              // one failing subscriber must not starve the others
            }
          }
        }
        // A full page means more may be waiting (a large batch): read on without waiting for another poke.
        if (events.length === CATCH_UP_PAGE) this.again = true;
      } while (this.again);
    })().finally(() => {
      this.catchingUp = undefined;
    });
    return this.catchingUp;
  }

  private async prune(): Promise<void> {
    const cutoff = this.lastSeen - RETAINED_EVENTS;
    // Relaxed like the inserts: forgetting old events need not wait for the disk either.
    if (cutoff > 0) {
      await this.store.relaxedWrite((db) => db.deleteFrom('stream_events').where('id', '<', cutoff).execute());
    }
  }
}
