/**
 * Reaping a child that a previous Gatehouse process left behind (it crashed, or was SIGKILLed, so
 * its exit hook never ran). The supervisor writes `liveStdioChildren()` to its pid file; on start it
 * reads the file back and hands each record here.
 *
 * A pid alone proves nothing (pids are reused), so a record is acted on only when it still
 * identifies our child or what is left of its group:
 * - the leader (`pid`) is alive with the recorded `/proc` start time: the group is ours;
 * - the leader is alive with another start time: the pid was reused; nothing is touched;
 * - the leader is gone but live processes remain in its process group (and its session, which our
 *   `setsid` made equal to the pgid): those are its leftovers. Linux does not hand out a pid that is
 *   still some group's id, so while they live the pgid cannot have been reused.
 */
import { listGroupPids, procAvailable, readProcStat, signalGroup } from './proc.js';

export interface OrphanRecord {
  pid: number;
  pgid: number;
  /** `/proc/<pid>/stat` field 22 at spawn; without it only the group test applies. */
  procStartTime?: number | undefined;
}

export interface OrphanReapResult {
  /** Live processes found that belonged to the record. */
  found: number;
  /** SIGKILL was needed. */
  killed: boolean;
  /** Still alive after the SIGKILL wait (normally 0). */
  survivors: number;
  /** Why nothing was done, when nothing was. */
  skipped?: 'gone' | 'pid_reused' | 'no_proc';
}

const POLL_MS = 20;
const KILL_WAIT_MS = 3000;

/** The live members of the record's group that are ours (see the module comment). */
function ours(record: OrphanRecord): number[] | 'pid_reused' {
  const leader = readProcStat(record.pid);
  const leaderLive = leader !== undefined && leader.state !== 'Z' && leader.state !== 'X';
  if (leaderLive && record.procStartTime !== undefined && leader.startTime !== record.procStartTime) {
    return 'pid_reused';
  }
  return listGroupPids(record.pgid).filter((pid) => readProcStat(pid)?.session === record.pgid);
}

/** SIGTERM to the orphaned group, SIGKILL after `graceMs`; resolves when nothing of it is left. */
export async function reapOrphanGroup(record: OrphanRecord, graceMs = 5000): Promise<OrphanReapResult> {
  if (!procAvailable()) return { found: 0, killed: false, survivors: 0, skipped: 'no_proc' };
  const members = ours(record);
  if (members === 'pid_reused') return { found: 0, killed: false, survivors: 0, skipped: 'pid_reused' };
  if (members.length === 0) return { found: 0, killed: false, survivors: 0, skipped: 'gone' };
  signalGroup(record.pgid, 'SIGTERM');
  let left = await waitGone(record, graceMs);
  let killed = false;
  if (left > 0) {
    killed = true;
    signalGroup(record.pgid, 'SIGKILL');
    left = await waitGone(record, KILL_WAIT_MS);
  }
  return { found: members.length, killed, survivors: left };
}

/** Waits until no live member of the record's group is left, or `ms` passed; returns how many are. */
async function waitGone(record: OrphanRecord, ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  const count = () => {
    const members = ours(record);
    return members === 'pid_reused' ? 0 : members.length;
  };
  let left = count();
  while (left > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    left = count();
  }
  return left;
}
