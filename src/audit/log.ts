/**
 * The audit trail. Control-plane changes are written synchronously (they are
 * rare and must not be lost); tool-call events arrive on the hot path and are
 * written in small batches, flushed within 100 ms and on shutdown.
 */
import type { Principal } from '../api/auth.js';
import type { Store } from '../store/db.js';
import { nowIso } from '../store/json.js';
import type { AuditEventTable } from '../store/schema.js';

export interface AdminEvent {
  action: string;
  actor: Principal | undefined;
  serverId?: string | undefined;
  tool?: string | undefined;
  /** Facts about the change; callers pass names and flags, never secret values. */
  data?: Record<string, unknown> | undefined;
}

type AuditRow = Omit<AuditEventTable, 'id'>;

const FLUSH_MS = 100;
const MAX_BATCH = 500;

export class AuditLog {
  private pending: AuditRow[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly store: Store) {}

  /** A control-plane change: written before the caller answers. */
  async recordAdmin(event: AdminEvent): Promise<void> {
    await this.store.db.insertInto('audit_events').values(this.adminRow(event)).execute();
  }

  /** A hot-path event: queued and written with others shortly after. */
  enqueue(row: AuditRow): void {
    this.pending.push(row);
    if (this.pending.length >= MAX_BATCH) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    if (batch.length > 0) {
      this.flushing = this.flushing.then(() =>
        this.store.db
          .insertInto('audit_events')
          .values(batch)
          .execute()
          .then(() => undefined),
      );
    }
    await this.flushing;
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
      outcome: 'ok',
      latency_ms: null,
      request_bytes: null,
      response_bytes: null,
      args_digest: null,
      data: event.data ? JSON.stringify(event.data) : null,
    };
  }
}
