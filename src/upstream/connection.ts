/**
 * One connected MCP client for one upstream target (URL + headers): the SDK `Client` over our
 * traced Streamable HTTP transport, connected with a remembered era verdict or by negotiating; or,
 * for a legacy HTTP+SSE target, over the SDK's SSE transport, always at the 2025 era.
 */
import { Client, type FetchLike, type PriorDiscovery, type ReconnectionScheduler } from '@modelcontextprotocol/client';
import { type AskingCall, handleAsks, handleLogs } from './asks.js';
import { LEGACY_CLIENT_CAPABILITIES } from './client-capabilities.js';
import type { DirectTarget } from './direct-call.js';
import type { LegacySession } from './direct-legacy.js';
import { RESUME_MIN_MS } from './direct-stream.js';
import { isTransportFailure } from './map-error.js';
import { BoundedSseTransport } from './sse-transport.js';
import type { NormalizedTarget } from './target.js';
import { currentScope, traced, tracedFetch } from './trace.js';
import { TracedHttpTransport } from './transport.js';
import type { UpstreamLogger } from './types.js';

const CLIENT_INFO = { name: 'gatehouse', version: '0.1.0' };
/** The HTTP+SSE transport has no 2026-07-28 form: its servers are initialized as 2025-era ones, never probed. */
const SSE_ERA: PriorDiscovery = { kind: 'legacy' };
/** How long a closing connection waits for the upstream to acknowledge the session DELETE. */
const TERMINATE_WAIT_MS = 1_000;

/** The session's GET stream is reopened no sooner than this after it ended, doubling per quick end. */
const REOPEN_MIN_MS = 1_000;
/** The longest wait before a reopen, whatever the upstream's `retry:` says (a timer past 2^31 ms fires at once). */
const REOPEN_MAX_MS = 60_000;
/** A GET stream open at least this long ended for a reason of its own: the backoff starts over. */
const STREAM_STABLE_MS = 10_000;
/** Quick ends in a row after which the GET stream stays closed (calls go on over POST). */
const MAX_QUICK_REOPENS = 5;

/**
 * Paces the SDK's reopening of event streams (its `reconnectionScheduler`). Its `reconnectionOptions`
 * cannot: an upstream's `retry:` replaces the backoff (`retry: 0` reopens at once), and the attempt count
 * starts over after every reopen that succeeded, so a stream ended at once is reopened in a tight loop.
 * Here the session's GET stream backs off until one stays open `STREAM_STABLE_MS`, and after
 * `MAX_QUICK_REOPENS` quick ends it is left closed. A request's stream ends with its request: only a floor.
 */
class StreamPacer {
  private quickReopens = 0;
  private openedAt = Date.now();
  private abandon!: () => void;
  /** Settles when the GET stream was given up: the upstream hears nothing more from this session's stream. */
  readonly abandoned = new Promise<void>((resolve) => {
    this.abandon = resolve;
  });

  constructor(private readonly onAbandon: (reopens: number) => void) {}

  readonly schedule: ReconnectionScheduler = (reconnect, delay) => {
    // The SDK reports a stream's end in the scope it was opened in: a request's, or none for the GET stream.
    const sessionStream = currentScope()?.requestId === undefined;
    let wait = Math.max(delay, RESUME_MIN_MS);
    if (sessionStream) {
      if (Date.now() - this.openedAt >= STREAM_STABLE_MS) this.quickReopens = 0;
      if (this.quickReopens >= MAX_QUICK_REOPENS) {
        this.onAbandon(this.quickReopens);
        this.abandon();
        return;
      }
      wait = Math.max(delay, REOPEN_MIN_MS * 2 ** this.quickReopens);
      this.quickReopens += 1;
    }
    const timer = setTimeout(
      () => {
        if (sessionStream) this.openedAt = Date.now();
        reconnect();
      },
      Math.min(wait, REOPEN_MAX_MS),
    );
    return () => clearTimeout(timer);
  };
}

export interface OpenOptions {
  target: NormalizedTarget;
  fetch: FetchLike;
  /** A remembered era verdict; without one the client probes (`server/discover`, then `initialize`). */
  prior: PriorDiscovery | undefined;
  timeoutMs: number;
  /** Aborting it abandons the connect (the transport is closed). */
  signal?: AbortSignal;
  logger: UpstreamLogger;
  /**
   * Declare `LEGACY_CLIENT_CAPABILITIES` (the asks, answered through the call's relay, `asks.ts`; MCP Apps).
   * Only for a connection that will speak the 2025 era: on 2026-07-28 the client's capabilities would ride
   * every request's envelope, claiming input (and extensions) no agent declared.
   */
  declareAsks?: boolean;
}

export class Connection {
  /** The transport reported a failure: hand it out no more. */
  broken = false;
  /** Operations run on it (counted by the pool). */
  operations = 0;
  /** The operations in flight on it, each with what it relays (`asks.ts`; `inFlight`). */
  private readonly calls = new Set<AskingCall>();
  private ready = false;
  private closing: Promise<void> | undefined;
  private direct: DirectTarget | undefined;
  private session: LegacySession | undefined;
  private retire!: () => void;
  private pacer: StreamPacer | undefined;
  /** Settles once the connection is no good any more: retired after a transport failure, or closed. */
  readonly retired = new Promise<void>((resolve) => {
    this.retire = resolve;
  });

  private constructor(
    readonly client: Client,
    readonly transport: TracedHttpTransport | BoundedSseTransport,
    readonly target: NormalizedTarget,
    private readonly logger: UpstreamLogger,
  ) {}

  /** Settles when the session's GET stream was given up (`StreamPacer`); never on HTTP+SSE. */
  get streamAbandoned(): Promise<void> {
    return this.pacer?.abandoned ?? new Promise<void>(() => {});
  }

  static async open(options: OpenOptions): Promise<Connection> {
    const { target, signal } = options;
    const sse = target.transport === 'sse';
    const prior = sse ? SSE_ERA : options.prior;
    const transportOptions = {
      fetch: tracedFetch(options.fetch),
      // `manual`: every redirect reaches the SDK as a response and fails the request; none is followed.
      requestInit: { headers: target.headers, redirect: 'manual' as const },
    };
    const upstream = new URL(target.url).origin;
    const pacer = sse
      ? undefined
      : new StreamPacer((reopens) =>
          options.logger.warn({ upstream, reopens }, 'upstream keeps ending its event stream; not reopening it'),
        );
    const transport = pacer
      ? new TracedHttpTransport(new URL(target.url), { ...transportOptions, reconnectionScheduler: pacer.schedule })
      : new BoundedSseTransport(new URL(target.url), transportOptions, options.timeoutMs);
    const client = new Client(CLIENT_INFO, {
      versionNegotiation: { mode: 'auto' },
      // Gatehouse has no user to ask: an upstream's request for input is a typed error, not a hang.
      inputRequired: { autoFulfill: false },
      ...(options.declareAsks ? { capabilities: LEGACY_CLIENT_CAPABILITIES } : {}),
    });
    const connection = new Connection(client, transport, target, options.logger);
    connection.pacer = pacer;
    // What nothing ties to its request goes to the sole operation in flight, if that one relays it. Every operation
    // counts (`UpstreamPool.run`): a prompt's ask (say) never reaches another agent's call as if that were alone.
    const sole = () => (connection.calls.size === 1 ? [...connection.calls][0] : undefined);
    // Asks on the session's stream (on HTTP+SSE, every ask).
    if (options.declareAsks) handleAsks(client, sole);
    // Log messages on a call's own answer stream reach that call's agent (SDK path; `asks.ts`). HTTP+SSE has
    // one stream for every answer, which ties no message to its call: the sole call in flight takes them.
    handleLogs(client, sse ? sole : undefined);
    client.onerror = (error) => connection.noteError(error);
    client.onclose = () => connection.retire();
    const abandon = () => void connection.close();
    signal?.addEventListener('abort', abandon, { once: true });
    try {
      signal?.throwIfAborted();
      await traced(() =>
        client.connect(transport, { timeout: options.timeoutMs, ...(signal && { signal }), ...(prior && { prior }) }),
      );
    } catch (error) {
      await connection.close();
      throw error;
    } finally {
      signal?.removeEventListener('abort', abandon);
    }
    connection.ready = true;
    return connection;
  }

  /** Runs `work` as an operation in flight on this connection, relaying what `call` relays (`open`). */
  async inFlight<T>(call: AskingCall, work: () => Promise<T>): Promise<T> {
    this.calls.add(call);
    try {
      return await work();
    } finally {
      this.calls.delete(call);
    }
  }

  get era(): 'modern' | 'legacy' {
    return this.client.getProtocolEra() === 'modern' ? 'modern' : 'legacy';
  }

  /**
   * Whether Gatehouse may send a call on this connection's behalf as one plain exchange (`direct-call.ts`):
   * not on HTTP+SSE, whose answers arrive on the connection's own event stream.
   */
  get directCalls(): boolean {
    return this.transport instanceof TracedHttpTransport;
  }

  /** Where and as whom `direct-call.ts` sends a call on this connection's behalf (one object per connection). */
  get directTarget(): DirectTarget {
    this.direct ??= { url: this.target.url, headers: this.target.headers, clientInfo: CLIENT_INFO };
    return this.direct;
  }

  /**
   * What a direct call on a 2025-era connection sends as the transport would: its session and negotiated
   * version. The same object while they stay the same, so the headers built from it can be kept.
   */
  get legacySession(): LegacySession {
    const { sessionId, protocolVersion } = this.httpTransport ?? {};
    const current = this.session;
    if (current && current.sessionId === sessionId && current.protocolVersion === protocolVersion) return current;
    const fresh = { sessionId, protocolVersion };
    this.session = fresh;
    return fresh;
  }

  get sessionId(): string | undefined {
    return this.httpTransport?.sessionId;
  }

  private get httpTransport(): TracedHttpTransport | undefined {
    return this.transport instanceof TracedHttpTransport ? this.transport : undefined;
  }

  get closed(): boolean {
    return this.closing !== undefined;
  }

  /** The verdict to remember for this URL. */
  verdict(): PriorDiscovery {
    const discover = this.client.getDiscoverResult();
    return this.era === 'modern' && discover ? { kind: 'modern', discover } : { kind: 'legacy' };
  }

  /** Ends the session politely (DELETE, bounded wait) and closes. Idempotent. */
  close(): Promise<void> {
    this.retire();
    this.closing ??= (async () => {
      const http = this.httpTransport;
      if (this.ready && http?.sessionId !== undefined) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          http.terminateSession().catch(() => {}),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, TERMINATE_WAIT_MS);
          }),
        ]);
        clearTimeout(timer);
      }
      // A client that never finished connecting may not own its transport yet: close that directly.
      if (this.client.transport) await this.client.close().catch(() => {});
      else await this.transport.close().catch(() => {});
    })();
    return this.closing;
  }

  /** Out-of-band SDK errors: attribute them to the request in flight, and retire a failing connection. */
  private noteError(error: Error): void {
    const scope = currentScope();
    if (scope?.requestId !== undefined) scope.noted ??= error;
    if (!this.ready || this.closing || this.broken) return;
    if (!this.httpTransport) {
      // HTTP+SSE: every answer rides the one event stream, and a stream the SDK reopens belongs to a new,
      // uninitialized session. Any failure of it ends this connection; closing fails the requests in flight.
      this.broken = true;
      this.logger.debug(
        { upstream: new URL(this.target.url).origin, error: error.name },
        'upstream SSE connection retired',
      );
      void this.close();
      return;
    }
    // A bare SSE disconnect outside a request is the GET stream; the SDK reopens it, paced (`StreamPacer`).
    const inRequest = scope?.requestId !== undefined;
    const gaveUp = /^(Failed to reconnect SSE stream|Maximum reconnection attempts)/.test(error.message);
    const standaloneDrop = !inRequest && /^SSE stream disconnected/.test(error.message);
    if ((gaveUp || isTransportFailure(error)) && !standaloneDrop) {
      this.broken = true;
      this.retire();
      this.logger.debug(
        { upstream: new URL(this.target.url).origin, error: error.name },
        'upstream connection retired',
      );
    }
  }
}
