/**
 * The supervisor's pid file: which stdio children this gateway process has running, so that a later
 * gateway can reap them if this one dies without stopping them (SIGKILL, OOM, power cut of the
 * process — the spawner's exit hook only covers a normal exit).
 *
 * One file per gateway process, `<dataDir>/stdio-children/<pid>.json`, holding the owner's pid and
 * `/proc` start time and each live child's pid, pgid and start time. Several gateway processes may
 * share a data folder (replicas on one host, tests): a file whose owner is still alive (same pid,
 * same start time) is never touched; any other file is an orphan record whose groups are reaped with
 * `reapOrphanGroup` (which checks each child's start time, so a reused pid is left alone), and then
 * removed. Writes are atomic (a temporary file renamed over the old one).
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type LiveChildRecord,
  type OrphanReapResult,
  processAlive,
  procStartTime,
  reapOrphanGroup,
} from '../upstream/stdio/index.js';

export const PID_DIR = 'stdio-children';

interface PidFileContent {
  owner: { pid: number; procStartTime: number | undefined };
  children: Array<{ label: string; pid: number; pgid: number; procStartTime: number | undefined; startedAt: string }>;
}

export interface OrphanReport {
  /** The dead gateway process the record belonged to. */
  ownerPid: number;
  label: string;
  pid: number;
  result: OrphanReapResult;
}

export class PidFile {
  private readonly dir: string;
  private readonly path: string;
  private readonly owner = { pid: process.pid, procStartTime: procStartTime(process.pid) };

  constructor(dataDir: string) {
    this.dir = join(dataDir, PID_DIR);
    this.path = join(this.dir, `${process.pid}.json`);
  }

  /** Records the children now alive (an empty list removes the file). */
  write(children: readonly LiveChildRecord[]): void {
    if (children.length === 0) {
      this.remove();
      return;
    }
    const content: PidFileContent = {
      owner: this.owner,
      children: children.map((c) => ({
        label: c.label,
        pid: c.pid,
        pgid: c.pgid,
        procStartTime: c.procStartTime,
        startedAt: c.startedAt.toISOString(),
      })),
    };
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const temporary = `${this.path}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(content)}\n`, { mode: 0o600 });
    renameSync(temporary, this.path);
  }

  remove(): void {
    rmSync(this.path, { force: true });
  }

  /** Reaps the children recorded by gateway processes that are gone, then drops their files. */
  async reapOrphans(graceMs: number): Promise<OrphanReport[]> {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const reports: OrphanReport[] = [];
    for (const name of names) {
      const file = join(this.dir, name);
      if (name.endsWith('.tmp')) {
        // A write cut short; the finished file next to it (if any) says the same.
        if (!this.ownerAlive(Number(name.split('.')[0]), undefined)) rmSync(file, { force: true });
        continue;
      }
      if (!name.endsWith('.json')) continue;
      let content: PidFileContent;
      try {
        content = JSON.parse(readFileSync(file, 'utf8')) as PidFileContent;
      } catch {
        rmSync(file, { force: true });
        continue;
      }
      if (content.owner.pid === process.pid || this.ownerAlive(content.owner.pid, content.owner.procStartTime))
        continue;
      const results = await Promise.all(
        (content.children ?? []).map(async (child) => ({
          ownerPid: content.owner.pid,
          label: child.label,
          pid: child.pid,
          result: await reapOrphanGroup(
            { pid: child.pid, pgid: child.pgid, procStartTime: child.procStartTime },
            graceMs,
          ),
        })),
      );
      reports.push(...results);
      rmSync(file, { force: true });
    }
    return reports;
  }

  private ownerAlive(pid: number, startTime: number | undefined): boolean {
    if (!Number.isInteger(pid) || pid <= 0) return false;
    return processAlive(pid, startTime);
  }
}
