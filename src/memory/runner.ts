/**
 * Runs queued operations in the background: claims one (a single winner across processes), runs the
 * handler for its kind, and records failure. Every heartbeat it refreshes the lease of what this process
 * runs and hands operations whose process died (lease lapsed) back to `pending`. That is safe because an
 * operation's writes commit in the same transaction as its completion: a dead run left nothing behind.
 */
import { sql } from 'kysely';
import { GatehouseError } from '../errors.js';
import type { Logger } from '../logging.js';
import type { Store } from '../store/db.js';
import { nowIso } from '../store/json.js';
import { CancelledError } from './operations.js';
import type { MemoryOperationTable } from './tables.js';
import type { OperationKind } from './types.js';

export type OperationHandler = (op: MemoryOperationTable, signal: AbortSignal) => Promise<void>;

export interface RunnerOptions {
  store: Store;
  logger: Logger | undefined;
  heartbeatMs: number;
  leaseMs: number;
  /** What each kind of operation does; the facade wires them to the modules that own the work. */
  handlers: Record<OperationKind, OperationHandler>;
}

export class OperationRunner {
  private readonly running = new Map<string, { controller: AbortController; promise: Promise<void> }>();
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: RunnerOptions) {}

  private get db() {
    return this.options.store.db;
  }

  /** Runs what is pending now, then sweeps every heartbeat. */
  async start(): Promise<void> {
    await this.resume();
    this.timer ??= setInterval(() => void this.tick(), this.options.heartbeatMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      const ids = [...this.running.keys()];
      if (ids.length > 0) {
        await this.db
          .updateTable('memory_operations')
          .set({ updated_at: nowIso() })
          .where('id', 'in', ids)
          .where('status', '=', 'processing')
          .execute();
      }
      await this.reclaimLapsed();
      await this.resume();
    } catch (error) {
      this.options.logger?.warn({ err: error }, 'memory operation sweep failed');
    }
  }

  /** `processing` operations whose lease lapsed (and that this process does not run) go back to `pending`. */
  async reclaimLapsed(): Promise<number> {
    const lapsed = await this.db
      .selectFrom('memory_operations')
      .select(['id', 'updated_at'])
      .where('status', '=', 'processing')
      .where('updated_at', '<', new Date(Date.now() - this.options.leaseMs).toISOString())
      .limit(100)
      .execute();
    let n = 0;
    for (const op of lapsed) {
      if (this.running.has(op.id)) continue;
      const res = await this.db
        .updateTable('memory_operations')
        .set({ status: 'pending', updated_at: nowIso() })
        .where('id', '=', op.id)
        .where('status', '=', 'processing')
        .where('updated_at', '=', op.updated_at)
        .executeTakeFirst();
      n += Number(res.numUpdatedRows);
    }
    return n;
  }

  /** Picks up pending operations (left by a restart) now. */
  async resume(): Promise<number> {
    const pending = await this.db
      .selectFrom('memory_operations')
      .select('id')
      .where('status', '=', 'pending')
      .execute();
    let n = 0;
    for (const { id } of pending) if (this.launch(id)) n++;
    return n;
  }

  /** Resolves when every operation this process started has finished (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()].map((r) => r.promise));
  }

  /** Resolves when the run of `id` this process started (if any) has finished. */
  async settled(id: string): Promise<void> {
    await this.running.get(id)?.promise;
  }

  /** Aborts this process's run of `id`, if it has one. */
  abort(id: string): void {
    this.running.get(id)?.controller.abort();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const run of this.running.values()) run.controller.abort();
    await this.idle();
  }

  /** Starts running `id` in the background; false when closed or already running here. */
  launch(id: string): boolean {
    if (this.closed || this.running.has(id)) return false;
    const controller = new AbortController();
    const promise = this.run(id, controller.signal)
      .catch((error) =>
        this.options.logger?.error({ err: error, operationId: id }, 'memory operation bookkeeping failed'),
      )
      .finally(() => this.running.delete(id));
    this.running.set(id, { controller, promise });
    return true;
  }

  /** pending → processing (one winner across processes), run, then completed or failed. */
  private async run(id: string, signal: AbortSignal): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    const at = nowIso();
    const claim = await this.db
      .updateTable('memory_operations')
      .set({ status: 'processing', started_at: at, updated_at: at, attempts: sql`attempts + 1` })
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    if (Number(claim.numUpdatedRows) !== 1) return;
    const op = await this.db.selectFrom('memory_operations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    try {
      const handlers = this.options.handlers;
      if (!Object.hasOwn(handlers, op.kind)) {
        throw new GatehouseError('memory.operation_state', `Operation kind ${op.kind} does not run in the background.`);
      }
      await handlers[op.kind as OperationKind](op, signal);
    } catch (error) {
      if (error instanceof CancelledError) return;
      await this.fail(id, error);
    }
  }

  private async fail(id: string, error: unknown): Promise<void> {
    const logger = this.options.logger;
    const known = error instanceof GatehouseError ? error : undefined;
    if (!known) logger?.error({ err: error, operationId: id }, 'memory operation failed');
    const at = nowIso();
    await this.db
      .updateTable('memory_operations')
      .set({
        status: 'failed',
        error: JSON.stringify(
          known
            ? { code: known.code, message: known.message }
            : { code: 'internal_error', message: 'The operation failed unexpectedly.' },
        ),
        updated_at: at,
        finished_at: at,
      })
      .where('id', '=', id)
      .where('status', '=', 'processing')
      .execute()
      .catch((e) => logger?.warn({ err: e, operationId: id }, 'could not mark a memory operation failed'));
  }
}
