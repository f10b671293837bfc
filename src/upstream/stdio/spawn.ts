/**
 * The one way Gatehouse starts a stdio MCP server.
 *
 * - `shell: false`, the command and arguments exactly as given, a minimal environment (`env.ts`); the
 *   command is resolved once, on the child's own PATH, and that absolute file is what runs (`programOf`).
 * - `detached: true`: the child leads its own process group (and session), so a signal to `-pid`
 *   reaches everything it started (`npx` → `node`, `uvx` → `python`), and a terminal's Ctrl-C does
 *   not reach it behind Gatehouse's back.
 * - Stopping signals the group: stdin is closed and SIGTERM sent, SIGKILL after the grace period.
 *   Descendants that left the group (`setsid`) are snapshotted from `/proc` before the first signal
 *   and signalled too. A stop is complete when the child has exited and no live process is left in
 *   its group. A child that exits by itself has what it left in its group reaped the same way.
 * - Bounds: a stdout line over `maxLineBytes`, or more than `maxNoiseLines` stdout lines that are
 *   not JSON-RPC, ends that child (never the gateway) with a clear `lastError`. stderr is split into
 *   capped lines, each with the declared env's values redacted (a child may print its API key in a failed URL),
 *   for `onStderrLine`; the last few are kept for `recentStderr()`, whose lines may become a `lastError`.
 * - If the Gatehouse process exits normally (`process.on('exit')`), every live group is SIGKILLed
 *   synchronously. Signals that kill Gatehouse outright skip that hook: the supervisor must stop
 *   children on SIGTERM/SIGINT, and reap orphans of a crash from its pid file (`liveStdioChildren`
 *   gives what to write: pid, pgid and `/proc` start time).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { type JSONRPCMessage, parseJSONRPCMessage } from '@modelcontextprotocol/client';
import { GatehouseError } from '../../errors.js';
import { childEnvironment } from './env.js';
import { LineSplitter } from './lines.js';
import {
  descendantsOf,
  listGroupPids,
  namespacePids,
  processAlive,
  procStartTime,
  signalGroup,
  signalProcess,
} from './proc.js';
import { resolveOnPath, type SandboxOptions, sameFile, sandboxLaunch } from './sandbox.js';
import { StdioChildTransport } from './transport.js';

export const STDIO_DEFAULTS = Object.freeze({
  maxLineBytes: 10 * 1024 * 1024,
  maxNoiseLines: 1000,
  maxStderrLineBytes: 8 * 1024,
  graceMs: 5000,
  /** Lines kept for `recentStderr()`. */
  recentStderrLines: 20,
});

/** After SIGKILL, how long to wait for the group to disappear before giving up on it. */
const KILL_WAIT_MS = 3000;
/** After the child's exit, how long to wait for its stdout to drain before the transport closes. */
const DRAIN_WAIT_MS = 250;
/** After stdout closed, how long to wait for the exit before calling it a child that closed stdout. */
const EXIT_AFTER_CLOSE_MS = 1000;
/** Protocol-garbage reports per child passed to `onerror`; the rest are only counted. */
const MAX_GARBAGE_REPORTS = 10;
const POLL_MS = 20;

export interface StdioSpec {
  command: string;
  args: string[];
  /** The record's declared env, already unsealed. Added to the SDK's inherited allowlist, nothing else. */
  env: Record<string, string>;
  cwd?: string;
  /** The server id, for messages and logs. */
  label: string;
  /** Longest stdout line (one JSON-RPC message), in bytes; default 10 MiB. */
  maxLineBytes?: number;
  /** stdout lines that are not JSON-RPC tolerated over the child's life; default 1000. */
  maxNoiseLines?: number;
  /** stderr lines are cut to this many bytes; default 8 KiB. */
  maxStderrLineBytes?: number;
  /** Grace between SIGTERM and SIGKILL when the child ends itself or is ended by a bound; default 5 s. */
  graceMs?: number;
  /**
   * Each stderr line (capped; the values of `env` redacted, as in `recentStderr()`; anything else the caller would
   * hide is its to redact before storing or logging).
   */
  onStderrLine?: (line: string) => void;
  /** Each stdout line that is not a JSON-RPC message (counted towards `maxNoiseLines`; `env`'s values redacted). */
  onNoiseLine?: (line: string) => void;
  /** Once, when the child has exited and its group is reaped (same value as `exited`). */
  onExit?: (info: ExitInfo) => void;
  /** Once, as soon as the process exists (before any connect): e.g. to record it in a pid file. */
  onSpawn?: (child: StdioChild) => void;
  /**
   * Run the command inside this bubblewrap sandbox (`sandbox.ts`); `cwd` is then ignored (the sandbox
   * decides). The process spawned, whose group is reaped, is then bubblewrap's.
   */
  sandbox?: SandboxOptions | undefined;
}

/**
 * Why a child ended:
 * `stopped` (asked to), `exited` (by itself), `line_too_long` / `noise_flood` (a bound ended it),
 * `stdout_closed` (it closed stdout but lived on, so it was stopped).
 */
export type ExitReason = 'stopped' | 'exited' | 'line_too_long' | 'noise_flood' | 'stdout_closed';

export interface ExitInfo {
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  reason: ExitReason;
  /** Set unless the child was stopped on request: what went wrong, in words fit for `lastError`. */
  lastError?: string;
  startedAt: Date;
  endedAt: Date;
  /** SIGKILL had to be sent to the group. */
  killed: boolean;
  /** Live processes still in the group when the spawner gave up waiting (normally 0). */
  survivors: number;
}

export interface StdioChild {
  readonly label: string;
  readonly pid: number;
  /** The process group (the child leads it: equal to `pid`). */
  readonly pgid: number;
  readonly startedAt: Date;
  /** Whether it runs inside a bubblewrap sandbox (then `pid` is bubblewrap's). */
  readonly sandboxed: boolean;
  /**
   * The host pid of the server's own process: `pid` unsandboxed; inside a sandbox, the command's
   * (bubblewrap's init forks it), once it exists.
   */
  serverPid(): number | undefined;
  /** `/proc/<pid>/stat` field 22: with the pid, the child's identity (pids are reused). */
  readonly procStartTime: number | undefined;
  readonly transport: StdioChildTransport;
  /** Resolves once, when the child has exited and its group is reaped. Never rejects. */
  readonly exited: Promise<ExitInfo>;
  /** The exit, once `exited` has resolved. */
  readonly exitInfo: ExitInfo | undefined;
  /** Not yet exited and not being stopped. */
  readonly running: boolean;
  /** Why the child ended or is ending, when it was not a requested stop. */
  readonly lastError: string | undefined;
  /** The typed error for calls that failed because the child ended (see `stdioFailure`). */
  readonly failure: GatehouseError | undefined;
  /** stdout lines that were not JSON-RPC, so far. */
  readonly noiseLines: number;
  /** The last stderr lines (capped, the declared env's values redacted), oldest first. */
  recentStderr(): string[];
  /** SIGTERM to the group (and stdin closed), SIGKILL after `graceMs`; resolves when reaped. Idempotent. */
  stop(graceMs?: number): Promise<ExitInfo>;
}

/** What the supervisor's pid file needs of each live child. */
export interface LiveChildRecord {
  label: string;
  pid: number;
  pgid: number;
  procStartTime: number | undefined;
  startedAt: Date;
}

const live = new Set<ChildHandle>();
let exitHookInstalled = false;

/** Every child spawned by this process whose group is not known to be reaped yet. */
export function liveStdioChildren(): LiveChildRecord[] {
  return [...live].map((c) => ({
    label: c.label,
    pid: c.pid,
    pgid: c.pgid,
    procStartTime: c.procStartTime,
    startedAt: c.startedAt,
  }));
}

/** SIGKILLs every live child's group and its snapshotted descendants, synchronously. */
export function killAllStdioChildrenSync(): void {
  for (const child of live) child.killNowSync();
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', killAllStdioChildrenSync);
}

/**
 * Spawns a stdio MCP server. Resolves once the process exists; rejects with `upstream_unreachable`
 * when it cannot be started (no such command, not executable, bad cwd), `stdio.command_not_allowed`
 * when the child's PATH makes a bare command another file than the gateway's PATH (`programOf`).
 */
export function spawnStdio(spec: StdioSpec): Promise<StdioChild> {
  let env: Record<string, string>;
  let program: string;
  try {
    env = childEnvironment(spec.env);
    program = programOf(spec, env.PATH ?? '');
  } catch (error) {
    return Promise.reject(error);
  }
  let proc: ChildProcess;
  try {
    if (spec.sandbox) {
      const launch = sandboxLaunch(program, spec.args, env, spec.sandbox);
      proc = spawn(launch.command, launch.args, {
        shell: false,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
        env,
        windowsHide: true,
      });
      const options = proc.stdio[3] as NodeJS.WritableStream & { on(e: 'error', f: () => void): void };
      options.on('error', () => {});
      options.end(Buffer.from(launch.options.map((o) => `${o}\0`).join('')));
    } else {
      // The name as given stays argv[0]; the file is the one resolved above.
      proc = spawn(program, spec.args, {
        argv0: spec.command,
        shell: false,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
        env,
        ...(spec.cwd !== undefined && { cwd: spec.cwd }),
        windowsHide: true,
      });
    }
  } catch (error) {
    return Promise.reject(spawnFailed(spec, error));
  }
  return new Promise<StdioChild>((resolve, reject) => {
    const onError = (error: Error) => {
      proc.removeListener('spawn', onSpawn);
      // Nothing was started; the streams are dead ends.
      proc.stdin?.destroy();
      proc.stdout?.destroy();
      proc.stderr?.destroy();
      reject(spawnFailed(spec, error));
    };
    const onSpawn = () => {
      proc.removeListener('error', onError);
      const child = new ChildHandle(spec, proc);
      try {
        spec.onSpawn?.(child);
      } catch {}
      resolve(child);
    };
    proc.once('error', onError);
    proc.once('spawn', onSpawn);
  });
}

/**
 * The file a child runs, resolved once on its own PATH and spawned by that absolute path (never looked up
 * again, sandboxed or not). `stdio.allowedCommands` reads a bare name on the gateway's PATH, so a bare
 * name must find the same file on both: a record's `PATH` cannot swap the program it approved. A caller
 * that checked the program on the child's PATH (`allowedProgram`) hands that absolute path instead.
 */
function programOf(spec: StdioSpec, childPath: string): string {
  const program = resolveOnPath(spec.command, childPath);
  if (program === undefined) throw spawnFailed(spec, Object.assign(new Error('not found'), { code: 'ENOENT' }));
  if (spec.command.includes('/') || sameFile(program, resolveOnPath(spec.command, process.env.PATH ?? '')))
    return program;
  throw new GatehouseError(
    'stdio.command_not_allowed',
    `The stdio server "${spec.label}" was not started: on the PATH it is given, "${spec.command}" is ${program}, not the file the gateway's PATH finds, which stdio.allowedCommands approved. Give the command as an absolute path an admin allows, or drop PATH from its env.`,
    { command: spec.command, program },
  );
}

function spawnFailed(spec: StdioSpec, error: unknown): GatehouseError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const why =
    code === 'ENOENT'
      ? 'the command or the working directory was not found'
      : code === 'EACCES'
        ? 'the command is not executable'
        : 'it could not be started';
  return new GatehouseError(
    'upstream_unreachable',
    `The stdio server "${spec.label}" could not be started: ${why}.`,
    { reason: 'spawn_failed', ...(typeof code === 'string' && { errno: code }) },
    { cause: error },
  );
}

class ChildHandle implements StdioChild {
  readonly label: string;
  readonly pid: number;
  readonly pgid: number;
  readonly startedAt = new Date();
  readonly sandboxed: boolean;
  readonly procStartTime: number | undefined;
  private innerPid: number | undefined;
  readonly transport: StdioChildTransport;
  readonly exited: Promise<ExitInfo>;

  exitInfo: ExitInfo | undefined;
  lastError: string | undefined;
  failure: GatehouseError | undefined;
  noiseLines = 0;

  private reason: ExitReason | undefined;
  private code: number | null = null;
  private signal: NodeJS.Signals | null = null;
  private childExited = false;
  private killed = false;
  /** A stop began (stdin closed, signals sent): an exit from now on is the answer to it. */
  private askedToStop = false;
  /** The child exited before anyone asked it to. */
  private diedUnprompted = false;
  private stopping: Promise<ExitInfo> | undefined;
  /** When a stop escalates to SIGKILL. */
  private killAt = Number.POSITIVE_INFINITY;
  private resolveExited!: (info: ExitInfo) => void;
  private readonly stderrTail: string[] = [];
  /** Hides the declared env's values (what the record seals) in a stderr line. */
  private readonly redact: (line: string) => string;
  /** Descendants that left the group, seen before a signal (pid → start time, so a reused pid is spared). */
  private readonly escapees = new Map<number, number>();
  private garbageReports = 0;
  private readonly stdout: LineSplitter;
  private readonly stderr: LineSplitter;
  private readonly childGone: Promise<void>;

  constructor(
    private readonly spec: StdioSpec,
    private readonly proc: ChildProcess,
  ) {
    this.label = spec.label;
    this.redact = redactValues(Object.values(spec.env));
    this.pid = proc.pid!;
    this.pgid = this.pid;
    this.sandboxed = spec.sandbox !== undefined;
    this.procStartTime = procStartTime(this.pid);
    this.exited = new Promise((resolve) => {
      this.resolveExited = resolve;
    });
    this.transport = new StdioChildTransport(this.pid, proc.stdin!, () => this.stop());
    live.add(this);
    installExitHook();

    const maxNoise = spec.maxNoiseLines ?? STDIO_DEFAULTS.maxNoiseLines;
    const maxLine = spec.maxLineBytes ?? STDIO_DEFAULTS.maxLineBytes;
    this.stdout = new LineSplitter({
      maxLineBytes: maxLine,
      mode: 'strict',
      onLine: (line) => this.stdoutLine(line, maxNoise),
      onOverflow: () =>
        this.endForBound(
          'line_too_long',
          `The stdio server "${this.label}" wrote a stdout line longer than ${maxLine} bytes; it was stopped.`,
        ),
    });
    this.stderr = new LineSplitter({
      maxLineBytes: spec.maxStderrLineBytes ?? STDIO_DEFAULTS.maxStderrLineBytes,
      mode: 'truncate',
      onLine: (line, truncated) => this.stderrLine(truncated ? `${line} [truncated]` : line),
    });

    proc.stdout!.on('data', (chunk: Buffer) => {
      if (!this.stdout.finished) this.stdout.push(chunk);
    });
    proc.stdout!.on('end', () => this.stdout.end());
    proc.stdout!.on('error', () => {});
    proc.stderr!.on('data', (chunk: Buffer) => this.stderr.push(chunk));
    proc.stderr!.on('end', () => this.stderr.end());
    proc.stderr!.on('error', () => {});
    // EPIPE after the child died, or a write after stdin ended: the exit path reports what matters.
    proc.stdin!.on('error', () => {});
    proc.on('error', () => {});

    const stdoutClosed = new Promise<void>((resolve) => proc.stdout!.once('close', () => resolve()));
    this.childGone = new Promise<void>((resolve) => {
      proc.once('exit', (code, signal) => {
        this.childExited = true;
        this.code = code;
        this.signal = signal;
        if (!this.askedToStop || this.diedUnprompted) this.markDiedUnprompted();
        resolve();
      });
    });

    // The channel ends when stdout closes (after the exit, if it comes right along, so a failed call
    // finds the child's reason), or shortly after the exit if a grandchild holds stdout open.
    void stdoutClosed.then(async () => {
      await Promise.race([this.childGone, delay(DRAIN_WAIT_MS)]);
      this.transport.end();
      await Promise.race([this.childGone, delay(EXIT_AFTER_CLOSE_MS)]);
      if (!this.childExited) {
        this.endForBound('stdout_closed', `The stdio server "${this.label}" closed its stdout; it was stopped.`);
      }
    });
    void this.childGone.then(async () => {
      await Promise.race([stdoutClosed, delay(DRAIN_WAIT_MS)]);
      this.transport.end();
      // It ended by itself: reap whatever it left behind in its group (a no-op when nothing is left).
      if (!this.stopping) void this.stop();
    });
  }

  get running(): boolean {
    return !this.childExited && !this.stopping;
  }

  recentStderr(): string[] {
    return [...this.stderrTail];
  }

  /**
   * SIGTERM to the group. In a sandbox, not to bubblewrap's two processes: the outer one would die
   * at once and, with `--die-with-parent`, take the server down by SIGKILL with no grace; the server
   * gets the SIGTERM, and bubblewrap ends when it does.
   */
  private terminateGroup(): void {
    if (!this.sandboxed) {
      signalGroup(this.pgid, 'SIGTERM');
      return;
    }
    const depth = namespacePids(process.pid)?.length ?? 1;
    for (const pid of listGroupPids(this.pgid)) {
      if (pid === this.pid) continue;
      const ns = namespacePids(pid);
      if (ns && ns.length === depth + 1 && ns[ns.length - 1] === 1) continue; // bubblewrap's init
      signalProcess(pid, 'SIGTERM');
    }
  }

  serverPid(): number | undefined {
    if (!this.sandboxed) return this.pid;
    if (this.innerPid !== undefined && processAlive(this.innerPid)) return this.innerPid;
    // bubblewrap → its init (pid 1 of the new namespace) → the command (pid 2 there).
    const depth = namespacePids(process.pid)?.length ?? 1;
    for (const stat of descendantsOf(this.pid)) {
      const ns = namespacePids(stat.pid);
      if (ns && ns.length === depth + 1 && ns[ns.length - 1] === 2) {
        this.innerPid = stat.pid;
        return stat.pid;
      }
    }
    return undefined;
  }

  stop(graceMs = this.spec.graceMs ?? STDIO_DEFAULTS.graceMs): Promise<ExitInfo> {
    // A later stop with a shorter grace brings the SIGKILL forward; a longer one changes nothing.
    this.killAt = Math.min(this.killAt, Date.now() + Math.max(0, graceMs));
    this.stopping ??= this.reap().then((info) => {
      this.exitInfo = info;
      // Survivors (SIGKILLed yet still there, e.g. in uninterruptible sleep) stay listed for the exit
      // hook and the supervisor's pid file.
      if (info.survivors === 0) live.delete(this);
      this.resolveExited(info);
      try {
        this.spec.onExit?.(info);
      } catch {
        // A faulty observer must not keep the stop from completing.
      }
      return info;
    });
    return this.stopping;
  }

  /** The exit hook's path: SIGKILL to the group and the known escapees, no waiting. */
  killNowSync(): void {
    if (this.exitInfo?.survivors === 0) return;
    this.snapshotEscapees();
    if (listGroupPids(this.pgid).length > 0) signalGroup(this.pgid, 'SIGKILL');
    this.signalEscapees('SIGKILL');
  }

  private async reap(): Promise<ExitInfo> {
    // Already dead (a zombie, or reaped with its 'exit' event still to come): it went by itself.
    if (!this.childExited && !processAlive(this.pid)) this.diedUnprompted = true;
    this.askedToStop = true;
    this.snapshotEscapees();
    try {
      this.proc.stdin?.end();
    } catch {}
    let members = this.groupMembers();
    if (members.length > 0 || !this.childExited) {
      this.terminateGroup();
      this.signalEscapees('SIGTERM');
      members = await this.waitForGroup(() => this.killAt);
      if (members.length > 0 || !this.childExited || this.liveEscapees().length > 0) {
        this.killed = true;
        signalGroup(this.pgid, 'SIGKILL');
        this.signalEscapees('SIGKILL');
        const giveUpAt = Date.now() + KILL_WAIT_MS;
        members = await this.waitForGroup(() => giveUpAt);
      }
    }
    await Promise.race([this.childGone, delay(this.childExited ? 0 : KILL_WAIT_MS)]);
    this.reason ??= this.diedUnprompted ? 'exited' : 'stopped';
    this.transport.end();
    this.stdout.finish();
    this.proc.stdout?.destroy();
    this.proc.stderr?.destroy();
    this.proc.stdin?.destroy();
    return {
      pid: this.pid,
      code: this.code,
      signal: this.signal,
      reason: this.reason,
      ...(this.lastError !== undefined && { lastError: this.lastError }),
      startedAt: this.startedAt,
      endedAt: new Date(),
      killed: this.killed,
      survivors: members.length + this.liveEscapees().length,
    };
  }

  /** The child exited without being asked to: record why, for `lastError` and failed calls. */
  private markDiedUnprompted(): void {
    this.diedUnprompted = true;
    this.reason ??= 'exited';
    const how = this.signal !== null ? `was killed by ${this.signal}` : `exited with code ${this.code ?? 'unknown'}`;
    const message = `The stdio server "${this.label}" ${how}.`;
    this.lastError ??= message;
    this.failure ??= new GatehouseError('upstream_unreachable', message, {
      reason: 'child_exited',
      ...(this.code !== null && { exitCode: this.code }),
      ...(this.signal !== null && { signal: this.signal }),
    });
  }

  /** Live group members (the child included until it exits). */
  private groupMembers(): number[] {
    return listGroupPids(this.pgid);
  }

  /**
   * Waits until the child has exited and nothing is left of its group or its escapees, or the time
   * `until()` returns has come (read on each turn: a shorter stop can bring it forward); returns who
   * is left in the group.
   */
  private async waitForGroup(until: () => number): Promise<number[]> {
    let members = this.groupMembers();
    const done = () => members.length === 0 && this.childExited && this.liveEscapees().length === 0;
    while (!done() && Date.now() < until()) {
      await delay(POLL_MS);
      // Poll the known members cheaply; rescan the group only when they all look gone.
      members = members.filter((pid) => processAlive(pid));
      if (members.length === 0) members = this.groupMembers();
    }
    return members;
  }

  private snapshotEscapees(): void {
    if (this.childExited) return;
    for (const stat of descendantsOf(this.pid)) {
      if (stat.pgrp !== this.pgid) this.escapees.set(stat.pid, stat.startTime);
    }
  }

  private liveEscapees(): number[] {
    return [...this.escapees].filter(([pid, start]) => processAlive(pid, start)).map(([pid]) => pid);
  }

  private signalEscapees(signal: NodeJS.Signals): void {
    for (const pid of this.liveEscapees()) signalProcess(pid, signal);
  }

  private stdoutLine(line: string, maxNoise: number): void {
    if (line.trim() === '') return;
    let value: unknown;
    let isJson = true;
    try {
      value = JSON.parse(line);
    } catch {
      isJson = false;
    }
    if (isJson) {
      let message: JSONRPCMessage | undefined;
      try {
        message = parseJSONRPCMessage(value);
      } catch (error) {
        if (this.garbageReports < MAX_GARBAGE_REPORTS) {
          this.garbageReports += 1;
          this.transport.report(
            new GatehouseError(
              'upstream_protocol_error',
              `The stdio server "${this.label}" wrote JSON that is not a JSON-RPC message.`,
              { reason: 'invalid_message' },
              { cause: error },
            ),
          );
        }
      }
      if (message !== undefined) {
        this.transport.deliver(message);
        return;
      }
    }
    this.noiseLines += 1;
    try {
      this.spec.onNoiseLine?.(this.redact(line.length > 8192 ? line.slice(0, 8192) : line));
    } catch {}
    if (this.noiseLines > maxNoise) {
      this.endForBound(
        'noise_flood',
        `The stdio server "${this.label}" wrote more than ${maxNoise} stdout lines that are not JSON-RPC; it was stopped.`,
      );
    }
  }

  private stderrLine(raw: string): void {
    // Redacted once, here: the tail feeds `lastError` (stored, published, shown to read-scoped agents).
    const line = this.redact(raw);
    this.stderrTail.push(line);
    if (this.stderrTail.length > STDIO_DEFAULTS.recentStderrLines) this.stderrTail.shift();
    try {
      this.spec.onStderrLine?.(line);
    } catch {}
  }

  /** A bound was crossed: record why, tell the protocol layer, stop the child (not the gateway). */
  private endForBound(reason: 'line_too_long' | 'noise_flood' | 'stdout_closed', message: string): void {
    if (this.reason !== undefined || this.stopping) return;
    this.reason = reason;
    this.stdout.finish();
    this.lastError = message;
    const code = reason === 'stdout_closed' ? 'upstream_unreachable' : 'upstream_protocol_error';
    this.failure = new GatehouseError(code, message, { reason });
    this.transport.report(this.failure);
    this.transport.end();
    void this.stop();
  }
}

/**
 * Replaces each of `values` in a line a child wrote by `[redacted]` (values under 4 characters are left: they
 * would blank out ordinary words). Longest first, so a value that contains another is hidden whole.
 */
function redactValues(values: readonly string[]): (line: string) => string {
  const hidden = [...new Set(values.filter((v) => typeof v === 'string' && v.length >= 4))].sort(
    (a, b) => b.length - a.length,
  );
  if (hidden.length === 0) return (line) => line;
  return (line) => hidden.reduce((text, value) => text.split(value).join('[redacted]'), line);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
