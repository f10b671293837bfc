/**
 * The orchestrator's side of the processes it starts. Each party is one real process
 * (`node [--expose-gc] --import tsx --import bench/orphan-guard.ts <file>`), with an IPC channel, so
 * that it ends when the orchestrator ends however that happens. Everything here is bounded in time:
 * a party that does not announce itself within 60 s is killed, a question unanswered in 10 s fails,
 * and `stop()` escalates from SIGTERM to SIGKILL after 5 s.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { BenchAnswer, BenchQuestion } from './launcher.js';
import type { LoadReport } from './load.js';
import { productEnv, REPO_DIR } from './product.js';

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
export { REPO_DIR };

const GUARD = path.join(BENCH_DIR, 'orphan-guard.ts');

// A loaded machine may need longer (BENCH_START_TIMEOUT_MS).
const START_TIMEOUT_MS = Number(process.env.BENCH_START_TIMEOUT_MS ?? 60_000);
const ASK_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 5_000;
const STDERR_TAIL = 40;

const alive = new Set<ChildProcess>();

/** Last resort: whatever is still running when the orchestrator exits is killed. */
process.on('exit', () => {
  for (const child of alive) child.kill('SIGKILL');
});

/** The environment of a child: the orchestrator's, minus every Gatehouse or MCP setting, plus `extra`. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('GATEHOUSE_') || key.startsWith('MCP_') || key === 'NODE_ENV' || key === 'PORT') continue;
    if (key === 'HOST' || key === 'LOG_LEVEL' || key === 'MAX_BODY_SIZE') continue;
    env[key] = value;
  }
  // Gateways and conduits load the product's build (`product.ts`); `extra` may name another build.
  return { ...env, ...productEnv(), ...extra };
}

/** With `BENCH_CPU_PROF_DIR` set, the conduit and gateway launchers write V8 CPU profiles there when they stop. */
const PROFILE_DIR = process.env.BENCH_CPU_PROF_DIR;

function spawnTs(
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  launcher: boolean,
  preload: readonly string[] = [],
): ChildProcess {
  const flags = launcher
    ? ['--expose-gc', ...(PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(PROFILE_DIR)}`] : [])]
    : [];
  const imports = [GUARD, ...preload.map((p) => path.join(REPO_DIR, p))].flatMap((p) => ['--import', p]);
  // A file may be absolute (the baseline's gateway lives in a tree of its own, see baseline.ts).
  const child = spawn(
    process.execPath,
    [...flags, '--import', 'tsx', ...imports, path.resolve(REPO_DIR, file), ...args],
    {
      cwd: REPO_DIR,
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    },
  );
  alive.add(child);
  child.once('exit', () => alive.delete(child));
  return child;
}

function tail(child: ChildProcess): () => string {
  const lines: string[] = [];
  if (child.stderr) {
    createInterface({ input: child.stderr }).on('line', (line) => {
      lines.push(line);
      if (lines.length > STDERR_TAIL) lines.shift();
      if (process.env.BENCH_VERBOSE) process.stderr.write(`  [${child.pid}] ${line}\n`);
    });
  }
  return () => lines.join('\n');
}

/** Resolves with the first stdout line that parses as a JSON object; rejects on exit or timeout. */
function firstJsonLine<T>(child: ChildProcess, name: string, timeoutMs: number, stderr: () => string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    let done = false;
    const finish = (error: Error | undefined, value?: T) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      child.off('exit', onExit);
      lines.off('line', onLine);
      if (error) reject(error);
      else resolve(value as T);
    };
    const onLine = (line: string) => {
      if (!line.startsWith('{')) return;
      try {
        finish(undefined, JSON.parse(line) as T);
      } catch {
        /* not the line we wait for */
      }
    };
    const onExit = (code: number | null, signal: string | null) =>
      finish(new Error(`${name} exited (${code ?? signal}) before reporting.\n${stderr()}`));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish(new Error(`${name} did not report within ${timeoutMs} ms.\n${stderr()}`));
    }, timeoutMs);
    lines.on('line', onLine);
    child.once('exit', onExit);
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

/** Preloaded into the fixture upstreams: an ordinary keep-alive instead of the tests' 1 s (see the file). */
export const UPSTREAM_PRELOAD = ['bench/upstream-keepalive.ts'] as const;

/** A long-running party: an upstream, a conduit or a gateway. */
export class Party<Info extends { pid: number } = { url: string; pid: number }> {
  private nextId = 1;
  constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    readonly info: Info,
    readonly stderr: () => string,
  ) {}

  /** Asks a launcher (`gc` or `cpu`); only `bench/*-process.ts` launchers answer. */
  ask<T extends BenchAnswer['type']>(type: T): Promise<Extract<BenchAnswer, { type: T }>> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onMessage = (message: BenchAnswer) => {
        if (message?.type !== type || message.id !== id) return;
        clearTimeout(timer);
        this.child.off('message', onMessage);
        resolve(message as Extract<BenchAnswer, { type: T }>);
      };
      const timer = setTimeout(() => {
        this.child.off('message', onMessage);
        reject(new Error(`${this.name} did not answer ${type} within ${ASK_TIMEOUT_MS} ms`));
      }, ASK_TIMEOUT_MS);
      this.child.on('message', onMessage);
      this.child.send({ type, id } satisfies BenchQuestion);
    });
  }

  /** CPU time (user + system) the process has used so far, in ms, through IPC. */
  async cpuMs(): Promise<number> {
    const { cpu } = await this.ask('cpu');
    return (cpu.user + cpu.system) / 1000;
  }

  stop(): Promise<void> {
    return stopChild(this.child);
  }
}

export async function startParty<Info extends { pid: number } = { url: string; pid: number }>(
  name: string,
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { launcher?: boolean; preload?: readonly string[] } = {},
): Promise<Party<Info>> {
  const child = spawnTs(file, args, env, options.launcher ?? false, options.preload);
  const stderr = tail(child);
  try {
    const info = await firstJsonLine<Info>(child, name, START_TIMEOUT_MS, stderr);
    return new Party(name, child, info, stderr);
  } catch (error) {
    await stopChild(child);
    throw error;
  }
}

/**
 * Runs the load generator once. `beforeMeasure` runs between its warm-up and its measured phase
 * (the orchestrator reads CPU counters there); `afterMeasure` right after the report arrives.
 */
export async function runLoad(
  args: Record<string, string | number | undefined>,
  hooks: { beforeMeasure?: () => Promise<void>; afterMeasure?: () => Promise<void> } = {},
  timeoutMs = 180_000,
): Promise<LoadReport> {
  const argv = Object.entries(args).flatMap(([key, value]) => (value === undefined ? [] : [`--${key}`, String(value)]));
  const child = spawnTs('bench/load.ts', argv, childEnv(), false);
  const stderr = tail(child);
  child.on('message', (message: { type?: string }) => {
    if (message?.type !== 'ready') return;
    void (hooks.beforeMeasure?.() ?? Promise.resolve()).then(
      () => child.send({ type: 'go' }),
      () => child.kill('SIGKILL'),
    );
  });
  try {
    const report = await firstJsonLine<LoadReport>(child, 'load generator', timeoutMs, stderr);
    try {
      await hooks.afterMeasure?.();
    } finally {
      if (child.connected) child.send({ type: 'close' });
    }
    return report;
  } finally {
    // The generator closes its clients and exits by itself; this only bounds the wait.
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }
}

/** Stops every party still running (for the error paths). */
export async function stopAll(): Promise<void> {
  await Promise.all([...alive].map((child) => stopChild(child)));
}

let clockTicks: number | undefined;

/** CPU time of any process (user + system, ms) from /proc; undefined where /proc is not there. */
export function procCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ", field 3 (state) is index 0: utime is field 14, stime field 15.
    const ticks = Number(fields[11]) + Number(fields[12]);
    clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    return (ticks * 1000) / clockTicks;
  } catch {
    return undefined;
  }
}
