/**
 * The upstream pool: every operation Gatehouse runs against an upstream MCP server goes through it.
 *
 * - Pooled mode keeps one connected client per key (SHA-256 of URL + sorted headers), so a call
 *   costs one upstream round trip. Concurrent first uses share one connect; the pool is LRU-bounded
 *   and idle connections close after `poolIdleMs`. Fresh mode connects, operates and closes per call.
 * - The protocol era of each URL is negotiated once and remembered, in both modes.
 * - One deadline covers connect and operation. A 2025-era upstream that forgot the session (404),
 *   or a remembered era that stopped working, costs one transparent reconnect and retry.
 * - Every failure leaves as a catalogue error (`map-error.ts`).
 */
import { type Client, type PriorDiscovery, SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import type { Cancellation } from '../cancellation.js';
import { findGatehouseError, GatehouseError } from '../errors.js';
import { inSpan } from '../telemetry/tracing.js';
import { type AskingCall, withCallRelays } from './asks.js';
import type { BoundedCallResult } from './bounds.js';
import { Connection } from './connection.js';
import { Deadline } from './deadline.js';
import { canCallDirectly } from './direct-call.js';
import { callLegacyDirect } from './direct-legacy.js';
import { callModernDirect } from './direct-modern.js';
import { EraMemory } from './era-memory.js';
import { type ListKind, watchListChanges } from './list-watch.js';
import { isEraMismatch, isSessionLost, keepsConnection, toUpstreamError } from './map-error.js';
import { callBoundedTool, callInteractiveTool, listAllTools } from './operations.js';
import { BoundedSseTransport } from './sse-transport.js';
import { type NormalizedTarget, normalizeTarget } from './target.js';
import { traced } from './trace.js';
import type {
  CallOptions,
  Exchange,
  InteractiveCallOptions,
  InteractiveCallResult,
  ListToolsResult,
  ListWatchHandle,
  OperationOptions,
  PoolStats,
  UpstreamChannel,
  UpstreamLogger,
  UpstreamOptions,
  UpstreamTarget,
} from './types.js';

const silent: UpstreamLogger = { warn() {}, debug() {} };

/** The verdict a 2025-era twin connects with (`NormalizedTarget.forAsks`). */
const LEGACY: PriorDiscovery = { kind: 'legacy' };
/** Modern-only URLs remembered (a bound, not a cache: past it they are forgotten at once). */
const MAX_MODERN_ONLY = 10_000;

/** Operations after which a pooled modern connection is replaced (see `release`). */
const MODERN_RECYCLE_AFTER = 1_000;

/** A pooled connection, or the connect that will produce it. */
interface Slot {
  key: string;
  /** What it connects to (every target of one key has the same URL, headers and transport). */
  target: NormalizedTarget;
  /** The server records whose operations used it (`closeOwner`). */
  owners: Set<string>;
  pending: Promise<Connection>;
  connection?: Connection;
  /** Operations holding or waiting for it. */
  users: number;
  /** Out of the pool: close when the last user leaves. */
  retired: boolean;
  idleTimer?: NodeJS.Timeout;
}

/** A plain call's result: an upstream asking for input fails it as the SDK client does without `allowInputRequired`. */
function completeResult(outcome: InteractiveCallResult): BoundedCallResult {
  if (!('inputRequired' in outcome) && !('task' in outcome)) return outcome;
  // A plain call declares no Tasks extension, so only the input request can come back here.
  const resultType = 'task' in outcome ? 'task' : 'input_required';
  throw new SdkError(SdkErrorCode.UnsupportedResultType, `Unsupported result type '${resultType}' for tools/call`, {
    resultType,
    method: 'tools/call',
  });
}

/** What an operation holds while it runs. */
interface Lease {
  connection: Connection;
  slot?: Slot;
}

export class UpstreamPool {
  private readonly slots = new Map<string, Slot>();
  private readonly eras = new EraMemory();
  private readonly logger: UpstreamLogger;
  /** Aborted by `close()`: abandons pooled connects in flight. */
  private readonly lifetime = new AbortController();
  private readonly closing = new Set<Promise<void>>();
  /** Fresh-mode connects in flight, abandoned by `close()`. */
  private readonly freshConnects = new Set<AbortController>();
  private connecting = 0;
  private directCalls = 0;
  private readonly normalizedTargets = new WeakMap<UpstreamTarget, NormalizedTarget>();
  private readonly askTwins = new WeakMap<NormalizedTarget, NormalizedTarget>();
  /** URLs that refused a 2025 handshake (modern only): their asking calls run on the usual target. */
  private readonly modernOnly = new Set<string>();
  private closed = false;
  /** Connections of `watchLists`: outside the pool's slots, closed with it. */
  private readonly watches = new Set<Connection>();

  constructor(private readonly options: UpstreamOptions) {
    this.logger = options.logger ?? silent;
  }

  /** Lists the upstream's tools, every page drained within `listTimeoutMs`, bounded. */
  listTools(target: UpstreamTarget, opts: OperationOptions & { catalog?: boolean } = {}): Promise<ListToolsResult> {
    return this.run(target, this.options.listTimeoutMs, opts.signal, (client, deadline) =>
      traced(() => listAllTools(client, deadline, { catalog: opts.catalog === true })),
    );
  }

  /**
   * Calls one tool within `callTimeoutMs`; the result is bounded and `isError: true` is a normal result.
   * An upstream that asks for input fails the call, as the SDK client fails it (Gatehouse gives none here).
   */
  callTool(
    target: UpstreamTarget,
    name: string,
    args: Record<string, unknown> | undefined,
    opts: CallOptions = {},
  ): Promise<BoundedCallResult> {
    const { exchange } = this.options;
    return inSpan(
      `tools/call ${name}`,
      'client',
      () => ({
        'mcp.method.name': 'tools/call',
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': name,
        'server.address': hostOf(target.url),
      }),
      () =>
        this.run(target, this.options.callTimeoutMs, opts.signal, (client, deadline, connection) => {
          if (!exchange || !connection.directCalls || !canCallDirectly(name, opts, connection.era)) {
            return traced(() => callBoundedTool(client, deadline, name, args, opts.onProgress, opts.inputSchema));
          }
          return this.callDirectly(
            exchange,
            connection,
            deadline,
            name,
            args,
            opts.inputSchema === undefined ? {} : { inputSchema: opts.inputSchema },
          ).then(completeResult);
        }),
    );
  }

  /**
   * `callTool` for a gateway that relays the 2026-07-28 multi-round-trip flow: an upstream asking
   * for input answers `{inputRequired}` instead of failing, and `continuation` carries a later round.
   */
  callToolInteractive(
    target: UpstreamTarget,
    name: string,
    args: Record<string, unknown> | undefined,
    opts: InteractiveCallOptions = {},
  ): Promise<InteractiveCallResult> {
    const { exchange } = this.options;
    // The upstream leg of a call's trace (tracing on); its context travels on as `traceparent`.
    return inSpan(
      `tools/call ${name}`,
      'client',
      () => ({
        'mcp.method.name': 'tools/call',
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': name,
        'server.address': hostOf(target.url),
      }),
      () =>
        this.run(
          target,
          this.options.callTimeoutMs,
          opts.signal,
          (client, deadline, connection, call) => {
            if (!exchange || !connection.directCalls || !canCallDirectly(name, opts, connection.era)) {
              // What the upstream sends meanwhile on this call's own stream (asks, log messages) goes to its agent.
              const relays = opts.ask || opts.onLog ? call : undefined;
              return traced(() =>
                withCallRelays(relays, () => callInteractiveTool(client, deadline, name, args, opts)),
              );
            }
            return this.callDirectly(exchange, connection, deadline, name, args, opts);
          },
          opts.ask !== undefined && opts.asksInRounds !== true,
          { relay: opts.ask, onLog: opts.onLog },
        ),
    );
  }

  /**
   * A `tools/call` sent by Gatehouse itself on the connection's session or envelope (`direct-call.ts`).
   * Not traced: a direct call reads its own answer, so the SDK gaps `traced` covers are not on its path.
   */
  private callDirectly(
    exchange: Exchange,
    connection: Connection,
    deadline: Deadline,
    name: string,
    args: Record<string, unknown> | undefined,
    opts: InteractiveCallOptions,
  ): Promise<InteractiveCallResult> {
    this.directCalls += 1;
    return connection.era === 'modern'
      ? callModernDirect(exchange, connection.directTarget, deadline, name, args, opts)
      : callLegacyDirect(exchange, connection.directTarget, connection.legacySession, deadline, name, args, opts);
  }

  /**
   * Runs `fn` on a connected client within `deadlineMs` (connect included). `fn` must pass `signal`
   * to every SDK request it makes. Like every operation, it may run a second time when the upstream
   * lost the session (or changed era) before answering; failures leave as catalogue errors.
   */
  withClient<T>(
    target: UpstreamTarget,
    deadlineMs: number,
    fn: (client: Client, signal: AbortSignal) => Promise<T>,
    opts: OperationOptions = {},
  ): Promise<T> {
    return this.run(target, deadlineMs, opts.signal, (client, deadline) => traced(() => fn(client, deadline.signal)));
  }

  /**
   * A connection of its own, outside the pool, that hears the upstream's list-changed notifications
   * (`list-watch.ts`) for as long as it lasts. `ended` settles when it failed or its subscription
   * ended; on a 2025-era session `ping` checks it (a session the upstream forgot fails it). Connect
   * errors leave as catalogue errors.
   */
  async watchLists(
    target: UpstreamTarget,
    onChanged: (list: ListKind) => void,
    signal: AbortSignal,
  ): Promise<ListWatchHandle> {
    if (this.closed) throw poolClosed();
    const timeoutMs = this.options.listTimeoutMs;
    let connection: Connection;
    try {
      connection = await this.connect(
        this.normalized(target),
        timeoutMs,
        AbortSignal.any([signal, this.lifetime.signal]),
      );
    } catch (error) {
      throw toUpstreamError(error);
    }
    this.watches.add(connection);
    const close = async () => {
      this.watches.delete(connection);
      await connection.close();
    };
    try {
      const watch = await traced(() => watchListChanges(connection.client, onChanged, { timeoutMs, signal }));
      return {
        // A session whose GET stream was given up hears no notification: the watch ends, to be made anew.
        ended: Promise.race([
          connection.retired,
          connection.streamAbandoned,
          ...(watch.ended ? [watch.ended] : []),
        ]).then(() => undefined),
        ...(connection.era === 'legacy' && {
          ping: () => traced(() => connection.client.ping({ timeout: timeoutMs, signal })).then(() => undefined),
        }),
        close: async () => {
          await watch.close().catch(() => {});
          await close();
        },
      };
    } catch (error) {
      await close();
      throw toUpstreamError(error);
    }
  }

  /**
   * A connected client of its own, outside the pool, for long-lived `subscriptions/listen` streams
   * (2026-07-28 resource subscriptions relayed by the hub): the pool's idle and recycle rules would cut
   * them. `ended` settles when the connection failed or closed. Connect errors leave as catalogue errors.
   */
  async openChannel(target: UpstreamTarget, signal: AbortSignal): Promise<UpstreamChannel> {
    if (this.closed) throw poolClosed();
    let connection: Connection;
    try {
      connection = await this.connect(
        this.normalized(target),
        this.options.listTimeoutMs,
        AbortSignal.any([signal, this.lifetime.signal]),
      );
    } catch (error) {
      throw toUpstreamError(error);
    }
    this.watches.add(connection);
    return {
      client: connection.client,
      ended: connection.retired,
      close: async () => {
        this.watches.delete(connection);
        await connection.close();
      },
    };
  }

  stats(): PoolStats {
    let open = this.watches.size;
    for (const { connection } of this.slots.values()) {
      if (connection && !connection.closed && !connection.broken) open += 1;
    }
    return { open, connecting: this.connecting, eraByUrl: this.eras.size, directCalls: this.directCalls };
  }

  /**
   * Ends the pooled connections of a server record that no longer wants them (removed, disabled, or its URL,
   * headers or network changed): every connection an operation of `owner` used, except those `keep` accepts.
   * Operations running on one finish first; the next connects anew. Answers how many were ended.
   */
  closeOwner(owner: string, keep: (target: NormalizedTarget) => boolean = () => false): number {
    let ended = 0;
    for (const slot of [...this.slots.values()]) {
      if (!slot.owners.has(owner) || keep(slot.target)) continue;
      this.retire(slot);
      ended += 1;
    }
    return ended;
  }

  /** Closes every connection (ending 2025-era sessions politely); later operations fail. */
  async close(): Promise<void> {
    this.closed = true;
    this.lifetime.abort(poolClosed());
    for (const abandon of this.freshConnects) abandon.abort(poolClosed());
    for (const slot of [...this.slots.values()]) this.retire(slot, true);
    for (const connection of this.watches) this.closeInBackground(connection);
    this.watches.clear();
    while (this.closing.size > 0) await Promise.all([...this.closing]);
  }

  /**
   * The target normalized (validated, its pool key hashed), once per target object: callers that call
   * the same upstream many times pass the same object (the hub's snapshot keeps one per server). A
   * target is not changed after it is handed to the pool.
   */
  private normalized(target: UpstreamTarget): NormalizedTarget {
    let normalized = this.normalizedTargets.get(target);
    if (!normalized) {
      normalized = normalizeTarget(target);
      this.normalizedTargets.set(target, normalized);
    }
    return normalized;
  }

  /**
   * The target a call that relays asks runs on: a 2025-era twin with a session of its own, so a dual-era
   * upstream (driven at 2026-07-28 otherwise) can ask at all, and asks the upstream sends on the session's
   * stream meet only asking calls (`asks.ts`). An upstream that refused the 2025 handshake keeps its target.
   */
  private askTarget(target: NormalizedTarget): NormalizedTarget {
    // An HTTP+SSE target speaks only the 2025 era already.
    if (this.modernOnly.has(target.url) || target.transport === 'sse') return target;
    let twin = this.askTwins.get(target);
    if (!twin) {
      twin = { ...target, key: `${target.key}#asks`, forAsks: true };
      this.askTwins.set(target, twin);
    }
    return twin;
  }

  /**
   * Runs `operation` on a pooled connection within the deadline; one that uses the SDK client runs itself `traced`.
   * It counts as a call in flight on the connection (`call`) whether it relays anything or not: an ask or log message
   * nothing ties to its request (HTTP+SSE's one stream, a 2025 session's stream) goes to the sole call in flight, so
   * one sent for a prompt, a list or a plain call must not find another agent's call alone there.
   */
  private async run<T>(
    rawTarget: UpstreamTarget,
    ms: number,
    callerSignal: AbortSignal | Cancellation | undefined,
    operation: (client: Client, deadline: Deadline, connection: Connection, call: AskingCall) => Promise<T>,
    /** The caller relays asks: a dual-era upstream is driven at 2025 (`forAsks`), so it can ask. */
    asks = false,
    /** What the operation relays of what the upstream sends meanwhile (`asks.ts`); nothing unless given. */
    relays: Omit<AskingCall, 'deadline'> = {},
  ): Promise<T> {
    if (this.closed) throw poolClosed();
    const normal = this.normalized(rawTarget);
    const target = asks ? this.askTarget(normal) : normal;
    const deadline = new Deadline(ms, callerSignal);
    const call: AskingCall = { ...relays, deadline };
    try {
      for (let attempt = 0; ; attempt++) {
        if (deadline.expired) throw deadline.error();
        let lease: Lease | undefined;
        try {
          lease = await this.acquire(target, deadline);
          const { connection } = lease;
          return await deadline.race(
            connection.inFlight(call, () => operation(connection.client, deadline, connection, call)),
          );
        } catch (error) {
          // The SDK's own timeout (set to what was left of ours) may fire a hair before ours.
          if (deadline.expired || isSdkTimeout(error)) {
            // An HTTP+SSE request whose POST the upstream never answered holds a socket until its connection
            // closes (`sse-transport.ts`): retire the connection, which closes once its other operations end.
            if (lease && awaitingPost(lease.connection)) this.discard(lease);
            throw deadline.error(error);
          }
          if (!lease) throw error;
          const sessionLost = isSessionLost(error, lease.connection.sessionId);
          // The era this connection speaks no longer fits the server (it was replaced by the other era).
          const staleEra = !sessionLost && isEraMismatch(error);
          if (staleEra) this.eras.forget(target.url);
          if (sessionLost || staleEra || !keepsConnection(error)) this.discard(lease);
          if (attempt === 0 && (sessionLost || staleEra)) {
            this.logger.warn(
              { upstream: originOf(target), reason: sessionLost ? 'session_lost' : 'era_changed' },
              'upstream reconnect and retry',
            );
            continue;
          }
          throw error;
        } finally {
          if (lease) this.release(lease);
        }
      }
    } catch (error) {
      throw deadline.expired ? deadline.error(error) : toUpstreamError(error);
    } finally {
      deadline.dispose();
    }
  }

  /** A connected client for `target`: the pooled one (connecting it if needed), or a fresh one. */
  private async acquire(target: NormalizedTarget, deadline: Deadline): Promise<Lease> {
    if (this.options.sessionMode === 'fresh') {
      // Its own controller, aborted by the deadline or by close(): no composite signal hangs off
      // the pool's long-lived one (AbortSignal.any retains its composites on Node 20).
      const abandon = new AbortController();
      const onDeadline = () => abandon.abort(deadline.signal.reason);
      deadline.signal.addEventListener('abort', onDeadline, { once: true });
      this.freshConnects.add(abandon);
      const connecting = this.connect(target, deadline.remaining(), abandon.signal);
      try {
        return { connection: await deadline.race(connecting) };
      } catch (error) {
        // The deadline may win the race a moment after the connect succeeded: close what it produced.
        connecting.then(
          (late) => this.closeInBackground(late),
          () => {},
        );
        throw error;
      } finally {
        deadline.signal.removeEventListener('abort', onDeadline);
        this.freshConnects.delete(abandon);
      }
    }
    let slot = this.slots.get(target.key);
    if (slot && (slot.connection?.broken || slot.connection?.closed)) {
      this.retire(slot);
      slot = undefined;
    }
    if (slot) {
      if (target.owner !== undefined) slot.owners.add(target.owner);
      // Map order is the LRU order.
      this.slots.delete(slot.key);
      this.slots.set(slot.key, slot);
    } else {
      slot = this.openSlot(target, deadline.ms);
    }
    // The idle timer keeps running; when it fires on a slot in use it does nothing.
    slot.users += 1;
    // Connected already (the steady state): nothing to wait for, so no race with the deadline.
    const ready = slot.connection;
    if (ready && !ready.broken && !ready.closed) return { connection: ready, slot };
    try {
      return { connection: await deadline.race(slot.pending), slot };
    } catch (error) {
      this.unuse(slot);
      throw error;
    }
  }

  /**
   * Starts a pooled connect. It is shared by every caller that arrives meanwhile and runs on the
   * pool's lifetime, not on the first caller's deadline: one caller giving up must not fail the others.
   */
  private openSlot(target: NormalizedTarget, timeoutMs: number): Slot {
    const slot: Slot = {
      key: target.key,
      target,
      owners: new Set(target.owner === undefined ? [] : [target.owner]),
      pending: this.connect(target, timeoutMs, this.lifetime.signal),
      users: 0,
      retired: false,
    };
    slot.pending.then(
      (connection) => {
        slot.connection = connection;
        if (slot.retired && slot.users === 0) this.closeInBackground(connection);
      },
      () => {
        slot.retired = true;
        if (this.slots.get(slot.key) === slot) this.slots.delete(slot.key);
      },
    );
    this.slots.set(slot.key, slot);
    for (const oldest of this.slots.values()) {
      if (this.slots.size <= this.options.poolMaxSize) break;
      if (oldest !== slot) this.retire(oldest);
    }
    return slot;
  }

  /** Connects with the remembered era; if that verdict no longer works, forgets it and negotiates once. */
  private async connect(target: NormalizedTarget, timeoutMs: number, signal: AbortSignal): Promise<Connection> {
    const startedAt = Date.now();
    const open = async (prior: PriorDiscovery | undefined): Promise<Connection> => {
      const remaining = Math.max(1, timeoutMs - (Date.now() - startedAt));
      const { fetch } = this.options;
      const connection = await Connection.open({
        target,
        fetch,
        prior,
        timeoutMs: remaining,
        signal,
        logger: this.logger,
        // A 2025-era connection declares the asks it relays; an unknown era is negotiated declaring them.
        declareAsks: prior?.kind !== 'modern',
      });
      if (!prior) {
        const verdict = connection.verdict();
        if (!target.forAsks) this.eras.remember(target.url, target.key, verdict);
        if (verdict.kind === 'modern') {
          // Negotiated modern: reopened from its verdict (no round trip) without them, or every
          // request's envelope would claim input no agent declared.
          await connection.close();
          return open(verdict);
        }
      }
      this.logger.debug({ upstream: originOf(target), era: connection.era, remembered: !!prior }, 'upstream connected');
      return connection;
    };
    // An HTTP+SSE target has one era (`Connection.open`), and a 2025-era twin connects at 2025: nothing to
    // remember or renegotiate.
    const prior = target.transport === 'sse' || target.forAsks ? LEGACY : this.eras.get(target.url, target.key);
    this.connecting += 1;
    try {
      return await open(prior);
    } catch (error) {
      if (!prior || signal.aborted || !isEraMismatch(error)) throw error;
      if (target.forAsks) {
        // Modern only after all: this call runs at 2026-07-28, and later asking calls on the usual target.
        if (this.modernOnly.size >= MAX_MODERN_ONLY) this.modernOnly.clear();
        this.modernOnly.add(target.url);
        return await open(undefined);
      }
      this.eras.forget(target.url);
      this.logger.warn({ upstream: originOf(target), reason: 'era_changed' }, 'upstream era renegotiated');
      return await open(undefined);
    } finally {
      this.connecting -= 1;
    }
  }

  private release(lease: Lease): void {
    const { connection, slot } = lease;
    if (!slot) {
      this.closeInBackground(connection);
      return;
    }
    // Each modern request leaves a dead entry on the transport's long-lived AbortSignal (the SDK
    // combines it with a per-request signal; Node 20's AbortSignal.any never prunes those), so a
    // modern connection is replaced now and then. Reconnecting costs no round trip (remembered era).
    connection.operations += 1;
    if (connection.era === 'modern' && connection.operations >= MODERN_RECYCLE_AFTER) this.retire(slot);
    this.unuse(slot);
  }

  private unuse(slot: Slot): void {
    slot.users -= 1;
    if (slot.users > 0) return;
    if (slot.retired) {
      if (slot.connection) this.closeInBackground(slot.connection);
      return;
    }
    if (slot.idleTimer) slot.idleTimer.refresh();
    else {
      slot.idleTimer = setTimeout(() => {
        if (slot.users === 0) this.retire(slot);
      }, this.options.poolIdleMs);
      slot.idleTimer.unref();
    }
  }

  /** Drops the connection an operation failed on, so the next operation connects anew. */
  private discard(lease: Lease): void {
    if (lease.slot) this.retire(lease.slot);
    lease.connection.broken = true;
  }

  /** Takes a slot out of the pool; its connection closes now if unused, else when its last user leaves. */
  private retire(slot: Slot, force = false): void {
    if (this.slots.get(slot.key) === slot) this.slots.delete(slot.key);
    slot.retired = true;
    clearTimeout(slot.idleTimer);
    if (slot.connection && (slot.users === 0 || force)) this.closeInBackground(slot.connection);
  }

  private closeInBackground(connection: Connection): void {
    const closing = connection.close().finally(() => this.closing.delete(closing));
    this.closing.add(closing);
  }
}

const originOf = (target: NormalizedTarget) => new URL(target.url).origin;

const poolClosed = () =>
  new GatehouseError('upstream_unreachable', 'The upstream pool is closed.', { reason: 'pool_closed' });

const awaitingPost = (connection: Connection) =>
  connection.transport instanceof BoundedSseTransport && connection.transport.awaitingPost;

function isSdkTimeout(error: unknown): boolean {
  return !findGatehouseError(error) && error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout;
}

/** The host of an upstream URL, for span attributes. */
function hostOf(url: string | URL): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}
