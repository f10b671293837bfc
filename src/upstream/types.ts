/** The public shapes of the upstream client side. */
import type { Client, FetchLike, Progress, Tool } from '@modelcontextprotocol/client';
import type { Cancellation } from '../cancellation.js';
import type { Exchanged, ExchangeRequest } from '../egress/index.js';
import type { AskRelay } from './asks.js';
import type { BoundedCallResult } from './bounds.js';

export type { FetchLike, Progress, Tool };

/** An upstream MCP server (Streamable HTTP, or the legacy HTTP+SSE transport) and the static headers to send it. */
export interface UpstreamTarget {
  url: string;
  /** Sent on every request of this target's connection only; names are case-insensitive. */
  headers?: Record<string, string>;
  /** `sse`: the 2024-11-05 HTTP+SSE transport (`url` is its GET stream). Default Streamable HTTP. */
  transport?: UpstreamTransport;
  /**
   * The server record this target serves (its id), not part of the pool key: `UpstreamPool.closeOwner`
   * ends a record's pooled connections when it is removed, disabled or repointed.
   */
  owner?: string;
}

export type UpstreamTransport = 'streamable-http' | 'sse';

/** The egress guard's `exchange`. */
export type Exchange = (url: string, request: ExchangeRequest) => Promise<Exchanged>;

export interface UpstreamLogger {
  warn(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface UpstreamOptions {
  /** The egress guard's fetch in production; any fetch in tests. Every upstream request goes through it. */
  fetch: FetchLike;
  /** `pooled` reuses one connection per (url, headers); `fresh` connects, operates and closes per request. */
  sessionMode: 'pooled' | 'fresh';
  /** Most pooled connections kept; the least recently used is closed beyond it. */
  poolMaxSize: number;
  /** A pooled connection unused this long is closed. */
  poolIdleMs: number;
  /** Deadline of a whole `listTools` (connecting included). */
  listTimeoutMs: number;
  /** Deadline of a whole `callTool` (connecting included). */
  callTimeoutMs: number;
  /**
   * The egress guard's lean exchange. Given, plain calls — `callTool` and `callToolInteractive` without
   * progress (on a 2025-era connection without a continuation or input capabilities either) — go out
   * through it as one plain HTTP exchange (`direct-call.ts`) instead of through the SDK client: same
   * requests, same checks, same answers, less CPU.
   */
  exchange?: Exchange;
  logger?: UpstreamLogger;
}

export interface ListToolsResult {
  tools: Tool[];
  /** Present when the list was cut: tool or page limit, a string, or the serialized ceiling. */
  truncated?: true;
}

export interface OperationOptions {
  /** The caller's signal: aborting it cancels the upstream request (and tells the upstream). */
  signal?: AbortSignal | Cancellation;
}

export interface CallOptions extends OperationOptions {
  /** Progress the upstream reports while the call runs (`message` bounded like result strings). */
  onProgress?: (progress: Progress) => void;
  /**
   * Log messages (`notifications/message`) the upstream sends on this call's own answer stream, bounded;
   * relayed on direct calls, where they can be told apart from other calls' on a shared connection.
   */
  onLog?: (message: UpstreamLogMessage) => void;
  /** The lowest level the agent wants (`_meta` logLevel), asked of a 2026-07-28 upstream for this call. */
  logLevel?: string;
  /**
   * The tool's `inputSchema` as the upstream lists it: on 2026-07-28 its `x-mcp-header` arguments go out as
   * `Mcp-Param-*` headers (SEP-2243, `param-headers.ts`).
   */
  inputSchema?: unknown;
}

/** One upstream log message, as `notifications/message` carries it. */
export interface UpstreamLogMessage {
  level: string;
  logger?: string;
  data?: unknown;
}

/** What an agent answered to an upstream's input request, and the upstream's state to echo (2026-07-28). */
export interface Continuation {
  inputResponses?: Record<string, unknown> | undefined;
  requestState?: string | undefined;
}

/** An upstream that needs the agent's input before it can answer (elicitation, sampling, roots). */
export interface UpstreamInputRequired {
  inputRequired: { inputRequests: Record<string, unknown>; requestState?: string };
}

/**
 * An upstream that answered a call as a task (the Tasks extension, SEP-2663): its task, checked and bounded;
 * the agent polls it through the hub (`tasks/get`), bound to the token that called.
 */
export interface UpstreamTask {
  task: {
    taskId: string;
    status: string;
    createdAt: string;
    lastUpdatedAt: string;
    ttlMs: number | null;
    pollIntervalMs?: number;
    statusMessage?: string;
  };
}

export type InteractiveCallResult = BoundedCallResult | UpstreamInputRequired | UpstreamTask;

export interface InteractiveCallOptions extends CallOptions {
  continuation?: Continuation | undefined;
  /**
   * The agent's input capabilities (elicitation, sampling, roots), declared to a 2026-07-28 upstream
   * for this call only: an upstream may ask only for input the agent can give.
   */
  inputCapabilities?: Record<string, unknown> | undefined;
  /**
   * Extensions the agent declared that Gatehouse passes on (MCP Apps, `io.modelcontextprotocol/ui`): declared
   * to a 2026-07-28 upstream for this call, beside the input capabilities, so it answers as to that agent.
   */
  extensions?: Record<string, unknown> | undefined;
  /**
   * Relays what a 2025-era upstream asks during the call (sampling, elicitation, roots) to the calling
   * agent (`asks.ts`). Given, a dual-era upstream is driven at 2025 for this call, so it can ask.
   */
  ask?: AskRelay | undefined;
  /**
   * The agent declared the Tasks extension: declared to a 2026-07-28 upstream for this call (on every path:
   * direct, SDK client, stdio), which may then answer with a task (`UpstreamTask`) instead of a result.
   */
  tasks?: boolean | undefined;
  /**
   * `ask` relays to a 2026-07-28 agent in input-required rounds: a dual-era upstream stays at 2026-07-28 (where
   * it asks in its results), and only a 2025-only upstream's asks reach `ask`.
   */
  asksInRounds?: boolean | undefined;
}

/** A running `UpstreamPool.watchLists`. */
export interface ListWatchHandle {
  /** Settles when the watch has ended: its connection failed or closed, or its subscription ended. */
  ended: Promise<void>;
  /**
   * A round trip on the watch's 2025-era session; rejects when it is no good any more (an upstream
   * that restarted forgot the session). Absent on 2026-07-28, which has no `ping` and no session:
   * there the subscription's end is the sign.
   */
  ping?: () => Promise<void>;
  close(): Promise<void>;
}

/** A connected client outside the pool (`UpstreamPool.openChannel`), for streams that outlive an operation. */
export interface UpstreamChannel {
  client: Client;
  /** Settles once the connection is no good any more (failed or closed). */
  ended: Promise<void>;
  close(): Promise<void>;
}

export interface PoolStats {
  /** Connections ready for use: pooled ones, and those of list watches. */
  open: number;
  /** Connects in flight (pooled and fresh). */
  connecting: number;
  /** Upstream URLs whose protocol era is remembered. */
  eraByUrl: number;
  /** Calls sent as one plain HTTP exchange (see `exchange`) since the pool was made. */
  directCalls: number;
}

/** The client capabilities a 2026-07-28 call declares: the agent's input ones, and the extensions passed on. */
export function withExtensions(
  inputCapabilities: Record<string, unknown> | undefined,
  extensions: Record<string, unknown> | undefined,
): Record<string, unknown> {
  if (!extensions) return inputCapabilities ?? {};
  return { ...inputCapabilities, extensions };
}
