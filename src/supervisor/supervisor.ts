import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, PriorDiscovery } from '@modelcontextprotocol/client';
import type { EventHub } from '../audit/stream.js';
import { findGatehouseError, GatehouseError } from '../errors.js';
import type { Logger } from '../logging.js';
import type { ServerOptions, ServerStore } from '../registry/records.js';
import type { StdioState } from '../registry/state.js';
import type { SettingsService } from '../settings/service.js';
import { parseJson } from '../store/json.js';
import type { ServerTable } from '../store/schema.js';
import { asSoleCall } from '../upstream/asks.js';
import { Deadline } from '../upstream/deadline.js';
import { callInteractiveTool } from '../upstream/operations.js';
import type { StdioChild } from '../upstream/stdio/index.js';
import type { InteractiveCallOptions, InteractiveCallResult, UpstreamChannel } from '../upstream/types.js';
import { PidFile } from './pidfile.js';
import type { SandboxPlanner, SandboxView } from './sandbox-plan.js';
import { notStdio, ServerProcess } from './server-process.js';

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
  /** The running server said its tools, prompts or resources changed (the registry refreshes them). */
  onListChanged?(id: string): void;
  /** A child's stderr line or stray stdout line, already redacted (the sink rate-limits). */
  onOutput(id: string, kind: 'stderr' | 'stdout', line: string): void;
  graceMs: number;
  maxLineBytes: number;
  restartBaseMs: number;
  maxRestarts: number;
  /** Deadline of a start (spawn + MCP connect). */
  connectTimeoutMs: number;
  /**
   * Deadline of a first start (the record never connected: `npx`/`uvx` may be downloading the package);
   * never shorter than `connectTimeoutMs`. Default: `connectTimeoutMs`.
   */
  installTimeoutMs?: number;
  callTimeoutMs: number;
  /** Allowed commands and the sandbox of each child. */
  planner: SandboxPlanner;
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
  /** Whether the child runs (or, stopped, would run) inside a bubblewrap sandbox. */
  sandboxed: boolean;
  /** The running child's sandbox: network, uid, working directory and the limits in force. */
  sandbox: SandboxView | null;
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
  /** Servers whose record says `sandbox.mode: "off"`, as last read. */
  private readonly sandboxOff = new Map<string, boolean>();

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
      // An operator's stop outlives the gateway process: remembered on the record.
      if (row.stoppedByOperator) proc.stoppedByOperator = true;
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
    const row = await this.options.records.getRow(id);
    if (row.transport !== 'stdio') throw notStdio(id);
    const sandboxOff = parseJson<ServerOptions>(row.options, {}).sandbox?.mode === 'off';
    this.sandboxOff.set(id, sandboxOff);
    return this.view(id);
  }

  /** Whether a start of the server would be sandboxed (as last seen of its record). */
  wouldSandbox(id: string): boolean {
    return this.options.planner.mode === 'on' && this.sandboxOff.get(id) !== true;
  }

  /** `POST …/start`: starts a stopped server (a fresh count of crashes) and waits until it is running. */
  async start(id: string): Promise<ProcessView> {
    await this.checkStdio(id);
    const proc = this.process(id);
    proc.resetCrashes();
    await this.options.records.setStoppedByOperator(id, false);
    await proc.start();
    await proc.handshake;
    return proc.view();
  }

  async stop(id: string): Promise<ProcessView> {
    await this.checkStdio(id);
    const proc = this.process(id);
    proc.stoppedByOperator = true;
    await this.options.records.setStoppedByOperator(id, true);
    await proc.stop();
    return proc.view();
  }

  async restart(id: string): Promise<ProcessView> {
    await this.checkStdio(id);
    const proc = this.process(id);
    await proc.stop();
    proc.resetCrashes();
    await this.options.records.setStoppedByOperator(id, false);
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
      // In flight on the pipe like a tool call, but relaying nothing: an upstream's ask or log message meanwhile
      // (a prompt's elicitation, say) is never handed to another agent's call as if that call were the sole one.
      return await this.process(id).use(deadline, (client, d) =>
        asSoleCall(client, { deadline: d }, () => fn(client, d.signal)),
      );
    } finally {
      deadline.dispose();
    }
  }

  /**
   * The running server's client as a channel for a long-lived stream (the hub's 2026-07-28 resource
   * subscriptions), the child started first as a call would start it. `ended` settles when that client closes
   * (the child exited or was stopped); `close` leaves the client alone (it is the server's one client).
   */
  async openChannel(id: string, deadlineMs: number): Promise<UpstreamChannel> {
    const client = await this.withClient(id, deadlineMs, async (c) => c);
    return { client, ended: closedOf(client), close: async () => {} };
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
      // A 2025-era server's asks and log messages during the call reach its agent (`asks.ts`: the sole call in flight).
      return await this.process(id).use(deadline, (client, d) =>
        asSoleCall(client, { relay: opts.ask, onLog: opts.onLog, deadline: d }, () =>
          callInteractiveTool(client, d, name, args, opts),
        ),
      );
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

  /**
   * The record as it is now, for a reconcile; `undefined` once it is gone (its `uninstalled` event follows)
   * or the supervisor closed. A failed read (the store busy, out of connections, briefly away) is tried
   * again: a dropped change would leave a disabled server running, or an edited one on its old command.
   */
  private async currentRow(id: string): Promise<ServerTable | undefined> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.options.records.getRow(id);
      } catch (error) {
        if (findGatehouseError(error)?.code === 'mcp.not_found') return undefined;
        if (this.closed) return undefined;
        const delayMs = Math.min(RECONCILE_RETRY_MAX_MS, RECONCILE_RETRY_BASE_MS * 2 ** attempt);
        // Said once per change, not on every try of a long outage.
        if (attempt === 0) {
          this.options.logger.warn(
            { server: id, err: error },
            'could not read a changed stdio server record; trying again until the store answers',
          );
        }
        await sleep(delayMs, undefined, { ref: false });
        if (this.closed) return undefined;
      }
    }
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
          try {
            this.options.planner.forget(id);
          } catch (error) {
            this.options.logger.warn({ server: id, err: error }, 'could not remove a stdio state folder');
          }
          return;
        }
        const row = await this.currentRow(id);
        if (row?.transport !== 'stdio') return;
        await this.process(id).reconcile(row);
      })
      .catch((error) => this.options.logger.warn({ server: id, err: error }, 'stdio reconcile failed'))
      .finally(() => {
        if (this.reconciling.get(id) === next) this.reconciling.delete(id);
      });
    this.reconciling.set(id, next);
  }
}

/** A failed record read during a reconcile is tried again after 250 ms, doubling up to 5 s. */
const RECONCILE_RETRY_BASE_MS = 250;
const RECONCILE_RETRY_MAX_MS = 5_000;

const closings = new WeakMap<Client, Promise<void>>();

/** Settles when `client` closes (its `onclose`, chained after any the client already had). */
function closedOf(client: Client): Promise<void> {
  let closed = closings.get(client);
  if (!closed) {
    closed = new Promise<void>((resolve) => {
      const previous = client.onclose;
      client.onclose = () => {
        previous?.();
        resolve();
      };
    });
    closings.set(client, closed);
  }
  return closed;
}
