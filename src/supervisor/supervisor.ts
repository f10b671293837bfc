/**
 * The stdio supervisor: one long-lived child process, and ONE connected MCP client multiplexing every
 * call over its pipes, per stdio server record.
 *
 * Lifecycle (`state`): `stopped` → `starting` → `running` → `stopping` → `stopped`; a child that ends
 * without being asked to is `crashed`, then `backoff` until its restart (delay `restartBaseMs`,
 * doubled per crash in a row, at most 60 s); after `maxRestarts` crashes in a row it is left `stopped`
 * and the record gets `status: failed` and `lastError`. A child that ran for a minute before it
 * crashed starts the count afresh.
 *
 * - At boot every enabled stdio server starts unless it has `lazyStart`; installing a server does
 *   not start it (start it, or let `lazyStart` start it on its first call).
 * - A hub call to a running server goes straight to its client. To a `starting` one it waits for the
 *   start. To a stopped one with `lazyStart` (or one stopped for idleness) it starts it and waits,
 *   all within the call's deadline; otherwise it fails with `upstream_unreachable`, reason
 *   `stdio_stopped` (or `stdio_restarting` while in backoff), saying how to start it.
 * - `idleShutdownS`: a server with no call for that long is stopped; its next call starts it again.
 * - A record change that alters command, args or env restarts a running server; disabling or
 *   uninstalling stops it; enabling starts it (unless `lazyStart`).
 * - At most `stdio.maxRunning` children (hot setting) run at once in this gateway process: a start
 *   beyond it fails with `stdio.max_running`.
 * - Children are spawned only by the stdio spawner (own process group, minimal env, bounded pipes);
 *   each record's protocol era is remembered on the record and reused. The pid file records every
 *   live child so a crashed gateway's orphans are reaped at the next start.
 */
import { createHash } from 'node:crypto';
import type { Client, PriorDiscovery } from '@modelcontextprotocol/client';
import type { EventHub } from '../audit/stream.js';
import { GatehouseError, isGatehouseError } from '../errors.js';
import type { Logger } from '../logging.js';
import { redactor, rememberedEra } from '../registry/handshake.js';
import type { ServerOptions, ServerStore } from '../registry/records.js';
import type { StdioState } from '../registry/state.js';
import type { SettingsService } from '../settings/service.js';
import { parseJson } from '../store/json.js';
import type { ServerTable } from '../store/schema.js';
import { Deadline } from '../upstream/deadline.js';
import { callInteractiveTool } from '../upstream/operations.js';
import { connectStdio, type ExitInfo, type StdioChild, stdioError } from '../upstream/stdio/index.js';
import type { InteractiveCallOptions, InteractiveCallResult } from '../upstream/types.js';
import { PidFile } from './pidfile.js';

/** A crash after this long running does not count towards the cap (the count starts afresh). */
const STABLE_AFTER_MS = 60_000;
const MAX_BACKOFF_MS = 60_000;

export interface SupervisorOptions {
  records: ServerStore;
  settings: SettingsService;
  events: EventHub;
  logger: Logger;
  dataDir: string;
  /** A server event (`logs` route); `process` events come from here. */
  serverEvent(id: string, kind: string, message: string, data?: Record<string, unknown>): Promise<void>;
  /**
   * After every start (boot, operator, lazy, restart after a crash): the registry's handshake over the
   * new connection, so the tools are listed, pinned on the first one and compared with the pins after
   * (a restarted `npx` may have fetched another version). The start routes wait for it; calls do not.
   */
  onStarted?(id: string): Promise<unknown>;
  /** A child's stderr line or stray stdout line, already redacted (the sink rate-limits). */
  onOutput(id: string, kind: 'stderr' | 'stdout', line: string): void;
  graceMs: number;
  maxLineBytes: number;
  restartBaseMs: number;
  maxRestarts: number;
  /** Deadline of a start (spawn + MCP connect). */
  connectTimeoutMs: number;
  callTimeoutMs: number;
}

/** What the process routes answer. */
export interface ProcessView {
  id: string;
  state: StdioState;
  pid: number | null;
  startedAt: string | null;
  /** Crashes in a row (reset by an operator's start or a stable run). */
  crashes: number;
  lastError: string | null;
  /** When the next restart is due, in `backoff`. */
  restartAt: string | null;
}

interface Live {
  client: Client;
  child: StdioChild;
  fingerprint: string;
}

/** Identity of what a child was started from, to tell whether a record change needs a restart. Never stored. */
function fingerprintOf(command: string, args: string[], env: Record<string, string>): string {
  const sortedEnv = Object.keys(env)
    .sort()
    .map((k) => [k, env[k]]);
  return createHash('sha256')
    .update(JSON.stringify([command, args, sortedEnv]))
    .digest('hex');
}

function optionsOf(row: ServerTable): ServerOptions {
  return parseJson<ServerOptions>(row.options, {});
}

function stoppedError(id: string): GatehouseError {
  return new GatehouseError(
    'upstream_unreachable',
    `The stdio server "${id}" is stopped. Start it with POST /api/mcp/servers/${id}/start (admin tool mcp_server_start), or set lazyStart in its config so a call starts it.`,
    { reason: 'stdio_stopped' },
  );
}

class ServerProcess {
  state: StdioState = 'stopped';
  live: Live | undefined;
  crashes = 0;
  lastError: string | undefined;
  restartAt: number | undefined;
  /** Stopped by idle shutdown: the next call starts it again. */
  idleStopped = false;
  /** Whether the record was enabled when last seen (an enable starts it). */
  enabled: boolean | undefined;
  /** Stopped through the stop route: only an operator (or a call with lazyStart) starts it again. */
  stoppedByOperator = false;
  /** The handshake after the last start. */
  handshake: Promise<unknown> = Promise.resolve();
  private starting: Promise<Live> | undefined;
  private startAbort: AbortController | undefined;
  private backoffTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private idleShutdownS: number | null = null;
  private inflight = 0;
  /** Bumped by every stop: a start that finishes after it stops its own child. */
  private generation = 0;
  private stopping: Promise<void> | undefined;

  constructor(
    readonly id: string,
    private readonly sup: StdioSupervisor,
  ) {}

  /** The state now: a `running` child that is already ending (it exited, or a bound ended it) is `crashed`. */
  get current(): StdioState {
    return this.state === 'running' && this.live && !this.live.child.running ? 'crashed' : this.state;
  }

  view(): ProcessView {
    const child = this.live?.child;
    return {
      id: this.id,
      state: this.current,
      pid: child?.pid ?? null,
      startedAt: child?.startedAt.toISOString() ?? null,
      crashes: this.crashes,
      lastError: this.lastError ?? null,
      restartAt: this.state === 'backoff' && this.restartAt ? new Date(this.restartAt).toISOString() : null,
    };
  }

  /** Starts the child (or joins the start in flight); resolves when it is connected. */
  start(): Promise<Live> {
    if (this.live?.child.running) return Promise.resolve(this.live);
    if (this.starting) return this.starting;
    const dying = this.live;
    if (dying) {
      // It is ending (exited, or a bound ended it): let its exit be recorded, then start afresh.
      return dying.child.exited
        .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
        .then(() => this.start());
    }
    this.clearBackoff();
    const starting = this.spawn().finally(() => {
      if (this.starting === starting) this.starting = undefined;
    });
    this.starting = starting;
    return starting;
  }

  private async spawn(): Promise<Live> {
    const generation = this.generation;
    const max = await this.sup.maxRunning();
    if (generation !== this.generation) throw stoppedError(this.id);
    this.sup.reserve(this.id, max);
    const abort = new AbortController();
    this.startAbort = abort;
    this.setState('starting');
    let live: Live;
    try {
      const row = await this.sup.options.records.getRow(this.id);
      if (row.transport !== 'stdio') throw notStdio(this.id);
      if (row.enabled !== 1) throw disabled(this.id);
      this.idleShutdownS = optionsOf(row).idleShutdownS ?? null;
      const connection = this.sup.options.records.connectionOf(row);
      if (connection.transport !== 'stdio') throw notStdio(this.id);
      if (generation !== this.generation) throw stoppedError(this.id);
      const redact = redactor(Object.values(connection.env));
      const era = rememberedEra(row);
      const onExit = (info: ExitInfo) => {
        // `live` is set before any exit can be observed by the caller of connectStdio.
        queueMicrotask(() => this.exited(info));
      };
      const connected = await connectStdio(
        {
          command: connection.command,
          args: connection.args,
          env: connection.env,
          label: this.id,
          maxLineBytes: this.sup.options.maxLineBytes,
          graceMs: this.sup.options.graceMs,
          onStderrLine: (line) => this.sup.options.onOutput(this.id, 'stderr', redact(line)),
          onNoiseLine: (line) => this.sup.options.onOutput(this.id, 'stdout', redact(line)),
          onExit,
          onSpawn: (child) => this.sup.track(child),
        },
        {
          timeoutMs: this.sup.options.connectTimeoutMs,
          signal: abort.signal,
          ...(era ? { era } : {}),
          onError: (error) => this.sup.options.logger.debug({ server: this.id, err: error }, 'stdio client error'),
        },
      );
      live = {
        client: connected.client,
        child: connected.child,
        fingerprint: fingerprintOf(connection.command, connection.args, connection.env),
      };
      if (generation !== this.generation) {
        // Stopped while starting: this child is not wanted.
        await this.end(live);
        throw stoppedError(this.id);
      }
      this.live = live;
      void this.sup.rememberEra(row, connected.era);
    } catch (error) {
      if (this.startAbort === abort) this.startAbort = undefined;
      if (!this.live?.child.running) this.sup.release(this.id);
      if (generation !== this.generation) throw isGatehouseError(error) ? error : stoppedError(this.id);
      const failure = stdioError(error);
      if (failure.code === 'mcp.not_found' || failure.code === 'stdio.not_stdio' || failure.code === 'stdio.disabled') {
        this.setState('stopped');
        throw failure;
      }
      this.crashed(`Start failed: ${failure.message}`);
      throw failure;
    }
    this.startAbort = undefined;
    this.idleStopped = false;
    this.setState('running', { pid: live.child.pid });
    this.sup.note(this.id, 'process', `Started (pid ${live.child.pid}).`, {
      state: 'running',
      pid: live.child.pid,
    });
    this.scheduleIdle();
    this.handshake = (this.sup.options.onStarted?.(this.id) ?? Promise.resolve()).catch(() => {});
    if (!live.child.running) queueMicrotask(() => live.child.exitInfo && this.exited(live.child.exitInfo));
    return live;
  }

  /** The child ended; unless it was asked to, that is a crash. */
  private exited(info: ExitInfo): void {
    const live = this.live;
    if (!live || live.child.pid !== info.pid) return; // a stopped or discarded child
    this.live = undefined;
    this.sup.release(this.id);
    this.clearIdle();
    if (info.endedAt.getTime() - info.startedAt.getTime() >= STABLE_AFTER_MS) this.crashes = 0;
    const how =
      info.lastError ??
      (info.signal !== null ? `was killed by ${info.signal}` : `exited with code ${info.code ?? 'unknown'}`);
    this.crashed(how.startsWith('The stdio server') ? how : `The stdio server "${this.id}" ${how}.`);
  }

  /** A crash or a failed start: back off and restart, or give up after `maxRestarts` in a row. */
  private crashed(message: string): void {
    this.crashes += 1;
    this.lastError = message;
    const { maxRestarts, restartBaseMs } = this.sup.options;
    this.setState('crashed');
    if (this.crashes > maxRestarts) {
      this.setState('stopped');
      this.sup.background(this.sup.failed(this.id, message, this.crashes));
      return;
    }
    const delay = Math.min(restartBaseMs * 2 ** (this.crashes - 1), MAX_BACKOFF_MS);
    this.restartAt = Date.now() + delay;
    this.sup.note(this.id, 'process', `${message} Restarting in ${delay} ms.`, {
      state: 'backoff',
      crashes: this.crashes,
      delayMs: delay,
    });
    this.setState('backoff');
    const generation = this.generation;
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = undefined;
      if (generation !== this.generation || this.sup.closed) return;
      this.start().catch(() => {
        // A failed restart is counted as a crash in `spawn`; a refused one (cap reached) here.
      });
    }, delay);
    this.backoffTimer.unref();
  }

  /** Stops the child (its whole group), or a start in flight, or a pending restart. */
  async stop(graceMs: number = this.sup.options.graceMs): Promise<void> {
    this.generation += 1;
    this.clearBackoff();
    this.clearIdle();
    this.startAbort?.abort();
    const starting = this.starting;
    const live = this.live;
    this.live = undefined;
    if (live || starting) {
      this.setState('stopping');
      const ending = (async () => {
        if (live) await this.end(live, graceMs);
        await starting?.catch(() => {});
      })();
      this.stopping = ending;
      await ending;
      if (this.stopping === ending) this.stopping = undefined;
    } else if (this.stopping) {
      await this.stopping;
    }
    if (!this.live && !this.starting) this.setState('stopped');
  }

  private async end(live: Live, graceMs: number = this.sup.options.graceMs): Promise<void> {
    const info = await live.child.stop(graceMs);
    await live.client.close().catch(() => {});
    this.sup.release(this.id);
    this.sup.note(
      this.id,
      'process',
      `Stopped (pid ${info.pid}${info.killed ? ', SIGKILL after the grace period' : ''}).`,
      { state: 'stopped', pid: info.pid, killed: info.killed },
    );
  }

  /** Runs `fn` on the connected client within `deadline`, starting the child first when that is allowed. */
  async use<T>(deadline: Deadline, fn: (client: Client, deadline: Deadline) => Promise<T>): Promise<T> {
    const live = await this.ready(deadline);
    this.inflight += 1;
    this.clearIdle();
    try {
      return await deadline.race(fn(live.client, deadline));
    } catch (error) {
      if (deadline.expired) throw deadline.error(error);
      throw stdioError(error, live.child);
    } finally {
      this.inflight -= 1;
      this.scheduleIdle();
    }
  }

  private async ready(deadline: Deadline): Promise<Live> {
    if (this.live?.child.running) return this.live;
    if (this.starting) return deadline.race(this.starting);
    if (this.live) {
      throw new GatehouseError(
        'upstream_unreachable',
        `The stdio server "${this.id}" is ending and will be restarted: ${this.live.child.lastError ?? 'it exited'}`,
        { reason: 'stdio_restarting' },
      );
    }
    if (this.state === 'backoff' || this.state === 'crashed') {
      const due = this.restartAt ? Math.max(0, this.restartAt - Date.now()) : 0;
      throw new GatehouseError(
        'upstream_unreachable',
        `The stdio server "${this.id}" crashed and restarts in ${due} ms. Last error: ${this.lastError ?? 'unknown'}`,
        { reason: 'stdio_restarting', restartInMs: due },
      );
    }
    if (this.state === 'stopping') throw stoppedError(this.id);
    let lazy = this.idleStopped;
    if (!lazy) {
      const row = await this.sup.options.records.getRow(this.id);
      lazy = optionsOf(row).lazyStart === true && row.enabled === 1;
    }
    if (!lazy) throw stoppedError(this.id);
    return deadline.race(this.start());
  }

  /** A record change: restart on a new command/args/env, stop when disabled, start when enabled. */
  async reconcile(row: ServerTable): Promise<void> {
    const options = optionsOf(row);
    this.idleShutdownS = options.idleShutdownS ?? null;
    const wasEnabled = this.enabled;
    this.enabled = row.enabled === 1;
    if (!this.enabled) {
      if (this.state !== 'stopped') {
        await this.stop();
        this.sup.note(this.id, 'process', 'Stopped: the server was disabled.', {
          state: 'stopped',
        });
      }
      return;
    }
    if (wasEnabled === false && this.state === 'stopped' && !options.lazyStart) {
      this.crashes = 0;
      await this.start().catch(() => {});
      return;
    }
    const live = this.live;
    if (!live) {
      this.scheduleIdle();
      return;
    }
    const connection = this.sup.options.records.connectionOf(row);
    if (connection.transport !== 'stdio') {
      await this.stop();
      return;
    }
    if (fingerprintOf(connection.command, connection.args, connection.env) !== live.fingerprint) {
      await this.stop();
      this.sup.note(this.id, 'process', 'Restarting: its command, args or env changed.', {
        state: 'starting',
      });
      this.crashes = 0;
      await this.start().catch(() => {});
    } else this.scheduleIdle();
  }

  private scheduleIdle(): void {
    this.clearIdle();
    const seconds = this.idleShutdownS;
    if (!seconds || seconds <= 0 || this.inflight > 0 || !this.live) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.inflight > 0 || !this.live) return;
      void this.stop().then(() => {
        this.idleStopped = true;
        this.sup.note(this.id, 'process', `Stopped after ${seconds} s without a call.`, {
          state: 'stopped',
          idle: true,
        });
      });
    }, seconds * 1000);
    this.idleTimer.unref();
  }

  private clearIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  private clearBackoff(): void {
    if (this.backoffTimer) clearTimeout(this.backoffTimer);
    this.backoffTimer = undefined;
    this.restartAt = undefined;
  }

  private setState(state: StdioState, extra: Record<string, unknown> = {}): void {
    if (this.state === state) return;
    this.state = state;
    void this.sup.options.events.publish('server.state', { id: this.id, state, ...extra }).catch(() => {});
  }

  /** For `start()` by an operator: a fresh count of crashes. */
  resetCrashes(): void {
    this.crashes = 0;
    this.idleStopped = false;
    this.stoppedByOperator = false;
  }
}

function notStdio(id: string): GatehouseError {
  return new GatehouseError('stdio.not_stdio', `The server "${id}" is not a stdio server; it has no process.`, { id });
}

function disabled(id: string): GatehouseError {
  return new GatehouseError('stdio.disabled', `The server "${id}" is disabled; enable it before starting it.`, { id });
}

export class StdioSupervisor {
  closed = false;
  private readonly processes = new Map<string, ServerProcess>();
  /** Servers with a child starting or alive (what `stdio.maxRunning` counts). */
  private readonly active = new Set<string>();
  private readonly pidFile: PidFile;
  private unsubscribe: (() => void) | undefined;
  private readonly reconciling = new Map<string, Promise<void>>();
  private readonly writes = new Set<Promise<void>>();
  /** Every child this supervisor spawned whose group is not known to be reaped. */
  private readonly children = new Set<StdioChild>();

  constructor(readonly options: SupervisorOptions) {
    this.pidFile = new PidFile(options.dataDir);
  }

  /**
   * Reaps what a crashed gateway left (pid files of dead gateway processes), starts every enabled stdio
   * server without `lazyStart` (in the background), and follows record changes from now on.
   */
  async boot(): Promise<void> {
    const reports = await this.pidFile.reapOrphans(this.options.graceMs);
    for (const report of reports) {
      if (report.result.found === 0) continue;
      this.options.logger.warn(
        { server: report.label, pid: report.pid, ownerPid: report.ownerPid, ...report.result },
        'reaped a stdio server orphaned by a previous gateway process',
      );
      void this.options
        .serverEvent(report.label, 'process', `Reaped an orphaned process (pid ${report.pid}) of a previous gateway.`, {
          pid: report.pid,
          killed: report.result.killed,
        })
        .catch(() => {});
    }
    this.unsubscribe = this.options.events.subscribe((event) => {
      if (event.type !== 'server.changed') return;
      const id = String(event.data.id ?? '');
      if (id) this.onRecordChanged(id, String(event.data.change ?? ''));
    });
    await this.startEnabled();
  }

  /**
   * Starts (in the background) every enabled stdio server without `lazyStart` that is stopped and was
   * not stopped by an operator: at boot, and after a declarative config was applied at start.
   */
  async startEnabled(): Promise<void> {
    for (const row of await this.options.records.all()) {
      if (row.transport !== 'stdio') continue;
      const proc = this.process(row.id);
      proc.enabled = row.enabled;
      if (row.enabled && !row.lazyStart && proc.state === 'stopped' && !proc.stoppedByOperator) {
        proc.start().catch((error) => {
          this.options.logger.warn({ server: row.id, err: error }, 'a stdio server did not start at boot');
        });
      }
    }
  }

  stateOf(id: string): StdioState {
    return this.processes.get(id)?.current ?? 'stopped';
  }

  view(id: string): ProcessView {
    return this.processes.get(id)?.view() ?? new ServerProcess(id, this).view();
  }

  /** The process view of an installed stdio server (404 / 409 otherwise). */
  async describe(id: string): Promise<ProcessView> {
    await this.checkStdio(id);
    return this.view(id);
  }

  /** `POST …/start`: starts a stopped server (a fresh count of crashes) and waits until it is running. */
  async start(id: string): Promise<ProcessView> {
    await this.checkStdio(id);
    const proc = this.process(id);
    proc.resetCrashes();
    await proc.start();
    await proc.handshake;
    return proc.view();
  }

  async stop(id: string): Promise<ProcessView> {
    await this.checkStdio(id);
    const proc = this.process(id);
    proc.stoppedByOperator = true;
    await proc.stop();
    return proc.view();
  }

  async restart(id: string): Promise<ProcessView> {
    await this.checkStdio(id);
    const proc = this.process(id);
    await proc.stop();
    proc.resetCrashes();
    await proc.start();
    await proc.handshake;
    return proc.view();
  }

  /** Runs `fn` on the server's one connected client within `deadlineMs` (lazy start included). */
  async withClient<T>(
    id: string,
    deadlineMs: number,
    fn: (client: Client, signal: AbortSignal) => Promise<T>,
    opts: { signal?: AbortSignal | undefined } = {},
  ): Promise<T> {
    const deadline = new Deadline(deadlineMs, opts.signal);
    try {
      return await this.process(id).use(deadline, (client, d) => fn(client, d.signal));
    } finally {
      deadline.dispose();
    }
  }

  /** Calls one tool within the call timeout; the result is bounded and `isError: true` is a normal result. */
  async callTool(
    id: string,
    name: string,
    args: Record<string, unknown> | undefined,
    opts: InteractiveCallOptions = {},
  ): Promise<InteractiveCallResult> {
    const deadline = new Deadline(this.options.callTimeoutMs, opts.signal);
    try {
      // The hub relays 2026-07-28 input requests (elicitation, sampling) to the agent, as for HTTP upstreams.
      return await this.process(id).use(deadline, (client, d) => callInteractiveTool(client, d, name, args, opts));
    } finally {
      deadline.dispose();
    }
  }

  /** The running server's client for `fn`, or undefined when it is not running (the caller spawns its own). */
  ifRunning<T>(
    id: string,
    deadlineMs: number,
    fn: (client: Client, signal: AbortSignal, era: PriorDiscovery) => Promise<T>,
  ): Promise<T> | undefined {
    const live = this.processes.get(id)?.live;
    if (!live?.child.running) return undefined;
    const client = live.client;
    const discover = client.getDiscoverResult();
    const era: PriorDiscovery =
      client.getProtocolEra() === 'modern' && discover ? { kind: 'modern', discover } : { kind: 'legacy' };
    return this.withClient(id, deadlineMs, (c, signal) => fn(c, signal, era));
  }

  /** Stops every child (each group SIGTERM, SIGKILL after the grace) and removes the pid file. */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    await Promise.all([...this.reconciling.values()]);
    await Promise.all([...this.processes.values()].map((p) => p.handshake));
    await Promise.all([...this.processes.values()].map((p) => p.stop()));
    this.persist();
    while (this.writes.size > 0) await Promise.all([...this.writes]);
  }

  // ---- for ServerProcess ----

  async maxRunning(): Promise<number> {
    return (await this.options.settings.current())['stdio.maxRunning'];
  }

  reserve(id: string, max: number): void {
    if (this.closed) {
      throw new GatehouseError('upstream_unreachable', 'The gateway is shutting down.', { reason: 'shutting_down' });
    }
    if (this.active.has(id)) return;
    if (this.active.size >= max) {
      throw new GatehouseError(
        'stdio.max_running',
        `${this.active.size} stdio servers are running, the most the setting stdio.maxRunning (${max}) allows; stop one or raise the setting.`,
        { maxRunning: max, running: this.active.size },
      );
    }
    this.active.add(id);
  }

  release(id: string): void {
    if (!this.processes.get(id)?.live?.child.running) this.active.delete(id);
  }

  /** A `process` event on the server's log; written in the background, awaited by `close()`. */
  note(id: string, kind: string, message: string, data?: Record<string, unknown>): void {
    this.background(
      this.options.serverEvent(id, kind, message, data).catch(() => {
        // Uninstalled meanwhile: its events went with it.
      }),
    );
  }

  /** Store work in the background that `close()` waits for. */
  background(write: Promise<void>): void {
    this.writes.add(write);
    void write.finally(() => this.writes.delete(write));
  }

  /** Records a child in the pid file from the moment it exists until its group is reaped. */
  track(child: StdioChild): void {
    this.children.add(child);
    this.persist();
    void child.exited.then((info) => {
      if (info.survivors === 0) this.children.delete(child);
      this.persist();
    });
  }

  private persist(): void {
    try {
      this.pidFile.write([...this.children]);
    } catch (error) {
      this.options.logger.warn({ err: error }, 'could not write the stdio pid file');
    }
  }

  async rememberEra(row: ServerTable, era: PriorDiscovery): Promise<void> {
    const discover = era.kind === 'modern' ? JSON.stringify(era.discover) : null;
    if (row.protocol_era === era.kind && (era.kind === 'legacy' || row.discover === discover)) return;
    await this.options.records
      .update(row.id, (r) => {
        r.protocol_era = era.kind;
        r.discover = discover;
      })
      .catch(() => {});
  }

  /** The crash cap was reached: the record is `failed` with the last error. */
  async failed(id: string, message: string, crashes: number): Promise<void> {
    const lastError = `${message} Gave up after ${crashes} crashes in a row.`;
    try {
      await this.options.records.update(id, (r) => {
        r.status = 'failed';
        r.last_error = lastError;
      });
      await this.options.serverEvent(id, 'process', lastError, { state: 'stopped', crashes });
      await this.options.events.publish('server.status', { id, status: 'failed', lastError });
    } catch {
      // Uninstalled meanwhile.
    }
  }

  private process(id: string): ServerProcess {
    let proc = this.processes.get(id);
    if (!proc) {
      proc = new ServerProcess(id, this);
      this.processes.set(id, proc);
    }
    return proc;
  }

  private async checkStdio(id: string): Promise<void> {
    const row = await this.options.records.getRow(id);
    if (row.transport !== 'stdio') throw notStdio(id);
  }

  private onRecordChanged(id: string, change: string): void {
    if (this.closed) return;
    const previous = this.reconciling.get(id) ?? Promise.resolve();
    const next = previous
      .then(async () => {
        if (this.closed) return;
        if (change === 'uninstalled') {
          const proc = this.processes.get(id);
          if (proc) {
            await proc.stop();
            this.processes.delete(id);
          }
          return;
        }
        let row: ServerTable;
        try {
          row = await this.options.records.getRow(id);
        } catch {
          return;
        }
        if (row.transport !== 'stdio') return;
        await this.process(id).reconcile(row);
      })
      .catch((error) => this.options.logger.warn({ server: id, err: error }, 'stdio reconcile failed'))
      .finally(() => {
        if (this.reconciling.get(id) === next) this.reconciling.delete(id);
      });
    this.reconciling.set(id, next);
  }
}
