/** Audit test helpers: a store whose statements are counted (and can be made to fail), and an auditor around it. */
import type { KyselyPlugin, RootOperationNode } from 'kysely';
import { CallAuditor, type CallEvent } from '../../src/audit/calls.js';
import { AuditLog, type AuditLogOptions } from '../../src/audit/log.js';
import { EventHub } from '../../src/audit/stream.js';
import type { TokenPrincipal } from '../../src/identity/index.js';
import { Metrics } from '../../src/metrics/index.js';
import { SettingsService } from '../../src/settings/service.js';
import type { Store } from '../../src/store/db.js';

/** Counts INSERT statements per table; `failNext(table, n)` makes the next n inserts into it fail. */
export class StatementCounter implements KyselyPlugin {
  readonly inserts = new Map<string, number>();
  /** When (Date.now) each table's first INSERT was issued. */
  readonly firstInsertAt = new Map<string, number>();
  private readonly failures = new Map<string, number>();

  failNext(table: string, times = 1): void {
    this.failures.set(table, times);
  }

  insertsInto(table: string): number {
    return this.inserts.get(table) ?? 0;
  }

  transformQuery(args: { node: RootOperationNode }): RootOperationNode {
    const node = args.node;
    if (node.kind === 'InsertQueryNode') this.noteInsert(node.into?.table.identifier.name ?? '?');
    return node;
  }

  /** Counts one insert statement into `table`, or throws the failure injected for it. */
  noteInsert(table: string): void {
    const failing = this.failures.get(table) ?? 0;
    if (failing > 0) {
      this.failures.set(table, failing - 1);
      throw new Error(`injected failure writing ${table}`);
    }
    this.inserts.set(table, this.insertsInto(table) + 1);
    if (!this.firstInsertAt.has(table)) this.firstInsertAt.set(table, Date.now());
  }

  async transformResult<R>(args: { result: R }): Promise<R> {
    return args.result;
  }
}

/** The same store, its statements going through `counter`. */
export function countedStore(store: Store, counter: StatementCounter): Store {
  return {
    ...store,
    db: store.db.withPlugin(counter),
    relaxedWrite: (fn) => store.relaxedWrite((db) => fn(db.withPlugin(counter))),
    // The fast path builds no Kysely query, so it is counted (and failed) here, then really run.
    relaxedInsert: async (table, rows, increments) => {
      if (rows.length > 0) counter.noteInsert(table);
      await store.relaxedInsert(table, rows, increments);
    },
  };
}

export interface AuditRig {
  store: Store;
  counter: StatementCounter;
  audit: AuditLog;
  events: EventHub;
  settings: SettingsService;
  metrics: Metrics;
  auditor: CallAuditor;
  close(): void;
}

export async function auditRig(base: Store, options: AuditLogOptions = {}): Promise<AuditRig> {
  const counter = new StatementCounter();
  const store = countedStore(base, counter);
  const audit = new AuditLog(store, options);
  const events = await EventHub.open(store);
  const settings = new SettingsService(store);
  const metrics = new Metrics({ defaultMetrics: false });
  const auditor = new CallAuditor({ audit, settings, metrics, events });
  return { store, counter, audit, events, settings, metrics, auditor, close: () => events.close() };
}

export function principal(id: string, name = id, role: TokenPrincipal['role'] = 'agent'): TokenPrincipal {
  return { id, name, role, groups: ['default'], rateLimit: null, maxConcurrent: null };
}

export function callEvent(overrides: Partial<CallEvent> = {}): CallEvent {
  return {
    client: principal('tok_agent', 'agent-one'),
    surface: 'hub',
    serverId: 'files',
    tool: 'read_file',
    verdict: 'allow',
    outcome: 'ok',
    latencyMs: 12,
    requestBytes: 100,
    responseBytes: 200,
    arguments: { path: 'a.txt' },
    result: { content: [{ type: 'text', text: 'hello' }] },
    ...overrides,
  };
}

/** Polls until `check` returns true, or fails after `timeoutMs`. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
