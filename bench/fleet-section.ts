/**
 * Section `fleet` (issue 20): 1, 2 and 3 gateway replicas on one PostgreSQL behind HAProxy
 * (round-robin), each replica pinned to a core with `taskset` where it exists: calls/s and the
 * replicas' CPU per call at c=16 in both eras (on a 2-core machine this shows contention, not
 * scaling), and what the shared session store adds to a 2025 agent's latency at c=1: the same build
 * on the same PostgreSQL and core, with the store (`r1`) and without it (`BENCH_SHARED_SESSIONS=off`),
 * called directly in interleaved rounds, so drift in the machine's load falls on both alike; the
 * figure is the median of the rounds' p50 differences. Besides, indicative only: the agent through
 * the balancer over 3 replicas (every request on another replica) against 1.
 *
 * Needs PostgreSQL (`BENCH_DATABASE_URL`, default the tests' `postgres://postgres@127.0.0.1:5432/test`;
 * a fresh schema, dropped afterwards) and `/usr/sbin/haproxy`; says so and measures nothing without them.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { DURATION_MS, noteLoad, takeLoadSamples } from './cells.js';
import { childEnv, type Party, runLoad, startParty, UPSTREAM_PRELOAD } from './children.js';
import { loadLine, machineLine, num, renderTable, verdict } from './table.js';

const HAPROXY = '/usr/sbin/haproxy';
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ERAS = ['modern', 'legacy'] as const;
const SESSION_TARGET_MS = 0.5;
/** Rounds of the on/off comparison (each measures both, in alternating order). */
const SESSION_ROUNDS = Number(process.env.BENCH_FLEET_SESSION_ROUNDS ?? 6);

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length === 0
    ? Number.NaN
    : sorted.length % 2
      ? (sorted[mid] as number)
      : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Pins every thread of `pid` to `core` (no-op without taskset). */
function pin(pid: number, core: number): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(core), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function rest(url: string, admin: string, method: string, route: string, body?: unknown) {
  const response = await fetch(`${url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${admin}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route}: HTTP ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

interface FleetCell {
  replicas: number;
  era: string;
  c: number;
  callsPerS: number;
  p50Ms: number;
  errors: number;
  cpuMsPerCall: number | undefined;
}

export async function fleetSection(): Promise<string> {
  const machine = machineLine();
  takeLoadSamples();
  if (!existsSync(HAPROXY)) return `## fleet\n\nSkipped: ${HAPROXY} is missing (Debian package haproxy).\n`;
  const schema = `gh_bench_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 3_000 });
  try {
    await admin.connect();
    await admin.query(`create schema ${schema}`);
  } catch (error) {
    await admin.end().catch(() => {});
    return `## fleet\n\nSkipped: PostgreSQL at ${DATABASE_URL} is unreachable (${(error as Error).message}).\n`;
  }
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const adminToken = `gh_bench_${randomBytes(24).toString('hex')}`;
  const secretKey = randomBytes(32).toString('hex');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-bench-fleet-'));
  const parties: Party[] = [];
  let haproxy: ChildProcess | undefined;
  const cells: FleetCell[] = [];
  const sessionP50: Record<number, number> = {};
  const isolated = { on: [] as number[], off: [] as number[], diff: [] as number[] };
  let pinned = false;
  try {
    process.stderr.write('fleet: starting upstreams and three replicas on PostgreSQL\n');
    const upstreams = {
      modern: await startParty('modern upstream', 'test/fixtures/upstream-process.ts', ['modern'], childEnv(), {
        preload: UPSTREAM_PRELOAD,
      }),
      legacy: await startParty('legacy upstream', 'test/fixtures/upstream-process.ts', ['legacy'], childEnv(), {
        preload: UPSTREAM_PRELOAD,
      }),
    };
    parties.push(upstreams.modern, upstreams.legacy);
    // Started together (the migrations run once, under their lock), then pinned one core each. The
    // fourth is `r1`'s twin without the shared session store, on `r1`'s core, outside the balancer.
    const started: Party[] = await Promise.all(
      [1, 2, 3, 4].map((n) =>
        startParty(
          n === 4 ? 'replica 1 without shared sessions' : `replica ${n}`,
          'bench/gateway-process.ts',
          [],
          childEnv({
            GATEHOUSE_DATA_DIR: path.join(dataDir, `r${n}`),
            GATEHOUSE_DATABASE_URL: url.toString(),
            GATEHOUSE_SECRET_KEY: secretKey,
            GATEHOUSE_ADMIN_TOKEN: adminToken,
            GATEHOUSE_ALLOW_PRIVATE_NETWORKS: 'true',
            GATEHOUSE_LOG_LEVEL: 'warn',
            GATEHOUSE_DRAIN_S: '0',
            ...(n === 4 ? { BENCH_SHARED_SESSIONS: 'off' } : {}),
          }),
          { launcher: true },
        ),
      ),
    );
    parties.push(...started);
    const replicas = started.slice(0, 3);
    const unshared = started[3] as Party;
    started.forEach((party, i) => {
      pinned = pin(party.info.pid, (i % 3) % Math.max(1, os.cpus().length)) || pinned;
    });
    const first = (replicas[0] as Party).info.url;
    for (const era of ERAS) {
      await rest(first, adminToken, 'POST', '/api/mcp/install', { url: upstreams[era].info.url, id: `bench-${era}` });
      await rest(first, adminToken, 'PATCH', `/api/mcp/servers/bench-${era}/tools`, { allow: ['echo'] });
      const test = await rest(first, adminToken, 'POST', `/api/mcp/servers/bench-${era}/test`);
      if (test.ok !== true) throw new Error(`handshake of bench-${era} failed`);
    }
    const token = (await rest(first, adminToken, 'POST', '/api/tokens', {
      role: 'agent',
      name: 'bench-fleet',
      rateLimit: 1_000_000,
    })) as { token: string };

    const front = await freePort();
    const startBalancer = async (count: number) => {
      if (haproxy) {
        haproxy.kill('SIGKILL');
        await new Promise((resolve) => haproxy?.once('exit', resolve));
      }
      const cfg = path.join(dataDir, `haproxy-${count}.cfg`);
      writeFileSync(
        cfg,
        [
          'defaults',
          '  mode http',
          '  timeout connect 5s',
          '  timeout client 120s',
          '  timeout server 120s',
          '  timeout http-keep-alive 120s',
          'frontend fleet',
          `  bind 127.0.0.1:${front}`,
          '  default_backend replicas',
          'backend replicas',
          '  balance roundrobin',
          ...replicas.slice(0, count).map((r, i) => `  server r${i + 1} ${new URL(r.info.url).host}`),
          '',
        ].join('\n'),
      );
      haproxy = spawn(HAPROXY, ['-f', cfg, '-db'], { stdio: 'ignore' });
      // Ready when it answers.
      for (let i = 0; i < 100; i++) {
        try {
          await (await fetch(`http://127.0.0.1:${front}/healthz`)).arrayBuffer();
          return;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      throw new Error('haproxy did not start');
    };

    const cell = async (count: number, era: string, c: number): Promise<FleetCell> => {
      noteLoad();
      const used = replicas.slice(0, count);
      let before = 0;
      let after = 0;
      process.stderr.write(`  ${count} replica(s) ${era} c=${c} … `);
      const report = await runLoad(
        {
          mode: 'sdk',
          url: `http://127.0.0.1:${front}/mcp`,
          era,
          concurrency: c,
          token: token.token,
          tool: `bench-${era}__echo`,
          'duration-ms': c === 1 ? Math.round(DURATION_MS / 2) : DURATION_MS,
          'warmup-ms': 1_000,
        },
        {
          beforeMeasure: async () => {
            before = (await Promise.all(used.map((r) => r.cpuMs()))).reduce((a, b) => a + b, 0);
          },
          afterMeasure: async () => {
            after = (await Promise.all(used.map((r) => r.cpuMs()))).reduce((a, b) => a + b, 0);
          },
        },
      );
      process.stderr.write(`${num(report.callsPerS, 0)} calls/s, p50 ${num(report.p50Ms, 2)} ms\n`);
      return {
        replicas: count,
        era,
        c,
        callsPerS: report.callsPerS,
        p50Ms: report.p50Ms,
        errors: report.errors,
        cpuMsPerCall: report.calls > 0 ? (after - before) / report.calls : undefined,
      };
    };

    // The shared session store's own cost: r1 (store on) and its twin (off), directly, interleaved.
    const sessionP50Of = async (target: Party): Promise<number> => {
      noteLoad();
      const report = await runLoad({
        mode: 'sdk',
        url: `${target.info.url}/mcp`,
        era: 'legacy',
        concurrency: 1,
        token: token.token,
        tool: 'bench-legacy__echo',
        'duration-ms': Math.round(DURATION_MS / 2),
        'warmup-ms': 1_000,
      });
      if (report.errors > 0) throw new Error(`session store comparison: ${report.errors} errors`);
      return report.p50Ms;
    };
    // r1 served the set-up's requests and its twin none: one unmeasured run each warms both alike (JIT, pools).
    if (SESSION_ROUNDS > 0) for (const target of [replicas[0] as Party, unshared]) await sessionP50Of(target);
    for (let round = 0; round < SESSION_ROUNDS; round++) {
      const order = round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const);
      const p50 = { on: 0, off: 0 };
      for (const which of order) p50[which] = await sessionP50Of(which === 'on' ? (replicas[0] as Party) : unshared);
      isolated.on.push(p50.on);
      isolated.off.push(p50.off);
      isolated.diff.push(p50.on - p50.off);
      process.stderr.write(
        `  session store round ${round + 1}: on ${num(p50.on, 3)} ms, off ${num(p50.off, 3)} ms (load ${os.loadavg()[0]?.toFixed(2)})\n`,
      );
    }

    for (const count of [1, 2, 3]) {
      await startBalancer(count);
      for (const era of ERAS) cells.push(await cell(count, era, 16));
      if (count === 1 || count === 3) sessionP50[count] = (await cell(count, 'legacy', 1)).p50Ms;
    }
  } finally {
    if (haproxy && haproxy.exitCode === null) haproxy.kill('SIGKILL');
    await Promise.all(parties.map((p) => p.stop().catch(() => {})));
    await admin.query(`drop schema if exists ${schema} cascade`).catch(() => {});
    await admin.end().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
  const load = takeLoadSamples();
  const added = (sessionP50[3] ?? Number.NaN) - (sessionP50[1] ?? Number.NaN);
  const storeAdded = median(isolated.diff);
  const table = renderTable(
    [
      { title: 'replicas' },
      { title: 'era' },
      { title: 'c', align: 'right' },
      { title: 'calls/s', align: 'right' },
      { title: 'p50 ms', align: 'right' },
      { title: 'replicas CPU ms/call', align: 'right' },
      { title: 'errors', align: 'right' },
    ],
    cells.map((c) => [
      String(c.replicas),
      c.era === 'modern' ? '2026-07-28' : '2025 (sessions)',
      String(c.c),
      num(c.callsPerS, 0),
      num(c.p50Ms, 2),
      num(c.cpuMsPerCall, 3),
      String(c.errors),
    ]),
  );
  return [
    '## fleet: replicas on one PostgreSQL behind HAProxy (round-robin)',
    '',
    machine,
    loadLine(load),
    `Replicas pinned to cores with taskset: ${pinned ? 'yes' : 'no'} (on 2 cores, more replicas share the same CPU: contention, not scaling).`,
    '',
    table,
    '',
    `Shared session store, 2025 agent at c=1 on one replica, store on vs off (same build, PostgreSQL and core), ${isolated.diff.length} interleaved rounds: median p50 ${num(median(isolated.on), 3)} ms vs ${num(median(isolated.off), 3)} ms; added p50 (median of the rounds' differences) ${num(storeAdded, 3)} ms, rounds ${isolated.diff.map((d) => num(d, 3)).join(', ')} — target ≤ ${SESSION_TARGET_MS} ms: ${verdict(storeAdded <= SESSION_TARGET_MS)}`,
    `Indicative only (adds the spread over replicas sharing the cores): the same agent through the balancer over 3 replicas (every request on another replica) vs 1: p50 ${num(sessionP50[3], 2)} ms vs ${num(sessionP50[1], 2)} ms, ${num(added, 2)} ms more.`,
  ].join('\n');
}
