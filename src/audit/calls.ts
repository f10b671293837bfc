/**
 * One audit event per tool call, from every MCP surface. `record` is on the
 * hot path: it updates the metrics and hands the row to the `AuditLog`'s group
 * commit (concurrent calls share one transaction), and its promise resolves
 * once the row is committed. The contract for every surface: await `record`
 * before the answer leaves, so an answered call always has its row. The group
 * also publishes `tool.called` on the event stream — ids, verdict, outcome and
 * latency, never payloads.
 *
 * What of the payloads is kept follows the `audit.payloads` setting: with
 * `metadata` (the default) nothing of the arguments or the result is stored
 * (only the digest); with `data` both are stored, redacted (`redact.ts`).
 */
import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { ErrorCode } from '../errors.js';
import type { CallSurface, Metrics } from '../metrics/index.js';
import type { CallVerdict } from '../policy/verdicts.js';
import type { Settings } from '../settings/keys.js';
import { nowIso } from '../store/json.js';
import { resultText } from '../wire.js';
import type { AuditLog, AuditRow } from './log.js';
import { redact } from './redact.js';
import type { NewStreamEvent } from './stream.js';

export type { CallSurface, CallVerdict };
export type CallOutcome = 'ok' | 'tool_error' | 'pending_approval' | 'input_required' | ErrorCode;
export type PayloadMode = Settings['audit.payloads'];

export interface CallEvent {
  /** When the call arrived (default: now). */
  at?: Date | string | undefined;
  /** Who asked (an approved call runs later, for the token that asked: only its id and name are at hand). */
  client: { id: string; name: string; user?: { id: string; name: string | null } | undefined };
  surface: CallSurface;
  /** The server the call addressed; null on the admin/memory surfaces or when none resolved. */
  serverId: string | null;
  /** The tool name on its server (upstream name), or the admin/memory tool. */
  tool: string;
  verdict: CallVerdict;
  approvalId?: string | undefined;
  /** `ok`, `tool_error` (the tool answered `isError`), `pending_approval`, or the error code that ended it. */
  outcome: CallOutcome;
  latencyMs: number;
  /** Sizes of the arguments and the result as JSON; computed from `arguments` and `result` when absent. */
  requestBytes?: number | undefined;
  responseBytes?: number | undefined;
  /**
   * The call's arguments. Always pass them: the digest is computed from them in every mode; they are
   * stored (redacted) only under `audit.payloads=data`. Missing arguments digest like `{}`.
   */
  arguments?: unknown;
  /** The arguments' digest and size, when the caller had them computed early (`ArgumentFacts.warmSoon`). */
  argumentFacts?: ArgumentFacts | undefined;
  /** The result the caller received; stored (redacted) only under `audit.payloads=data`. */
  result?: unknown;
  /** The call's OpenTelemetry trace id (tracing on). */
  traceId?: string | undefined;
  /** Whether the call reached its server (its duration feeds the per-server histogram). Default: verdict `allow`. */
  upstream?: boolean | undefined;
  /**
   * The `audit.payloads` value in force for this call, if the caller already read the settings for it;
   * otherwise the auditor reads them (cached; a store read only after a settings change).
   */
  payloads?: PayloadMode | undefined;
  /** The meta-tool that carried the call (`gatehouse__call_tool`), kept in the row's data and its event. */
  via?: string | undefined;
  /**
   * What the upstream asked the agent during the call (2025 era, `upstream/asks.ts`): each ask's method and
   * whether the agent answered it. Kept in the row's data in every mode (no content of the ask or the answer).
   */
  asks?: readonly AskRecord[] | undefined;
}

export interface AskRecord {
  method: string;
  answered: boolean;
}

/** The RFC 8785 canonical JSON of the arguments; undefined if they are not JSON (a lone surrogate, NaN). */
function canonicalArguments(args: unknown): string | undefined {
  try {
    return canonicalize(args === undefined ? {} : args);
  } catch {
    return undefined;
  }
}

/** SHA-256 (hex) of a canonical text; null for arguments that had none. */
const digestOf = (canonical: string | undefined): string | null =>
  canonical === undefined ? null : hash('sha256', canonical, 'hex');

/** SHA-256 (hex) of the RFC 8785 canonical JSON of the arguments; null if they are not JSON (a lone surrogate, NaN). */
export function argsDigest(args: unknown): string | null {
  return digestOf(canonicalArguments(args));
}

/**
 * What a call's audit row keeps of its arguments — the digest and the size of their canonical text — computed
 * once: by `warmSoon`, or when the row is made. The gate warms them while an upstream works on the call, so the
 * answer no longer waits for them when the machine has that time to spare (the CPU is the same either way).
 */
export class ArgumentFacts {
  private facts: { digest: string | null; bytes: number } | undefined;

  constructor(private readonly args: unknown) {}

  /**
   * Computes them two checks of the event loop from now: after the upstream request of a call started now has
   * been written, which on a reused keep-alive socket undici does itself at the next check (it first reads
   * what the idle socket may have received).
   */
  warmSoon(): void {
    setImmediate(() => setImmediate(() => this.compute()));
  }

  compute(): { digest: string | null; bytes: number } {
    if (!this.facts) {
      // One canonical text gives both the digest and the size: JSON as RFC 8785 writes it has the length
      // `JSON.stringify` gives (the same strings and numbers; only the key order differs).
      const canonical = canonicalArguments(this.args);
      const bytes = canonical === undefined ? sizeOf(this.args ?? {}) : Buffer.byteLength(canonical, 'utf8');
      this.facts = { digest: digestOf(canonical), bytes };
    }
    return this.facts;
  }
}

/** The size of a value as JSON text, in bytes (0 for nothing, or for what cannot be serialized). */
function sizeOf(value: unknown): number {
  if (value === undefined) return 0;
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
  } catch {
    return 0;
  }
}

/** The size of a call's result as JSON (0 for none, or one that cannot be serialized); its text is kept for the answer. */
function resultBytes(result: unknown): number {
  if (result === null || typeof result !== 'object') return sizeOf(result);
  try {
    return Buffer.byteLength(resultText(result), 'utf8');
  } catch {
    return 0;
  }
}

/** A non-negative integer column value; anything else is stored as null (one bad value must not fail a batch). */
function count(value: number): number | null {
  return Number.isFinite(value) ? Math.max(0, Math.round(value)) : null;
}

/** Stored times are ISO-8601 UTC, so they sort and compare as text in both databases. */
function isoTime(at: Date | string | undefined): string {
  if (at === undefined) return nowIso();
  const date = at instanceof Date ? at : new Date(at);
  return Number.isNaN(date.getTime()) ? nowIso() : date.toISOString();
}

export interface CallAuditorDeps {
  audit: AuditLog;
  /** The settings service (its `current()` is cached behind a version check). */
  settings: { current(): Promise<Settings> };
  metrics?: Metrics | undefined;
  /** Where the batch flush publishes `tool.called`; wires `audit.streamTo(events)`. */
  events?: { publishMany(events: readonly NewStreamEvent[]): Promise<void> } | undefined;
}

export class CallAuditor {
  private readonly inFlight = new Set<Promise<void>>();
  private settingsRead: Promise<Settings> | undefined;

  constructor(private readonly deps: CallAuditorDeps) {
    if (deps.events) deps.audit.streamTo(deps.events);
  }

  /**
   * Records one call; resolves once its row is committed. Never throws or rejects: auditing must not
   * fail the call (a row that cannot be made or written is reported through the log's `onError`; a
   * refused write is retried and the promise waits for it). The metrics count the call at once, and
   * the row is made at once: the call's answer waits for its commit anyway, so deferring the row to a
   * later turn would only add that turn to every call's latency. Callers await it before answering.
   */
  record(event: CallEvent): Promise<void> {
    const at = isoTime(event.at);
    this.deps.metrics?.observeCall({
      surface: event.surface,
      verdict: event.verdict,
      outcome: event.outcome,
      serverId: event.serverId,
      latencyMs: event.latencyMs,
      upstream: event.upstream ?? event.verdict === 'allow',
    });
    return new Promise<void>((committed) => this.makeRow(event, at, committed));
  }

  /** Writes every call recorded so far (waiting for settings reads in progress); for shutdown and tests. */
  async flush(): Promise<void> {
    await Promise.all([...this.inFlight]);
    await this.deps.audit.flush();
  }

  private makeRow(event: CallEvent, atIso: string, committed: () => void): void {
    if (event.payloads !== undefined) {
      this.enqueueOrReport(event, atIso, event.payloads, committed);
      return;
    }
    // One settings read shared by every call recorded while it is in progress (a cold cache under a burst).
    this.settingsRead ??= this.deps.settings.current().finally(() => {
      this.settingsRead = undefined;
    });
    const pending = this.settingsRead.then(
      (settings) => this.enqueueOrReport(event, atIso, settings['audit.payloads'], committed),
      // Settings unreadable: record the call anyway, keeping no payloads (the safe reading of the setting).
      () => this.enqueueOrReport(event, atIso, 'metadata', committed),
    );
    this.inFlight.add(pending);
    void pending.finally(() => this.inFlight.delete(pending));
  }

  /** A row that cannot be made is reported like a failed write, never thrown (and its caller released). */
  private enqueueOrReport(event: CallEvent, at: string, payloads: PayloadMode, committed: () => void): void {
    try {
      void this.enqueue(event, at, payloads).then(committed);
    } catch (error) {
      this.deps.audit.onError(error, { rows: 1, requeued: false });
      committed();
    }
  }

  private enqueue(event: CallEvent, at: string, payloads: PayloadMode): Promise<void> {
    let data: string | null = null;
    // How the call came, and what it asked the agent, are no payload: they are kept in every mode.
    const via = event.via !== undefined ? { via: event.via } : {};
    const kept = event.asks?.length ? { ...via, asks: event.asks } : via;
    if (payloads === 'data') {
      try {
        data = JSON.stringify({ arguments: redact(event.arguments), result: redact(event.result), ...kept });
      } catch {
        data = JSON.stringify({ payloadError: 'the payload could not be serialized', ...kept });
      }
    } else if (kept !== via || event.via !== undefined) data = JSON.stringify(kept);
    const latencyMs = count(event.latencyMs);
    const facts = (event.argumentFacts ?? new ArgumentFacts(event.arguments)).compute();
    const row: AuditRow = {
      at,
      kind: 'call',
      action: `${event.surface}.call`,
      actor_id: event.client.id,
      actor_name: event.client.name,
      user_id: event.client.user?.id ?? null,
      user_name: event.client.user?.name ?? null,
      server_id: event.serverId,
      tool: event.tool,
      verdict: event.verdict,
      approval_id: event.approvalId ?? null,
      outcome: event.outcome,
      latency_ms: latencyMs,
      request_bytes: count(event.requestBytes ?? facts.bytes),
      response_bytes: count(event.responseBytes ?? resultBytes(event.result)),
      args_digest: facts.digest,
      data,
      ...(event.traceId ? { trace_id: event.traceId } : {}),
    };
    return this.deps.audit.enqueue(row, {
      type: 'tool.called',
      data: {
        calledAt: at,
        surface: event.surface,
        clientId: event.client.id,
        clientName: event.client.name,
        ...(event.client.user ? { userId: event.client.user.id, userName: event.client.user.name } : {}),
        server: event.serverId,
        tool: event.tool,
        verdict: event.verdict,
        outcome: event.outcome,
        latencyMs,
        ...(event.approvalId ? { approvalId: event.approvalId } : {}),
        ...via,
      },
    });
  }
}
