/**
 * Whether this replica should be sent new work (`GET /readyz`), apart from whether it lives
 * (`/healthz`): not while it starts, while its store is unreachable or behind the migrations this
 * release needs, nor once it drains for a shutdown. A balancer polls it and stops sending requests
 * to a replica that answers 503, while that replica finishes what it has.
 */
import { sql } from 'kysely';
import type { Store } from './store/db.js';
import { LATEST_MIGRATION } from './store/migrations.js';

export type NotReadyReason = 'starting' | 'migrations' | 'store' | 'drain';

export type ReadyState = { ready: true } | { ready: false; reason: NotReadyReason; message: string };

/** A store check longer than this counts as a store that cannot serve. */
const STORE_CHECK_MS = 2_000;

export class Readiness {
  private phase: 'starting' | 'ready' | 'draining' = 'starting';

  constructor(private readonly store: Store) {}

  /** Everything is assembled and started: ready as soon as the store agrees. */
  started(): void {
    if (this.phase === 'starting') this.phase = 'ready';
  }

  /** From now on not ready, for good: this replica is shutting down. */
  drain(): void {
    this.phase = 'draining';
  }

  get draining(): boolean {
    return this.phase === 'draining';
  }

  async check(): Promise<ReadyState> {
    if (this.phase === 'draining') {
      return { ready: false, reason: 'drain', message: 'Shutting down: finishing the calls and streams in progress.' };
    }
    if (this.phase === 'starting') return { ready: false, reason: 'starting', message: 'Starting.' };
    let applied: number;
    try {
      applied = await withTimeout(this.appliedMigration(), STORE_CHECK_MS);
    } catch {
      return { ready: false, reason: 'store', message: `The ${this.store.kind} store does not answer.` };
    }
    if (applied < LATEST_MIGRATION) {
      return {
        ready: false,
        reason: 'migrations',
        message: `The store's schema is at migration ${applied}; this release needs ${LATEST_MIGRATION}.`,
      };
    }
    return { ready: true };
  }

  /** One query: reaches the store and reads how far its schema is migrated. */
  private async appliedMigration(): Promise<number> {
    const { rows } = await sql<{
      v: number | string | null;
    }>`select max(version) as v from gatehouse_migrations`.execute(this.store.db);
    return Number(rows[0]?.v ?? 0);
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timed out')), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}
