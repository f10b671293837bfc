/**
 * What `/proc` says about processes and process groups (Linux). The spawner records each child's
 * start time so a pid found later (in a pid file, after a gateway crash) can be told apart from an
 * unrelated process that reused it; the reaper lists a group's live members to know when a stop is
 * complete.
 *
 * Zombies count as gone: they hold no resources but a pid, and where PID 1 does not reap orphans
 * (containers without an init) killed grandchildren stay zombies for ever.
 *
 * Without `/proc` (macOS, BSD) the functions fall back to `kill(pid, 0)`, which cannot see start
 * times or group members; `procAvailable` says which world we are in.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcStat {
  pid: number;
  /** Parent pid (field 4). */
  ppid: number;
  /** Process group id (field 5). */
  pgrp: number;
  /** Session id (field 6). */
  session: number;
  /** One-letter state (field 3): R, S, D, Z, T, … */
  state: string;
  /** Start time after boot, in clock ticks (field 22): with the pid, a process's identity. */
  startTime: number;
}

let procChecked: boolean | undefined;

/** Whether `/proc/<pid>/stat` can be read here. */
export function procAvailable(): boolean {
  if (procChecked === undefined) {
    try {
      readFileSync('/proc/self/stat', 'utf8');
      procChecked = true;
    } catch {
      procChecked = false;
    }
  }
  return procChecked;
}

/**
 * Parses one `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may itself
 * contain spaces and parentheses, so fields are counted from the last `)`.
 */
export function parseProcStat(line: string): ProcStat | undefined {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  const pid = Number(line.slice(0, open).trim());
  // rest[0] is field 3 (state); field n is rest[n - 3].
  const rest = line
    .slice(close + 2)
    .trim()
    .split(' ');
  const field = (n: number) => Number(rest[n - 3]);
  const stat: ProcStat = {
    pid,
    state: rest[0] ?? '?',
    ppid: field(4),
    pgrp: field(5),
    session: field(6),
    startTime: field(22),
  };
  return Number.isInteger(stat.pid) && Number.isFinite(stat.startTime) ? stat : undefined;
}

/** The stat of one process, or undefined when it does not exist (or `/proc` is not there). */
export function readProcStat(pid: number): ProcStat | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** A process's start time (clock ticks after boot, `/proc/<pid>/stat` field 22). */
export function procStartTime(pid: number): number | undefined {
  return readProcStat(pid)?.startTime;
}

const isLive = (stat: ProcStat | undefined): stat is ProcStat =>
  stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';

function allStats(): ProcStat[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const stats: ProcStat[] = [];
  for (const name of names) {
    const first = name.charCodeAt(0);
    if (first < 48 || first > 57) continue;
    const stat = readProcStat(Number(name));
    if (stat) stats.push(stat);
  }
  return stats;
}

/** Whether a process is alive (not a zombie); with `startTime`, whether it is still that same process. */
export function processAlive(pid: number, startTime?: number): boolean {
  if (!procAvailable()) {
    if (startTime !== undefined) return false;
    return signalReaches(pid);
  }
  const stat = readProcStat(pid);
  return isLive(stat) && (startTime === undefined || stat.startTime === startTime);
}

/** The live (non-zombie) pids whose process group is `pgid`. */
export function listGroupPids(pgid: number): number[] {
  if (!procAvailable()) return signalReaches(-pgid) ? [pgid] : [];
  return allStats()
    .filter((s) => s.pgrp === pgid && isLive(s))
    .map((s) => s.pid);
}

/** Whether any live process is left in the process group `pgid`. */
export function processGroupAlive(pgid: number): boolean {
  return listGroupPids(pgid).length > 0;
}

/**
 * Every live descendant of `pid` (children, their children, …), whatever their process group: a
 * descendant that left the group (`setsid`, `setpgid`) is still found while its ancestors live.
 */
export function descendantsOf(pid: number): ProcStat[] {
  if (!procAvailable()) return [];
  const byParent = new Map<number, ProcStat[]>();
  for (const stat of allStats()) {
    if (!isLive(stat)) continue;
    const siblings = byParent.get(stat.ppid);
    if (siblings) siblings.push(stat);
    else byParent.set(stat.ppid, [stat]);
  }
  const out: ProcStat[] = [];
  const seen = new Set<number>([pid]);
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of byParent.get(next) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.add(child.pid);
      out.push(child);
      queue.push(child.pid);
    }
  }
  return out;
}

/** The pids of `descendantsOf(pid)`. */
export function listDescendants(pid: number): number[] {
  return descendantsOf(pid).map((s) => s.pid);
}

/** `kill(target, 0)`: true when the target exists (EPERM: it exists, not ours). */
function signalReaches(target: number): boolean {
  try {
    process.kill(target, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Sends a signal to a whole process group; false when the group is already gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Sends a signal to one process; false when it is already gone. */
export function signalProcess(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * A process's pid in each PID namespace it belongs to, outermost first (`NSpid:` of
 * `/proc/<pid>/status`); one entry outside any nested namespace. Undefined when it cannot be read.
 */
export function namespacePids(pid: number): number[] | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('NSpid:'));
    return line?.slice(6).trim().split(/\s+/).map(Number);
  } catch {
    return undefined;
  }
}
