/**
 * Prometheus metrics. Each `Metrics` owns its own prom-client `Registry` —
 * never the global default — so several apps (and tests) in one process do not
 * collide. Label values are kept to known, bounded sets: a value an agent could
 * choose freely (an unknown server name, a made-up outcome) never becomes a
 * label, so the series count stays bounded.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { ERROR_CATALOGUE } from '../errors.js';
import { CALL_VERDICTS } from '../policy/verdicts.js';

export const CALL_SURFACES = ['hub', 'admin', 'memory'] as const;
export type CallSurface = (typeof CALL_SURFACES)[number];

/** Seconds; from a sub-millisecond local answer to a slow upstream. */
export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A number now, or a promise of one (e.g. a count from the store, read at scrape time only). */
export type GaugeSource = () => number | Promise<number>;

export interface MetricsOptions {
  /** Open upstream connections, read at scrape time. */
  poolConnections?: GaugeSource | undefined;
  /** Approvals waiting for a decision, read at scrape time. */
  approvalsPending?: GaugeSource | undefined;
  /** Node.js process metrics (CPU, memory, event loop, GC); default true. */
  defaultMetrics?: boolean | undefined;
  /** Rows in the audit table, read at scrape time. */
  auditRows?: GaugeSource | undefined;
}

export interface ObservedCall {
  surface: string;
  verdict: string;
  outcome: string;
  /** The server label of the duration histogram; only observed when `upstream` is true. */
  serverId: string | null;
  latencyMs: number;
  /** Whether the call went to its server (then its duration is observed per server). */
  upstream: boolean;
}

const KNOWN_OUTCOMES: ReadonlySet<string> = new Set([
  'ok',
  'tool_error',
  'pending_approval',
  ...Object.keys(ERROR_CATALOGUE),
]);
const KNOWN_SURFACES: ReadonlySet<string> = new Set(CALL_SURFACES);
const KNOWN_VERDICTS: ReadonlySet<string> = new Set(CALL_VERDICTS);

const bounded = (value: string, known: ReadonlySet<string>): string => (known.has(value) ? value : 'other');

async function read(source: GaugeSource | undefined): Promise<number | undefined> {
  if (!source) return undefined;
  try {
    const value = await source();
    return Number.isFinite(value) ? value : undefined;
  } catch {
    return undefined; // a failing source must not break the whole scrape; the gauge keeps its last value
  }
}

export class Metrics {
  readonly registry = new Registry();
  readonly toolCalls: Counter<'surface' | 'verdict' | 'outcome'>;
  readonly toolCallDuration: Histogram<'server'>;
  readonly hubFastRequests: Counter;
  readonly poolConnections: Gauge;
  readonly approvalsPending: Gauge;
  readonly auditRows: Gauge;
  readonly auditPruned: Counter;
  readonly schemasRefused: Counter<'reason'>;
  readonly requestTimeouts: Counter;
  readonly sessionEvictions: Counter;
  private sources: {
    poolConnections?: GaugeSource | undefined;
    approvalsPending?: GaugeSource | undefined;
    auditRows?: GaugeSource | undefined;
  };
  /** Calls noted since the counters were last updated (`observeCall`). */
  private readonly observed: ObservedCall[] = [];
  private counting: NodeJS.Immediate | undefined;

  constructor(options: MetricsOptions = {}) {
    this.sources = {
      poolConnections: options.poolConnections,
      approvalsPending: options.approvalsPending,
      auditRows: options.auditRows,
    };
    const sources = () => this.sources;
    this.toolCalls = new Counter({
      name: 'gatehouse_tool_calls_total',
      help: 'Tool calls by surface, verdict and outcome.',
      labelNames: ['surface', 'verdict', 'outcome'] as const,
      registers: [this.registry],
    });
    this.toolCallDuration = new Histogram({
      name: 'gatehouse_tool_call_duration_seconds',
      help: 'Duration of tool calls that reached their server, by server.',
      labelNames: ['server'] as const,
      buckets: DURATION_BUCKETS,
      registers: [this.registry],
    });
    this.hubFastRequests = new Counter({
      name: 'gatehouse_hub_fast_path_requests_total',
      help: 'Hub tools/call and tools/list requests served by the fast path instead of the SDK server (both eras).',
      registers: [this.registry],
    });
    this.poolConnections = new Gauge({
      name: 'gatehouse_upstream_pool_connections',
      help: 'Open pooled connections to upstream MCP servers.',
      registers: [this.registry],
      async collect() {
        const value = await read(sources().poolConnections);
        if (value !== undefined) this.set(value);
      },
    });
    this.approvalsPending = new Gauge({
      name: 'gatehouse_approvals_pending',
      help: 'Approvals waiting for a decision.',
      registers: [this.registry],
      async collect() {
        const value = await read(sources().approvalsPending);
        if (value !== undefined) this.set(value);
      },
    });
    this.auditRows = new Gauge({
      name: 'gatehouse_audit_events_rows',
      help: 'Rows in the audit table (PostgreSQL: the planner estimate once the table has been analyzed).',
      registers: [this.registry],
      async collect() {
        const value = await read(sources().auditRows);
        if (value !== undefined) this.set(value);
      },
    });
    this.auditPruned = new Counter({
      name: 'gatehouse_audit_events_pruned_total',
      help: 'Audit rows deleted by retention (audit.retentionDays) by this process.',
      registers: [this.registry],
    });
    this.schemasRefused = new Counter({
      name: 'gatehouse_schemas_refused_total',
      help: 'Tools quarantined at a handshake because their schema is refused (schema_too_large, unsafe_schema).',
      labelNames: ['reason'] as const,
      registers: [this.registry],
    });
    this.requestTimeouts = new Counter({
      name: 'gatehouse_http_request_timeouts_total',
      help: 'Requests whose client did not send headers and body within GATEHOUSE_REQUEST_TIMEOUT_MS (answered 408).',
      registers: [this.registry],
    });
    this.sessionEvictions = new Counter({
      name: 'gatehouse_session_evictions_total',
      help: 'Hub 2025-era sessions closed to make room for a new one of the same token (per-token cap or backstop).',
      registers: [this.registry],
    });
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** Sets (or replaces) the scrape-time sources, for parts created after the metrics. */
  setSources(sources: Pick<MetricsOptions, 'poolConnections' | 'approvalsPending' | 'auditRows'>): void {
    this.sources = { ...this.sources, ...sources };
  }

  /**
   * Counts one call. Called on the call's path, so it only notes the call: the counters are updated once per
   * turn of the event loop, after the turn's answers have been written (and before any scrape).
   */
  observeCall(call: ObservedCall): void {
    this.observed.push(call);
    this.counting ??= setImmediate(this.countObserved);
  }

  /** Updates the counters for every noted call (a callback: `setImmediate`). */
  private readonly countObserved = (): void => {
    if (this.counting) clearImmediate(this.counting);
    this.counting = undefined;
    for (const call of this.observed.splice(0)) this.count(call);
  };

  private count(call: ObservedCall): void {
    this.toolCalls.inc({
      surface: bounded(call.surface, KNOWN_SURFACES),
      verdict: bounded(call.verdict, KNOWN_VERDICTS),
      outcome: bounded(call.outcome, KNOWN_OUTCOMES),
    });
    if (call.upstream && Number.isFinite(call.latencyMs) && call.latencyMs >= 0) {
      this.toolCallDuration.observe({ server: call.serverId ?? 'gatehouse' }, call.latencyMs / 1000);
    }
  }

  /** The Prometheus text exposition of every metric in this registry. */
  text(): Promise<string> {
    this.countObserved();
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
