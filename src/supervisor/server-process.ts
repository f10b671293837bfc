/**
 * One supervised stdio server: its child process and connected client (`Live`), its lifecycle state,
 * crash backoff, idle shutdown and reconciliation with its record. The supervisor (`supervisor.ts`)
 * owns the set of them, the cap on running children and the pid file.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@modelcontextprotocol/client';
import { GatehouseError, isGatehouseError } from '../errors.js';
import { rememberedEra } from '../registry/handshake.js';
import type { ServerOptions } from '../registry/records.js';
import type { StdioState } from '../registry/state.js';
import { parseJson } from '../store/json.js';
import type { ServerTable } from '../store/schema.js';
import type { Deadline } from '../upstream/deadline.js';
import { watchListChanges } from '../upstream/list-watch.js';
import { connectStdio, type ExitInfo, type StdioChild, stdioError } from '../upstream/stdio/index.js';
import {
  errorTextOf,
  NETWORK_OFF_HINT,
  networkDeniedError,
  networkFailureIn,
} from '../upstream/stdio/network-denial.js';
import type { Launch, SandboxView } from './sandbox-plan.js';
import type { ProcessView, StdioSupervisor } from './supervisor.js';

/** Re-opening a 2026-07-28 child's ended list subscription: first wait, cap, and how long one must last to reset. */
const RELISTEN_BASE_MS = 1_000;
const RELISTEN_MAX_MS = 60_000;
const RELISTEN_STABLE_MS = 60_000;

/** A crash after this long running does not count towards the cap (the count starts afresh). */
const STABLE_AFTER_MS = 60_000;
const MAX_BACKOFF_MS = 60_000;
/** While a first start installs, how often the events say it is still going. */
const INSTALL_PROGRESS_MS = 10_000;

export interface Live {
  client: Client;
  child: StdioChild;
  fingerprint: string;
  /** The sandbox it runs in (undefined: unsandboxed). */
  sandbox: SandboxView | undefined;
}

/** Identity of what a child was started from, to tell whether a record change needs a restart. Never stored. */
function fingerprintOf(command: string, args: string[], env: Record<string, string>, options: ServerOptions): string {
  const sortedEnv = Object.keys(env)
    .sort()
    .map((k) => [k, env[k]]);
  // What the sandbox mounts and allows is part of what the child was started with.
  const confinement = [options.sandbox ?? null, options.workspaceRoots ?? null];
  return createHash('sha256')
    .update(JSON.stringify([command, args, sortedEnv, confinement]))
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

export function notStdio(id: string): GatehouseError {
  return new GatehouseError('stdio.not_stdio', `The server "${id}" is not a stdio server; it has no process.`, { id });
}

function disabled(id: string): GatehouseError {
  return new GatehouseError('stdio.disabled', `The server "${id}" is disabled; enable it before starting it.`, { id });
}

export class ServerProcess {
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
  /** The last start was refused before spawning (command not allowed, no sandbox): no restart. */
  private refused = false;
  /** The network of the last planned start (`none`: failures are checked for a denied connection). */
  private network: 'host' | 'none' | undefined;
  /** A denied connection was said on the log for the current child (once per child, not per call). */
  private deniedNoted = false;

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
      // The server's own process (inside a sandbox: the command, not bubblewrap).
      pid: child ? (child.serverPid() ?? child.pid) : null,
      sandboxed: this.live ? this.live.sandbox !== undefined : this.sup.wouldSandbox(this.id),
      sandbox: this.live?.sandbox ?? null,
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
    let spawned: StdioChild | undefined;
    let progress: NodeJS.Timeout | undefined;
    try {
      const row = await this.sup.options.records.getRow(this.id);
      if (row.transport !== 'stdio') throw notStdio(this.id);
      if (row.enabled !== 1) throw disabled(this.id);
      this.idleShutdownS = optionsOf(row).idleShutdownS ?? null;
      const connection = this.sup.options.records.connectionOf(row);
      if (connection.transport !== 'stdio') throw notStdio(this.id);
      if (generation !== this.generation) throw stoppedError(this.id);
      let launch: Launch;
      this.network = undefined;
      try {
        launch = await this.sup.options.planner.prepare(this.id, connection.command, optionsOf(row), connection.env);
      } catch (error) {
        // Retrying cannot help: refused until an admin changes the list or installs bubblewrap.
        this.lastError = (error as Error).message;
        this.sup.note(this.id, 'sandbox', `Start refused: ${(error as Error).message}`, {
          code: (error as { code?: unknown }).code,
        });
        this.refused = true;
        throw error;
      }
      this.network = launch.view?.network;
      this.deniedNoted = false;
      if (launch.unwritableRoots.length > 0) {
        this.sup.note(
          this.id,
          'sandbox',
          `Its uid ${launch.view?.uid} cannot write the workspace root${launch.unwritableRoots.length > 1 ? 's' : ''} ${launch.unwritableRoots.join(', ')} (read-only for it); chown or chmod the folder to let it write.`,
          { unwritableRoots: launch.unwritableRoots, uid: launch.view?.uid },
        );
      }
      const era = rememberedEra(row);
      // Never connected since its command was set: `npx`/`uvx` may be fetching the package, and a
      // handshake deadline that kills the download mid-way leaves a half-written cache behind.
      const { connectTimeoutMs, installTimeoutMs = connectTimeoutMs } = this.sup.options;
      const install = era === undefined && installTimeoutMs > connectTimeoutMs;
      const timeoutMs = install ? installTimeoutMs : connectTimeoutMs;
      if (install) {
        this.setState('installing');
        progress = this.installProgress(installTimeoutMs);
      }
      const onExit = (info: ExitInfo) => {
        // `live` is set before any exit can be observed by the caller of connectStdio.
        queueMicrotask(() => this.exited(info));
      };
      const connected = await connectStdio(
        {
          // The very file the allowlist check approved, found on the child's own PATH.
          command: launch.program ?? connection.command,
          args: connection.args,
          env: connection.env,
          label: this.id,
          maxLineBytes: this.sup.options.maxLineBytes,
          graceMs: this.sup.options.graceMs,
          // Lines come redacted of the child's env values (`spawn.ts`).
          onStderrLine: (line) => this.sup.options.onOutput(this.id, 'stderr', line),
          onNoiseLine: (line) => this.sup.options.onOutput(this.id, 'stdout', line),
          onExit,
          onSpawn: (child) => {
            spawned = child;
            this.sup.track(child);
          },
          sandbox: launch.sandbox,
        },
        {
          timeoutMs,
          signal: abort.signal,
          ...(era ? { era } : {}),
          onError: (error) => this.sup.options.logger.debug({ server: this.id, err: error }, 'stdio client error'),
        },
      );
      live = {
        client: connected.client,
        child: connected.child,
        fingerprint: fingerprintOf(connection.command, connection.args, connection.env, optionsOf(row)),
        sandbox: launch.view,
      };
      if (generation !== this.generation) {
        // Stopped while starting: this child is not wanted.
        await this.end(live);
        throw stoppedError(this.id);
      }
      this.live = live;
      void this.sup.rememberEra(row, connected.era);
      this.watchLists(live);
    } catch (error) {
      if (this.startAbort === abort) this.startAbort = undefined;
      if (!this.live?.child.running) this.sup.release(this.id);
      if (generation !== this.generation) throw isGatehouseError(error) ? error : stoppedError(this.id);
      const failure = stdioError(error);
      if (this.refused) {
        this.refused = false;
        this.setState('stopped');
        throw failure;
      }
      if (failure.code === 'mcp.not_found' || failure.code === 'stdio.not_stdio' || failure.code === 'stdio.disabled') {
        this.setState('stopped');
        throw failure;
      }
      if (this.network === 'none' && spawned) {
        // Its last stderr lines may say why (a refused connection); they are read by the time it is reaped.
        await Promise.race([spawned.exited, sleep(500, undefined, { ref: false })]);
        if (generation !== this.generation) throw failure; // stopped meanwhile: not a crash
      }
      this.crashed(`Start failed: ${failure.message}`, spawned?.recentStderr() ?? []);
      throw failure;
    } finally {
      if (progress) clearInterval(progress);
    }
    this.startAbort = undefined;
    this.idleStopped = false;
    this.setState('running', { pid: live.child.pid });
    const confinement = live.sandbox
      ? ` in its sandbox (network ${live.sandbox.network}${live.sandbox.uid !== null ? `, uid ${live.sandbox.uid}` : ''})`
      : ', unsandboxed';
    this.sup.note(this.id, 'process', `Started (pid ${live.child.pid})${confinement}.`, {
      state: 'running',
      pid: live.child.pid,
      sandboxed: live.sandbox !== undefined,
      ...(live.sandbox && { network: live.sandbox.network, uid: live.sandbox.uid }),
    });
    this.scheduleIdle();
    this.handshake = (this.sup.options.onStarted?.(this.id) ?? Promise.resolve()).catch(() => {});
    if (!live.child.running) queueMicrotask(() => live.child.exitInfo && this.exited(live.child.exitInfo));
    return live;
  }

  /** Says on the events that a first start is installing, then every few seconds that it still is. */
  private installProgress(budgetMs: number): NodeJS.Timeout {
    const since = Date.now();
    this.sup.note(
      this.id,
      'process',
      `First start: installing (allowing up to ${Math.round(budgetMs / 1000)} s before the handshake, GATEHOUSE_STDIO_INSTALL_TIMEOUT_MS).`,
      { state: 'installing', budgetMs },
    );
    const timer = setInterval(() => {
      const elapsedS = Math.round((Date.now() - since) / 1000);
      this.sup.note(this.id, 'process', `Still installing (${elapsedS} s of ${Math.round(budgetMs / 1000)} s).`, {
        state: 'installing',
        elapsedS,
      });
    }, INSTALL_PROGRESS_MS);
    timer.unref();
    return timer;
  }

  /**
   * Hears the child's list-changed notifications for as long as it runs. A 2026-07-28 child sends them
   * on a subscription: one that ends while the child lives is opened again (with backoff, as an HTTP
   * watch reconnects), and a refresh follows, since a change may have gone unheard meanwhile.
   */
  private watchLists(live: Live): void {
    const onListChanged = this.sup.options.onListChanged;
    if (!onListChanged) return;
    const changed = () => onListChanged(this.id);
    const alive = () => this.live === live && live.child.running;
    void (async () => {
      for (let failures = 0, opened = 0; alive(); ) {
        let openedAt: number | undefined;
        try {
          const watch = await watchListChanges(live.client, changed, { timeoutMs: this.sup.options.connectTimeoutMs });
          if (opened++ > 0) changed();
          // A 2025-era child notifies on its connection itself: nothing to hold open.
          if (!watch.ended) return;
          openedAt = Date.now();
          await watch.ended;
        } catch (error) {
          this.sup.options.logger.debug({ server: this.id, err: error }, 'stdio list watch not opened');
        }
        const lasted = openedAt !== undefined && Date.now() - openedAt >= RELISTEN_STABLE_MS;
        failures = lasted ? 0 : failures + 1;
        // Unref'd: a wait for a child that is going away must not keep the gateway from exiting.
        const wait = Math.min(RELISTEN_MAX_MS, RELISTEN_BASE_MS * 2 ** Math.max(0, failures - 1));
        if (alive()) await sleep(wait, undefined, { ref: false });
      }
    })();
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
    this.crashed(
      how.startsWith('The stdio server') ? how : `The stdio server "${this.id}" ${how}.`,
      live.child.recentStderr(),
    );
  }

  /**
   * A crash or a failed start: back off and restart, or give up after `maxRestarts` in a row. With
   * network "none" the log says so, and a network error in the message or the child's last stderr
   * lines types `lastError` as `sandbox.network_denied`.
   */
  private crashed(failure: string, stderr: readonly string[] = []): void {
    this.crashes += 1;
    const offline = this.network === 'none';
    const evidence = offline ? networkFailureIn([failure, ...stderr]) : undefined;
    this.lastError = evidence ? networkDeniedError(this.id, evidence) : failure;
    const message = offline ? `${failure} ${NETWORK_OFF_HINT}` : failure;
    const { maxRestarts, restartBaseMs } = this.sup.options;
    this.setState('crashed');
    if (this.crashes > maxRestarts) {
      this.setState('stopped');
      this.sup.background(this.sup.failed(this.id, evidence ? (this.lastError as string) : message, this.crashes));
      return;
    }
    const delay = Math.min(restartBaseMs * 2 ** (this.crashes - 1), MAX_BACKOFF_MS);
    this.restartAt = Date.now() + delay;
    this.sup.note(this.id, 'process', `${message} Restarting in ${delay} ms.`, {
      state: 'backoff',
      crashes: this.crashes,
      delayMs: delay,
      ...(offline && { network: 'none', networkDenied: evidence !== undefined }),
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
      const result = await deadline.race(fn(live.client, deadline));
      // A tool that failed says why in its result (`isError`), not as a thrown error.
      const failedTool = errorTextOf(result);
      if (failedTool !== undefined) this.callFailed(live, [failedTool]);
      return result;
    } catch (error) {
      if (deadline.expired) throw deadline.error(error);
      const failure = stdioError(error, live.child);
      this.callFailed(live, [failure.message, (error as Error)?.message]);
      throw failure;
    } finally {
      this.inflight -= 1;
      this.scheduleIdle();
    }
  }

  /**
   * A call failed (an error, or a tool result with `isError`). On a server whose network is off, a
   * failure that shows a refused or unreachable connection is typed in `lastError` and said once per
   * child on the log: the child cannot reach the network, and that is the likely cause.
   */
  callFailed(live: Live, texts: readonly (string | undefined)[]): void {
    if (live.sandbox?.network !== 'none') return;
    const evidence = networkFailureIn(texts);
    if (!evidence) return;
    this.lastError = networkDeniedError(this.id, evidence);
    if (this.live !== live || this.deniedNoted) return;
    this.deniedNoted = true;
    this.sup.note(this.id, 'sandbox', `A call failed reaching the network: ${evidence}. ${NETWORK_OFF_HINT}`, {
      code: 'sandbox.network_denied',
      network: 'none',
    });
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
    if (fingerprintOf(connection.command, connection.args, connection.env, options) !== live.fingerprint) {
      await this.stop();
      this.sup.note(this.id, 'process', 'Restarting: its command, args, env or sandbox changed.', {
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
