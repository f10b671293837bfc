/**
 * A gateway that dies without stopping its children (SIGKILL: no shutdown, no exit hook) leaves them
 * orphaned, re-parented away from it. The next gateway on the same data folder finds them through the
 * supervisor's pid file — pid, process group and `/proc` start time of each child — and reaps the
 * whole group (grandchild included, even deaf to SIGTERM), then starts the server afresh. A pid file
 * whose owner is still alive (another gateway process on the same folder) is left alone, and so is a
 * recorded pid that now belongs to another process.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { PID_DIR, PidFile } from '../../src/supervisor/pidfile.js';
import { processAlive, procStartTime } from '../../src/upstream/stdio/index.js';
import { cleanUp, newMarker, pidsWithMarker, TSX_LOADER, waitFor } from '../fixtures/stdio/index.js';

const HOST = fileURLToPath(new URL('../fixtures/stdio/gateway-host.ts', import.meta.url));
const markers: string[] = [];
const folders: string[] = [];
const gateways: Gateway[] = [];

afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.app.close()));
  expect(await cleanUp([], markers)).toEqual({});
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function tempFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), 'gatehouse-orphans-'));
  folders.push(folder);
  return folder;
}

/** Runs the gateway host until it kills itself; returns what it printed. */
function runCrashingGateway(
  dataDir: string,
  marker: string,
): Promise<{ pid: number; grandchild: number; hostPid: number }> {
  return new Promise((resolve, reject) => {
    const host = spawn(process.execPath, ['--import', TSX_LOADER, HOST, dataDir, marker], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    host.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    host.on('error', reject);
    host.on('close', (_code, signal) => {
      try {
        expect(signal).toBe('SIGKILL');
        resolve(JSON.parse(out.trim().split('\n').pop() ?? ''));
      } catch (error) {
        reject(new Error(`the gateway host printed no record (${String(error)}): ${out}`));
      }
    });
  });
}

async function openGateway(dataDir: string): Promise<Gateway> {
  const config = loadConfig({
    env: {
      NODE_ENV: 'test',
      GATEHOUSE_DATA_DIR: dataDir,
      GATEHOUSE_SECRET_KEY: 'a1'.repeat(32),
      GATEHOUSE_LOG_LEVEL: 'silent',
      GATEHOUSE_STDIO_GRACE_MS: '300',
      GATEHOUSE_LIST_TIMEOUT_MS: '20000',
      // Unsandboxed on purpose: a sandboxed child dies with its gateway, so there would be no orphan to reap.
      GATEHOUSE_STDIO_SANDBOX: 'off',
    },
  });
  const gateway = await createGateway(config);
  gateways.push(gateway);
  return gateway;
}

/** A process in its own group and session, as the spawner makes them, carrying the marker. */
function groupLeader(marker: string): number {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)', '--', marker], {
    detached: true,
    stdio: 'ignore',
  });
  child.unref();
  return child.pid as number;
}

describe('orphans of a crashed gateway', () => {
  it('the next gateway on the same data folder reaps them (grandchild included) and starts the server afresh', {
    timeout: 120_000,
  }, async () => {
    const dataDir = tempFolder();
    const marker = newMarker();
    markers.push(marker);
    const orphan = await runCrashingGateway(dataDir, marker);
    // The gateway is gone; its child (deaf to SIGTERM) and grandchild live on.
    expect(processAlive(orphan.hostPid)).toBe(false);
    expect(processAlive(orphan.pid)).toBe(true);
    expect(processAlive(orphan.grandchild)).toBe(true);
    expect(readdirSync(join(dataDir, PID_DIR))).toEqual([`${orphan.hostPid}.json`]);

    const gateway = await openGateway(dataDir);
    // Reaped during start-up, before the gateway answers anything.
    expect(processAlive(orphan.pid)).toBe(false);
    expect(processAlive(orphan.grandchild)).toBe(false);
    expect(readdirSync(join(dataDir, PID_DIR))).not.toContain(`${orphan.hostPid}.json`);
    const logs = await gateway.registry.logs('orphan', 100);
    await expect
      .poll(async () =>
        (await gateway.registry.logs('orphan', 100)).some((e) => e.message.startsWith('Reaped an orphaned process')),
      )
      .toBe(true);
    expect(logs).toBeDefined();

    // Enabled and not lazy: it starts again at boot, as a new child recorded in this process's pid file.
    expect(await waitFor(() => gateway.supervisor.stateOf('orphan') === 'running', 30_000)).toBe(true);
    const fresh = gateway.supervisor.view('orphan');
    expect(fresh.pid).not.toBe(orphan.pid);
    expect(readdirSync(join(dataDir, PID_DIR))).toEqual([`${process.pid}.json`]);

    await gateway.app.close();
    gateways.splice(0);
    expect(await waitFor(() => pidsWithMarker(marker).length === 0, 5000)).toBe(true);
    // A clean shutdown leaves no pid file behind.
    expect(readdirSync(join(dataDir, PID_DIR))).toEqual([]);
  });

  it('leaves alone the children of a gateway process that is still alive, and reaps those of a dead one', async () => {
    const dataDir = tempFolder();
    const marker = newMarker();
    markers.push(marker);
    const kept = groupLeader(marker);
    const reaped = groupLeader(marker);
    expect(await waitFor(() => procStartTime(kept) !== undefined && procStartTime(reaped) !== undefined, 5000)).toBe(
      true,
    );
    // A dead owner: a process that has come and gone.
    const dead = spawn(process.execPath, ['-e', '']);
    const deadPid = dead.pid as number;
    await new Promise((resolve) => dead.once('exit', resolve));

    const dir = join(dataDir, PID_DIR);
    mkdirSync(dir, { recursive: true });
    const record = (pid: number) => ({
      label: 'x',
      pid,
      pgid: pid,
      procStartTime: procStartTime(pid),
      startedAt: new Date().toISOString(),
    });
    const live = { pid: process.ppid, procStartTime: procStartTime(process.ppid) };
    writeFileSync(join(dir, `${live.pid}.json`), JSON.stringify({ owner: live, children: [record(kept)] }));
    writeFileSync(
      join(dir, `${deadPid}.json`),
      JSON.stringify({ owner: { pid: deadPid, procStartTime: 1 }, children: [record(reaped)] }),
    );

    const reports = await new PidFile(dataDir).reapOrphans(300);
    expect(reports.map((r) => r.pid)).toEqual([reaped]);
    expect(reports[0]?.result.found).toBe(1);
    expect(processAlive(reaped)).toBe(false);
    expect(processAlive(kept)).toBe(true);
    expect(readdirSync(dir)).toEqual([`${live.pid}.json`]);
    process.kill(kept, 'SIGKILL'); // ours to end: it was kept on purpose
  });

  it('does not touch a process that reused a recorded pid', async () => {
    const dataDir = tempFolder();
    const marker = newMarker();
    markers.push(marker);
    const bystander = groupLeader(marker);
    expect(await waitFor(() => procStartTime(bystander) !== undefined, 5000)).toBe(true);
    const dir = join(dataDir, PID_DIR);
    mkdirSync(dir, { recursive: true });
    // Recorded with another start time: the pid was reused by an unrelated process.
    const stale = {
      label: 'x',
      pid: bystander,
      pgid: bystander,
      procStartTime: (procStartTime(bystander) ?? 0) - 1,
      startedAt: '',
    };
    writeFileSync(
      join(dir, '999999999.json'),
      JSON.stringify({ owner: { pid: 999_999_999, procStartTime: 1 }, children: [stale] }),
    );
    const reports = await new PidFile(dataDir).reapOrphans(300);
    expect(reports[0]?.result.skipped).toBe('pid_reused');
    expect(processAlive(bystander)).toBe(true);
    process.kill(bystander, 'SIGKILL'); // ours to end: it was spared on purpose
  });
});
