/**
 * The audit trail. Control-plane changes are written synchronously (they are
 * rare and must not be lost), in the caller's transaction when it has one.
 * Tool-call events arrive on the hot path and are written by group commit:
 * `enqueue` resolves once its row is committed, and every row queued in a turn
 * of the event loop (or while a write is in flight) goes in one group. A call's
 * answer waits for that promise, so a crash never leaves an answered call
 * without its row.
 *
 * With a journal (`journal.ts`; SQLite), the first row of a turn of the event
 * loop is committed at once by its own append to the process's journal file (a
 * lone call waits for no turn), the others of that turn by one shared append at
 * its end (under load, one write per turn rather than per call); the rows move
 * into the store in batches every `STORE_EVERY_MS`; readers of the trail in
 * this process call `settle()` first, so they see every row whose call was
 * answered. Without one (PostgreSQL, whose replicas come and go with their
 * disks), a group is one store transaction.
 */
import type { Kysely } from 'kysely';
import type { Principal } from '../identity/index.js';
import { rollupIncrements } from '../overview/rollup.js';
import type { Increment, Store } from '../store/db.js';
import { nowIso } from '../store/json.js';
import type { AuditEventTable, Database } from '../store/schema.js';
import { activeTraceId } from '../telemetry/tracing.js';
import type { AuditJournal } from './journal.js';
import type { NewStreamEvent } from './stream.js';

export interface AdminEvent {
  action: string;
  actor: Principal | undefined;
  serverId?: string | undefined;
  tool?: string | undefined;
  /** Facts about the change; callers pass names and flags, never secret values. */
  data?: Record<string, unknown> | undefined;
  /** The OpenTelemetry trace the change belongs to (default: the active span's, tracing on). */
  traceId?: string | undefined;
}

export type AuditRow = Omit<AuditEventTable, 'id'>;

/** How long committed calls' `tool.called` announcements gather before one stream write. */
const ANNOUNCE_EVERY_MS = 50;
/**
 * How long committed call rows gather before their Overview rollups are written (one upsert per key). Off the
 * calls' commits: the rollups are a view of rows already kept, and a few upserts in every group commit cost each
 * call more than the row itself. A crash loses at most this much of the day chart's counts, never a row.
 */
const ROLLUP_EVERY_MS = 1000;
/**
 * How long journaled rows gather before they are stored (one transaction). Bounds how far the store (another
 * process's view, the live stream) lags the calls; this process's readers `settle()` first.
 */
const STORE_EVERY_MS = 100;
/** Failed rollup writes retried before their counts are let go. */
const MAX_ROLLUP_RETRIES = 3;

/** Where a flushed batch's stream events go (the `EventHub`). */
export interface StreamSink {
  publishMany(events: readonly NewStreamEvent[]): Promise<void>;
}

export interface AuditLogOptions {
  /** Rows per INSERT statement of one group (default 500). */
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

/** A journaled row waiting to be stored, with the length of its journal line. */
interface Journaled {
  row: AuditRow;
  announce: NewStreamEvent | undefined;
  bytes: number;
}

interface Queued {
  row: AuditRow;
  announce: NewStreamEvent | undefined;
  /** Settles the `enqueue` promise: when the row is committed (or dropped). */
  committed: () => void;
}

const MAX_BATCH = 500;
const MAX_PENDING = 10_000;
const RETRY_MS = 1000;

export class AuditLog {
  private pending: Queued[] = [];
  /** Set while waiting to retry a group the store refused. */
  private timer: NodeJS.Timeout | undefined;
  /** Set while a group commit is scheduled for the next turn of the event loop. */
  private scheduled: NodeJS.Immediate | undefined;
  /** True while a group commit is writing: rows queued meanwhile wait for the next group. */
  private committing = false;
  /** Set when this turn's first row was journaled on its own: the turn's later rows share the group's append. */
  private appendedThisTurn: NodeJS.Immediate | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** Stream announcements of committed groups, published in order behind the commits (never holding one up). */
  private publishing: Promise<void> = Promise.resolve();
  /** Announcements waiting for the next publish (one stream write per `ANNOUNCE_EVERY_MS`, not one per group). */
  private toAnnounce: NewStreamEvent[] = [];
  private announceTimer: NodeJS.Timeout | undefined;
  /** Committed rows whose Overview rollups are not written yet (`ROLLUP_EVERY_MS`). */
  private toRoll: AuditRow[] = [];
  private rollTimer: NodeJS.Timeout | undefined;
  private rolling: Promise<void> = Promise.resolve();
  private rollFailures = 0;
  private events: StreamSink | undefined;
  private journal: AuditJournal | undefined;
  /** Journaled rows not stored yet, in journal order (stored in that order: the stored part is a prefix). */
  private journaled: Journaled[] = [];
  private storeTimer: NodeJS.Timeout | undefined;
  private storing: Promise<void> = Promise.resolve();
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

  /** Commits call rows by appending them to `journal` from now on (see the top of this file). */
  journalTo(journal: AuditJournal): void {
    this.journal = journal;
  }

  /** Resolves once every row enqueued so far is in the store (rejects if storing failed): for readers of the trail. */
  async settle(): Promise<void> {
    await this.commitQueued();
    await this.storeJournaled();
  }

  /** Flushes, then closes the journal (removed when every row is stored; else the next start replays it). */
  async close(): Promise<void> {
    let failure: unknown;
    await this.flush().catch((error) => {
      failure = error;
    });
    const journal = this.journal;
    this.journal = undefined;
    await journal?.close(failure === undefined && this.journaled.length === 0);
    if (failure !== undefined) throw failure;
  }

  /**
   * A control-plane change: written before the caller answers. Pass `db` (a transaction) to commit the
   * row with the change it records, so neither is ever on disk without the other.
   */
  async recordAdmin(event: AdminEvent, db: Kysely<Database> = this.store.db): Promise<void> {
    await db.insertInto('audit_events').values(this.adminRow(event)).execute();
  }

  /**
   * A hot-path event, written by group commit. The promise resolves once the row is committed (SQLite
   * WAL with `synchronous = NORMAL`, PostgreSQL `synchronous_commit = off`: both survive a crash of
   * this process) — await it before answering the call the row records. It never rejects: a write the
   * store refused is reported (`onError`) and retried, and the promise waits for the retry; only a row
   * dropped from a full queue (`maxPending`, while the store keeps failing) resolves uncommitted, and
   * is counted in `dropped`. `announce`, if given, is published on the event stream after its group.
   */
  enqueue(row: AuditRow, announce?: NewStreamEvent): Promise<void> {
    // A failed append (reported) leaves the row to the group path below, which stores it directly.
    if (this.appendsAtOnce && this.journalGroup([{ row, announce, committed: () => {} }])) {
      this.appendedThisTurn = setImmediate(() => {
        this.appendedThisTurn = undefined;
      });
      return Promise.resolve();
    }
    return new Promise<void>((committed) => {
      this.pending.push({ row, announce, committed });
      this.dropExcess();
      this.scheduleCommit();
    });
  }

  /**
   * A new row is journaled on its own, at once: it is this turn's first, and nothing queued, being written or
   * waiting for a retry is ahead of it (rows keep their order). The journal is not torn by a failed write.
   */
  private get appendsAtOnce(): boolean {
    const journal = this.journal;
    if (!journal || journal.broken || this.appendedThisTurn) return false;
    return this.pending.length === 0 && !this.committing && !this.timer;
  }

  /** Events queued and not yet handed to the store. */
  get queued(): number {
    return this.pending.length;
  }

  /**
   * Writes everything queued now; resolves when it (and any earlier batch) is written and announced,
   * rejects if it failed.
   */
  async flush(): Promise<void> {
    await this.commitQueued();
    await this.storeJournaled();
    this.announceNow();
    await this.rollNow();
    await this.publishing;
  }

  /** Commits everything queued now (the group commit); announcements follow on their own. */
  private async commitQueued(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
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

  /**
   * One group per turn of the event loop, one at a time: the rows queued while a group is being written
   * form the next group, written as soon as it is committed. Nothing here while a retry is waiting.
   */
  private scheduleCommit(): void {
    if (this.committing || this.scheduled || this.timer) return;
    this.scheduled = setImmediate(() => {
      this.scheduled = undefined;
      this.committing = true;
      this.commitQueued()
        .catch(() => undefined) // `write` has reported it, re-queued the rows and set the retry
        .finally(() => {
          this.committing = false;
          if (this.pending.length > 0) this.scheduleCommit();
        });
    });
  }

  /** Past `maxPending` the oldest rows are dropped (counted), and their callers released. */
  private dropExcess(): void {
    if (this.pending.length <= this.maxPending) return;
    const excess = this.pending.splice(0, this.pending.length - this.maxPending);
    this.dropped += excess.length;
    for (const q of excess) q.committed();
  }

  private async write(batch: Queued[]): Promise<void> {
    if (this.journalGroup(batch)) return;
    try {
      // Off the disk's critical path: a batch commit never holds the event loop on an fsync.
      await this.store.relaxedInsert(
        'audit_events',
        batch.map((q) => q.row),
      );
    } catch (error) {
      // Put the rows back in front (bounded) and retry later: a store outage delays the trail (and the
      // answers waiting for it), never loses it.
      this.pending = batch.concat(this.pending);
      this.dropExcess();
      this.onError(error, { rows: batch.length, requeued: true });
      if (this.timer) clearTimeout(this.timer);
      // Unref'd: a retry must not keep a process alive whose store is gone (shutdown flushes explicitly).
      this.timer = setTimeout(() => this.flushInBackground(), this.retryMs).unref();
      throw error;
    }
    for (const q of batch) q.committed();
    this.afterStored(batch);
  }

  /**
   * Commits `batch` by one append to the journal; answers false (the caller stores it) without a journal, when
   * too many journaled rows wait for a store that keeps failing, or when the append failed.
   */
  private journalGroup(batch: Queued[]): boolean {
    const journal = this.journal;
    if (!journal || this.journaled.length >= this.maxPending) return false;
    let sizes: number[];
    try {
      sizes = journal.append(batch.map((q) => q.row));
    } catch (error) {
      this.onError(error, { rows: batch.length, requeued: true });
      // A journal torn by a failed write is replaced once the rows before the tear are stored.
      if (journal.broken) void this.storeJournaled().catch(() => undefined);
      return false;
    }
    batch.forEach((q, i) => {
      this.journaled.push({ row: q.row, announce: q.announce, bytes: sizes[i] ?? 0 });
    });
    for (const q of batch) q.committed();
    if (this.journaled.length >= this.maxBatch) void this.storeJournaled().catch(() => undefined);
    else if (!this.storeTimer) {
      // Unref'd: rows not stored when the process ends are in the journal, and the next start stores them.
      this.storeTimer = setTimeout(() => void this.storeJournaled().catch(() => undefined), STORE_EVERY_MS).unref();
    }
    return true;
  }

  /**
   * Stores the journaled rows, oldest first, a batch per transaction that also records how much of the journal
   * is stored; one run at a time. A refused batch stays in front and is retried (the journal holds it meanwhile).
   */
  private storeJournaled(): Promise<void> {
    if (this.storeTimer) clearTimeout(this.storeTimer);
    this.storeTimer = undefined;
    const run = this.storing.then(async () => {
      const journal = this.journal;
      if (!journal) return;
      while (this.journaled.length > 0) {
        const batch = this.journaled.slice(0, this.maxBatch);
        const bytes = batch.reduce((sum, q) => sum + q.bytes, 0);
        try {
          await this.store.relaxedInsert(
            'audit_events',
            batch.map((q) => q.row),
            [journal.stored(bytes)] satisfies Increment[],
          );
        } catch (error) {
          this.onError(error, { rows: batch.length, requeued: true });
          this.storeTimer ??= setTimeout(() => void this.storeJournaled().catch(() => undefined), this.retryMs);
          this.storeTimer.unref();
          throw error;
        }
        this.journaled.splice(0, batch.length);
        this.afterStored(batch);
      }
      await journal.rotateIfDue();
    });
    this.storing = run.catch(() => undefined);
    return run;
  }

  /** Rows now in the store: their Overview rollups and stream announcements follow, each on its own timer. */
  private afterStored(batch: ReadonlyArray<{ row: AuditRow; announce: NewStreamEvent | undefined }>): void {
    for (const q of batch) {
      if (q.row.kind === 'call') this.toRoll.push(q.row);
      if (q.announce) this.toAnnounce.push(q.announce);
    }
    if (this.toRoll.length > 0 && !this.rollTimer) {
      this.rollTimer = setTimeout(() => void this.rollNow(), ROLLUP_EVERY_MS).unref();
    }
    // Published in commit order, but off the commit's path and gathered over a short window: the live view
    // is a moment behind, and the calls never wait for (or pay a store write per call for) its rows.
    if (this.toAnnounce.length > 0 && !this.announceTimer) {
      this.announceTimer = setTimeout(() => this.announceNow(), ANNOUNCE_EVERY_MS).unref();
    }
  }

  /**
   * Writes the Overview rollups of the rows committed since the last time (one upsert per key), in order
   * behind any earlier write of them. A refused write keeps them for the next (bounded like the queue).
   */
  private rollNow(): Promise<void> {
    if (this.rollTimer) clearTimeout(this.rollTimer);
    this.rollTimer = undefined;
    const rows = this.toRoll.splice(0);
    if (rows.length === 0) return this.rolling;
    this.rolling = this.rolling.then(async () => {
      try {
        await this.store.relaxedInsert('audit_events', [], rollupIncrements(rows));
        this.rollFailures = 0;
      } catch (error) {
        // Kept for a few retries (a store that is down for a moment), then let go: the rows themselves are
        // kept, and a store that is gone for good (closed) must not be retried forever.
        const requeued = ++this.rollFailures <= MAX_ROLLUP_RETRIES;
        this.onError(error, { rows: rows.length, requeued });
        if (requeued) {
          this.toRoll = rows.concat(this.toRoll).slice(-this.maxPending);
          this.rollTimer ??= setTimeout(() => void this.rollNow(), this.retryMs).unref();
        } else this.rollFailures = 0;
      }
    });
    return this.rolling;
  }

  /** Hands the gathered announcements to the stream, in order, now. */
  private announceNow(): void {
    if (this.announceTimer) clearTimeout(this.announceTimer);
    this.announceTimer = undefined;
    const events = this.events;
    const announcements = this.toAnnounce.splice(0);
    if (announcements.length === 0 || !events) return;
    this.publishing = this.publishing.then(() =>
      events.publishMany(announcements).catch((error) => {
        // The rows are written (the trail is whole); only the live view missed them.
        this.onError(error, { rows: announcements.length, requeued: false });
      }),
    );
  }

  private adminRow(event: AdminEvent): AuditRow {
    return {
      at: nowIso(),
      kind: 'admin',
      action: event.action,
      actor_id: event.actor?.id ?? null,
      actor_name: event.actor?.name ?? null,
      user_id: event.actor?.user?.id ?? null,
      user_name: event.actor?.user?.name ?? null,
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
      // Tracing on: a change made inside a traced call (an approval created, an approved call's execution
      // and what its route changed) is found under that call's trace id too.
      trace_id: event.traceId ?? activeTraceId() ?? null,
    };
  }
}
