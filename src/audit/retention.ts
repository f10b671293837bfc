/**
 * Audit retention: rows older than `audit.retentionDays` (a platform setting; 0 keeps everything),
 * counted from the hour at or before that age, are deleted in the background, in bounded batches with a
 * pause between them, so the audit's group commit (and every other write) gets the database between two
 * batches and never waits long behind one; then the Overview's rollups of the same hours. One replica prunes at a time (the store's lock `audit-retention`); a pass runs soon after the
 * start and then every `intervalMs`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logging.js';
import { pruneRollup } from '../overview/rollup.js';
import type { SettingsService } from '../settings/service.js';
import type { Store } from '../store/db.js';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

export interface AuditRetentionOptions {
  store: Store;
  settings: Pick<SettingsService, 'current'>;
  logger?: Logger;
  /** Rows per delete (default 1000). */
  batchSize?: number;
  /** Pause between two batches (default 50 ms): the audit's flushes and other writes go first. */
  pauseMs?: number;
  /** Between passes (default 10 minutes); the first pass runs `firstPassMs` after `start()` (default 30 s). */
  intervalMs?: number;
  firstPassMs?: number;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
  /** Called after each batch with the rows it deleted (metrics; tests). */
  onBatch?: (deleted: number) => void | Promise<void>;
}

export class AuditRetention {
  private readonly closing = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<number> | undefined;
  private readonly batchSize: number;
  private readonly pauseMs: number;
  private readonly now: () => number;

  constructor(private readonly options: AuditRetentionOptions) {
    this.batchSize = options.batchSize ?? 1000;
    this.pauseMs = options.pauseMs ?? 50;
    this.now = options.now ?? Date.now;
  }

  start(): void {
    const every = this.options.intervalMs ?? 10 * 60_000;
    const schedule = (ms: number) => {
      if (this.closing.signal.aborted) return;
      this.timer = setTimeout(() => {
        void this.runOnce()
          .catch((error) => this.options.logger?.warn({ err: error }, 'audit retention pass failed'))
          .finally(() => schedule(every));
      }, ms);
      this.timer.unref();
    };
    schedule(this.options.firstPassMs ?? 30_000);
  }

  /**
   * One pass: deletes every row older than the retention, batch by batch; answers how many it deleted
   * (0 as well when retention is off, or another replica is pruning now).
   */
  runOnce(): Promise<number> {
    this.pass ??= this.prune().finally(() => {
      this.pass = undefined;
    });
    return this.pass;
  }

  async close(): Promise<void> {
    this.closing.abort();
    clearTimeout(this.timer);
    await this.pass?.catch(() => {});
  }

  private async prune(): Promise<number> {
    const days = (await this.options.settings.current())['audit.retentionDays'];
    if (days === 0) return 0;
    // On an hour boundary: the rows and the Overview's rollups (whole hours and ten-minute periods) are cut
    // at the same instant, so the rollups never count a row retention deleted (rows live up to an hour longer).
    const cutoff = new Date(Math.floor((this.now() - days * DAY_MS) / HOUR_MS) * HOUR_MS).toISOString();
    const outcome = await this.options.store.locks.withLock('audit-retention', async (lost) => {
      const signal = AbortSignal.any([lost, this.closing.signal]);
      let total = 0;
      while (!signal.aborted) {
        const { db } = this.options.store;
        // By the time index (`at`): the oldest rows first, a bounded number per statement.
        const result = await db
          .deleteFrom('audit_events')
          .where('id', 'in', db.selectFrom('audit_events').select('id').where('at', '<', cutoff).limit(this.batchSize))
          .executeTakeFirst();
        const deleted = Number(result.numDeletedRows);
        total += deleted;
        await this.options.onBatch?.(deleted);
        if (deleted < this.batchSize) {
          // The rollups of the hours just deleted (a few rows per period; not counted as audit rows).
          if (!signal.aborted) await pruneRollup(db, cutoff.slice(0, 13));
          break;
        }
        await sleep(this.pauseMs, undefined, { signal }).catch(() => {});
      }
      return total;
    });
    return outcome.ran ? outcome.value : 0;
  }
}
