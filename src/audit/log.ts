/**
 * The audit trail. Control-plane changes are written synchronously (they are
 * rare and must not be lost); tool-call events arrive on the hot path and are
 * written in small batches, flushed within 100 ms and on shutdown.
 */
import type { Principal } from '../api/auth.js';
import type { Store } from '../store/db.js';
import { nowIso } from '../store/json.js';
import type { AuditEventTable } from '../store/schema.js';
import type { NewStreamEvent } from './stream.js';

export interface AdminEvent {
  action: string;
  actor: Principal | undefined;
  serverId?: string | undefined;
  tool?: string | undefined;
  /** Facts about the change; callers pass names and flags, never secret values. */
  data?: Record<string, unknown> | undefined;
}

export type AuditRow = Omit<AuditEventTable, 'id'>;

/** Where a flushed batch's stream events go (the `EventHub`). */
export interface StreamSink {
  publishMany(events: readonly NewStreamEvent[]): Promise<void>;
}

export interface AuditLogOptions {
  /** Longest a queued event waits before its batch is written (default 100 ms). */
  flushMs?: number;
  /** A batch this large is written at once (default 500). */
  maxBatch?: number;
  /** Queued events kept while the store is failing; past it the oldest are dropped and counted (default 10 000). */
  maxPending?: number;
  /** Wait before retrying a batch the store refused (default 1 s). */
  retryMs?: number;
  /** Stream events queued with rows are published here after their rows are written. */
  events?: StreamSink;
  /** A failed background write (default: a process warning). The log never throws from its timer. */
  onError?: (error: unknown, context: { rows: number; requeued: boolean }) => void;
}

interface Queued {
  row: AuditRow;
  announce: NewStreamEvent | undefined;
}

const FLUSH_MS = 100;
const MAX_BATCH = 500;
const MAX_PENDING = 10_000;
const RETRY_MS = 1000;

export class AuditLog {
  private pending: Queued[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private events: StreamSink | undefined;
  private readonly flushMs: number;
  private readonly maxBatch: number;
  private readonly maxPending: number;
  private readonly retryMs: number;
  /** Reports events that could not be written (also used by the call auditor for a row it could not make). */
  readonly onError: NonNullable<AuditLogOptions['onError']>;
  /** Events dropped because the store kept failing while the queue was full. */
  dropped = 0;

  constructor(
    private readonly store: Store,
    options: AuditLogOptions = {},
  ) {
    this.flushMs = options.flushMs ?? FLUSH_MS;
    this.maxBatch = options.maxBatch ?? MAX_BATCH;
    this.maxPending = options.maxPending ?? MAX_PENDING;
    this.retryMs = options.retryMs ?? RETRY_MS;
    this.events = options.events;
    this.onError =
      options.onError ??
      ((error, context) =>
        process.emitWarning(
          `audit: writing ${context.rows} events failed${context.requeued ? ' (will retry)' : ''}: ${String(error)}`,
        ));
  }

  /** Sends the stream events queued with rows (`tool.called`) to `events` when their batch is written. */
  streamTo(events: StreamSink): void {
    this.events = events;
  }

  /** A control-plane change: written before the caller answers. */
  async recordAdmin(event: AdminEvent): Promise<void> {
    await this.store.db.insertInto('audit_events').values(this.adminRow(event)).execute();
  }

  /**
   * A hot-path event: queued and written with others shortly after (never a store round trip here).
   * `announce`, if given, is published on the event stream in one batch after the rows are written.
   */
  enqueue(row: AuditRow, announce?: NewStreamEvent): void {
    this.pending.push({ row, announce });
    if (this.pending.length > this.maxPending) {
      const excess = this.pending.length - this.maxPending;
      this.pending.splice(0, excess);
      this.dropped += excess;
    }
    if (this.pending.length >= this.maxBatch) this.flushInBackground();
    else this.timer ??= setTimeout(() => this.flushInBackground(), this.flushMs);
  }

  /** Events queued and not yet handed to the store. */
  get queued(): number {
    return this.pending.length;
  }

  /** Writes everything queued now; resolves when it (and any earlier batch) is written, rejects if it failed. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batches: Queued[][] = [];
    while (this.pending.length > 0) batches.push(this.pending.splice(0, this.maxBatch));
    const mine = this.flushing.then(async () => {
      let failure: unknown;
      for (const batch of batches) {
        try {
          await this.write(batch);
        } catch (error) {
          failure ??= error; // `write` re-queued it; the other batches still go
        }
      }
      if (failure !== undefined) throw failure;
    });
    // Later flushes queue behind this one whether it succeeds or fails.
    this.flushing = mine.catch(() => undefined);
    await mine;
  }

  private flushInBackground(): void {
    this.flush().catch(() => undefined); // `write` has reported it and re-queued the rows
  }

  private async write(batch: Queued[]): Promise<void> {
    try {
      // Off the disk's critical path: a batch commit never holds the event loop on an fsync.
      await this.store.relaxedWrite((db) =>
        db
          .insertInto('audit_events')
          .values(batch.map((q) => q.row))
          .execute(),
      );
    } catch (error) {
      // Put the rows back in front (bounded) and retry later: a store outage delays the trail, not loses it.
      this.pending = batch.concat(this.pending);
      if (this.pending.length > this.maxPending) {
        const excess = this.pending.length - this.maxPending;
        this.pending.splice(0, excess);
        this.dropped += excess;
      }
      this.onError(error, { rows: batch.length, requeued: true });
      if (this.timer) clearTimeout(this.timer);
      // Unref'd: a retry must not keep a process alive whose store is gone (shutdown flushes explicitly).
      this.timer = setTimeout(() => this.flushInBackground(), this.retryMs).unref();
      throw error;
    }
    const announcements = batch.flatMap((q) => (q.announce ? [q.announce] : []));
    if (announcements.length > 0 && this.events) {
      try {
        await this.events.publishMany(announcements);
      } catch (error) {
        // The rows are written (the trail is whole); only the live view missed them.
        this.onError(error, { rows: announcements.length, requeued: false });
      }
    }
  }

  private adminRow(event: AdminEvent): AuditRow {
    return {
      at: nowIso(),
      kind: 'admin',
      action: event.action,
      actor_id: event.actor?.id ?? null,
      actor_name: event.actor?.name ?? null,
      server_id: event.serverId ?? null,
      tool: event.tool ?? null,
      verdict: null,
      approval_id: null,
      // A control-plane act that reports failure (a handshake with `ok: false`) is not an `ok` in the trail.
      outcome: event.data?.ok === false ? (typeof event.data.code === 'string' ? event.data.code : 'error') : 'ok',
      latency_ms: null,
      request_bytes: null,
      response_bytes: null,
      args_digest: null,
      data: event.data ? JSON.stringify(event.data) : null,
    };
  }
}
