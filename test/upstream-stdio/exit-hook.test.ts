/**
 * When the gateway process ends without stopping its children:
 * - normally: the spawner's `process.on('exit')` hook SIGKILLs every live group (even a child deaf
 *   to SIGTERM, and its grandchild);
 * - by a crash (SIGKILL, no hook): the child is orphaned, and `reapOrphanGroup` with the record the
 *   supervisor keeps in its pid file (pid, pgid, `/proc` start time) finds and ends all of it, while
 *   a record whose pid now belongs to another process is left alone.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { processAlive, processGroupAlive, procStartTime, reapOrphanGroup } from '../../src/upstream/stdio/index.js';
import { cleanUp, newMarker, pidsWithMarker, TSX_LOADER, waitFor } from '../fixtures/stdio/index.js';

const HOST = fileURLToPath(new URL('../fixtures/stdio/exit-hook-host.ts', import.meta.url));
const markers: string[] = [];

interface HostRecord {
  pid: number;
  pgid: number;
  procStartTime: number;
  grandchild: number;
}

/** Runs the host to its end (exit or crash) and returns the record it printed. */
function runHost(marker: string, mode: 'exit' | 'crash'): Promise<HostRecord> {
  return new Promise((resolve, reject) => {
    const host = spawn(process.execPath, ['--import', TSX_LOADER, HOST, marker, mode], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    host.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    host.on('error', reject);
    host.on('close', () => {
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as HostRecord);
      } catch {
        reject(new Error(`the host printed no record: ${out}`));
      }
    });
  });
}

afterEach(async () => {
  expect(await cleanUp([], markers)).toEqual({});
});

describe('gateway exit', () => {
  it('kills every live child group when the gateway process exits', async () => {
    const marker = newMarker();
    markers.push(marker);
    const { pid, pgid, grandchild } = await runHost(marker, 'exit');
    expect(pid).toBeGreaterThan(1);
    expect(grandchild).toBeGreaterThan(1);
    expect(await waitFor(() => pidsWithMarker(marker).length === 0, 3000)).toBe(true);
    expect(processAlive(pid)).toBe(false);
    expect(processAlive(grandchild)).toBe(false);
    expect(processGroupAlive(pgid)).toBe(false);
  });

  it('reaps the orphans of a crashed gateway from their record', async () => {
    const marker = newMarker();
    markers.push(marker);
    const record = await runHost(marker, 'crash');
    // No hook ran: the child (deaf to SIGTERM) and its grandchild are orphans now.
    expect(processAlive(record.pid, record.procStartTime)).toBe(true);
    expect(processAlive(record.grandchild)).toBe(true);
    expect(pidsWithMarker(marker)).toHaveLength(2);

    const result = await reapOrphanGroup(record, 300);
    expect(result).toEqual({ found: 2, killed: true, survivors: 0 });
    expect(pidsWithMarker(marker)).toEqual([]);
    expect(await reapOrphanGroup(record, 300)).toMatchObject({ found: 0, skipped: 'gone' });
  });

  it('leaves alone a process that reused a recorded pid', async () => {
    const bystander = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    try {
      const pid = bystander.pid!;
      const wrong = { pid, pgid: pid, procStartTime: (procStartTime(pid) ?? 0) + 1 };
      expect(await reapOrphanGroup(wrong, 100)).toMatchObject({ found: 0, skipped: 'pid_reused' });
      expect(processAlive(pid)).toBe(true);
    } finally {
      bystander.kill('SIGKILL');
    }
  });
});
