/**
 * Section `stdio` (issue 6): the same stdio MCP server (`test/fixtures/stdio/plain-server.mjs`, SDK,
 * tool `echo`) exposed over Streamable HTTP by three gateways, each in its own process, measured by
 * the same load generator and the same first-call probe:
 *
 * - Gatehouse: `gatehouse serve` (`bench/gateway-process.ts`), the server installed as a stdio
 *   record, started under the supervisor, called as an agent at `/mcp/s/{server}` (allow verdict,
 *   audit on);
 * - supergateway (`--outputTransport streamableHttp --stateful`: its faster mode; the stateless one
 *   spawns a process per request);
 * - mcp-proxy (`--server stream`, its default sessionful mode).
 *
 * The peers come from the npm registry through `bench/package.json` (`npm install --prefix bench`).
 * Cells: 2025 era (sessions) and 2026-07-28 era, c = 1 and 16: calls/s, p50/p99, the gateway
 * process's CPU per call. Then a new client's first call (connect + first tools/call, 20 in a row,
 * while the server runs), and each gateway process's peak RSS (VmHWM) with the most stdio processes
 * seen under it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../test/fixtures/http.js';
import { DURATION_MS, noteLoad, takeLoadSamples, WARMUP_MS } from './cells.js';
import { BENCH_DIR, childEnv, procCpuMs, REPO_DIR, runLoad, startParty } from './children.js';
import type { LoadReport } from './load.js';
import type { FirstCallReport } from './stdio-first-call.js';
import { loadLine, machineLine, num, ratio, renderTable, verdict } from './table.js';

const PLAIN_SERVER = path.join(REPO_DIR, 'test/fixtures/stdio/plain-server.mjs');
/** The fixture's packages: the repository's node_modules and, when it is a link, where it points. */
export const FIXTURE_MODULES = [
  ...new Set([path.join(REPO_DIR, 'node_modules'), realpathSync(path.join(REPO_DIR, 'node_modules'))]),
];
const ERAS = [
  { era: 'legacy', label: '2025 (sessions)' },
  { era: 'modern', label: '2026-07-28' },
] as const;
const CONCURRENCY = [1, 16] as const;
const FIRST_CALLS = 20;
const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 5_000;
const LOG_LEVEL = 'warn';

interface Subject {
  name: string;
  url: string;
  pid: number;
  token?: string | undefined;
  stop(): Promise<void>;
}

interface Row {
  subject: string;
  era: string;
  c: number;
  report?: LoadReport;
  gatewayCpuMsPerCall?: number | undefined;
  failure?: string;
}

interface FirstCallRow {
  subject: string;
  era: string;
  report?: FirstCallReport;
  failure?: string;
}

interface MemoryRow {
  subject: string;
  peakRssKb: number | undefined;
  maxStdioProcesses: number;
  maxStdioRssKb: number;
}

// ---- processes of the peers: own process groups, always ended ----

const groups = new Set<number>();
process.on('exit', () => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {}
  }
});

function spawnGroup(name: string, args: string[]): { child: ChildProcess; stderr: () => string } {
  const child = spawn(process.execPath, args, {
    cwd: REPO_DIR,
    env: childEnv(),
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid) groups.add(child.pid);
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    if (lines.length > 40) lines.splice(0, lines.length - 40);
    if (process.env.BENCH_VERBOSE) process.stderr.write(`  [${name}] ${chunk}`);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, stderr: () => lines.join('\n') };
}

async function stopGroup(child: ChildProcess): Promise<void> {
  const pgid = child.pid;
  if (!pgid) return;
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  try {
    process.kill(-pgid, 'SIGTERM');
  } catch {}
  const timer = setTimeout(() => {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {}
  }, STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
  // What the gateway started in its group goes with it.
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {}
  groups.delete(pgid);
}

/** Waits until an MCP `initialize` on `url` answers 200 (the peer is listening and its server is up). */
async function waitReady(name: string, url: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = '';
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited early:\n${stderr()}`);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
        }),
        signal: AbortSignal.timeout(5_000),
      });
      await response.text();
      if (response.ok) return;
      last = `HTTP ${response.status}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${name} was not ready within ${READY_TIMEOUT_MS} ms (${last}):\n${stderr()}`);
}

function peerBin(pkg: string, relative: string): string {
  const file = path.join(BENCH_DIR, 'node_modules', pkg, relative);
  if (!existsSync(file)) {
    throw new Error(`${pkg} is not installed: run \`npm install --prefix bench\` (bench/package.json)`);
  }
  return file;
}

async function startSupergateway(): Promise<Subject> {
  const port = await freePort();
  const bin = peerBin('supergateway', 'dist/index.js');
  const { child, stderr } = spawnGroup('supergateway', [
    bin,
    '--stdio',
    `${process.execPath} ${PLAIN_SERVER}`,
    '--outputTransport',
    'streamableHttp',
    '--stateful',
    '--port',
    String(port),
    '--logLevel',
    'none',
  ]);
  const url = `http://127.0.0.1:${port}/mcp`;
  await waitReady('supergateway', url, child, stderr);
  return { name: 'supergateway', url, pid: child.pid as number, stop: () => stopGroup(child) };
}

async function startMcpProxy(): Promise<Subject> {
  const port = await freePort();
  const bin = peerBin('mcp-proxy', 'dist/bin/mcp-proxy.mjs');
  const { child, stderr } = spawnGroup('mcp-proxy', [
    bin,
    '--port',
    String(port),
    '--host',
    '127.0.0.1',
    '--server',
    'stream',
    '--',
    process.execPath,
    PLAIN_SERVER,
  ]);
  const url = `http://127.0.0.1:${port}/mcp`;
  await waitReady('mcp-proxy', url, child, stderr);
  return { name: 'mcp-proxy', url, pid: child.pid as number, stop: () => stopGroup(child) };
}

async function startGatehouse(): Promise<Subject> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-bench-stdio-'));
  const admin = `gh_bench_${randomBytes(24).toString('hex')}`;
  const party = await startParty(
    'gatehouse',
    'bench/gateway-process.ts',
    [],
    childEnv({
      GATEHOUSE_DATA_DIR: dataDir,
      GATEHOUSE_ADMIN_TOKEN: admin,
      GATEHOUSE_LOG_LEVEL: LOG_LEVEL,
      BENCH_REMOVE_DATA_DIR: '1',
    }),
    { launcher: true },
  );
  const base = party.info.url;
  const rest = async <T>(method: string, route: string, body?: unknown): Promise<T> => {
    const response = await fetch(`${base}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${admin}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${route}: HTTP ${response.status} ${text.slice(0, 500)}`);
    return JSON.parse(text) as T;
  };
  try {
    await rest('POST', '/api/mcp/install', {
      manifest: {
        id: 'bench-stdio',
        name: 'bench stdio',
        transport: 'stdio',
        command: process.execPath,
        args: [PLAIN_SERVER],
        toolPolicy: { allow: ['echo'] },
        // Sandboxed by default: it must see the packages it imports (the working tree is not mounted).
        sandbox: { readOnlyPaths: FIXTURE_MODULES },
      },
    });
    const started = await rest<{ process: { state: string } }>('POST', '/api/mcp/servers/bench-stdio/start');
    if (started.process.state !== 'running') throw new Error(`the stdio server is ${started.process.state}`);
    const detail = await rest<{ discoveredToolsCount: number }>('GET', '/api/mcp/servers/bench-stdio');
    if (detail.discoveredToolsCount < 1) throw new Error('the handshake after the start found no tools');
    // The per-token rate limit (default 600/min) would cap the benchmark, not measure it.
    const { token } = await rest<{ token: string }>('POST', '/api/tokens', {
      role: 'agent',
      name: 'bench-agent',
      rateLimit: 1_000_000,
    });
    return {
      name: 'Gatehouse',
      url: `${base}/mcp/s/bench-stdio`,
      pid: party.info.pid,
      token,
      stop: async () => {
        await party.stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await party.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

// ---- measurements ----

/** Descendants of `pid` (from /proc): how many, and their RSS in KB. */
function descendants(pid: number): { count: number; rssKb: number } {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parent.set(Number(name), Number(fields[1]));
    } catch {}
  }
  let count = 0;
  let rssKb = 0;
  for (const [child] of parent) {
    let p = parent.get(child);
    let hops = 0;
    while (p !== undefined && p !== pid && p > 1 && hops++ < 64) p = parent.get(p);
    if (p !== pid) continue;
    count += 1;
    rssKb += statusKb(child, 'VmRSS') ?? 0;
  }
  return { count, rssKb };
}

function statusKb(pid: number, field: string): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

async function firstCalls(subject: Subject, era: string): Promise<FirstCallReport> {
  const args = [
    '--import',
    'tsx',
    path.join(BENCH_DIR, 'stdio-first-call.ts'),
    '--url',
    subject.url,
    '--era',
    era,
    '--count',
    String(FIRST_CALLS),
    ...(subject.token ? ['--token', subject.token] : []),
  ];
  const child = spawn(process.execPath, args, { cwd: REPO_DIR, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
  await new Promise((resolve) => child.once('exit', resolve));
  clearTimeout(timer);
  const line = out.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line) as FirstCallReport;
  } catch {
    throw new Error(`the first-call probe printed no report: ${out.slice(-500)} ${err.slice(-1000)}`);
  }
}

async function measureSubject(
  start: () => Promise<Subject>,
  rows: Row[],
  firstRows: FirstCallRow[],
  memory: MemoryRow[],
  subjectName: string,
): Promise<void> {
  process.stderr.write(`stdio: starting ${subjectName}\n`);
  const subject = await start();
  let maxCount = 0;
  let maxRss = 0;
  const sample = () => {
    const seen = descendants(subject.pid);
    maxCount = Math.max(maxCount, seen.count);
    maxRss = Math.max(maxRss, seen.rssKb);
  };
  const sampler = setInterval(sample, 250);
  try {
    for (const { era, label } of ERAS) {
      for (const c of CONCURRENCY) {
        noteLoad();
        process.stderr.write(`  ${subject.name} ${era} c=${c} … `);
        let cpu0: number | undefined;
        let cpu1: number | undefined;
        try {
          const report = await runLoad(
            {
              mode: 'sdk',
              url: subject.url,
              era,
              concurrency: c,
              tool: 'echo',
              token: subject.token,
              'duration-ms': DURATION_MS,
              'warmup-ms': WARMUP_MS,
            },
            {
              beforeMeasure: async () => {
                cpu0 = procCpuMs(subject.pid);
              },
              afterMeasure: async () => {
                cpu1 = procCpuMs(subject.pid);
              },
            },
          );
          const perCall =
            cpu0 !== undefined && cpu1 !== undefined && report.calls > 0 ? (cpu1 - cpu0) / report.calls : undefined;
          rows.push({ subject: subject.name, era: label, c, report, gatewayCpuMsPerCall: perCall });
          process.stderr.write(
            `${num(report.callsPerS, 0)} calls/s, p50 ${num(report.p50Ms, 2)} ms${report.errors ? `, ${report.errors} errors (${report.firstError})` : ''}\n`,
          );
        } catch (error) {
          const failure = (error instanceof Error ? error.message : String(error)).split('\n').slice(0, 3).join(' ');
          rows.push({ subject: subject.name, era: label, c, failure });
          process.stderr.write(`failed: ${failure.slice(0, 300)}\n`);
        }
        sample();
      }
      process.stderr.write(`  ${subject.name} ${era} first call × ${FIRST_CALLS} … `);
      try {
        const report = await firstCalls(subject, era);
        firstRows.push({ subject: subject.name, era: label, report });
        process.stderr.write(
          `p50 ${num(report.p50Ms, 1)} ms${report.errors ? `, ${report.errors} errors (${report.firstError})` : ''}\n`,
        );
      } catch (error) {
        const failure = error instanceof Error ? error.message : String(error);
        firstRows.push({ subject: subject.name, era: label, failure });
        process.stderr.write(`failed: ${failure.slice(0, 300)}\n`);
      }
    }
    sample();
    memory.push({
      subject: subject.name,
      peakRssKb: statusKb(subject.pid, 'VmHWM'),
      maxStdioProcesses: maxCount,
      maxStdioRssKb: maxRss,
    });
  } finally {
    clearInterval(sampler);
    await subject.stop();
  }
}

export async function stdioSection(): Promise<string> {
  const machine = machineLine();
  takeLoadSamples();
  const rows: Row[] = [];
  const firstRows: FirstCallRow[] = [];
  const memory: MemoryRow[] = [];
  await measureSubject(startGatehouse, rows, firstRows, memory, 'Gatehouse');
  await measureSubject(startSupergateway, rows, firstRows, memory, 'supergateway');
  await measureSubject(startMcpProxy, rows, firstRows, memory, 'mcp-proxy');
  const load = takeLoadSamples();

  const callTable = renderTable(
    [
      { title: 'gateway', align: 'left' },
      { title: 'era', align: 'left' },
      { title: 'c' },
      { title: 'calls/s' },
      { title: 'p50 ms' },
      { title: 'p99 ms' },
      { title: 'gateway CPU ms/call' },
      { title: '× Gatehouse' },
      { title: 'errors' },
    ],
    rows.map((row) => {
      const gh = rows.find((r) => r.subject === 'Gatehouse' && r.era === row.era && r.c === row.c)?.report;
      if (!row.report)
        return [row.subject, row.era, String(row.c), 'failed', '—', '—', '—', '—', row.failure?.slice(0, 60) ?? ''];
      return [
        row.subject,
        row.era,
        String(row.c),
        num(row.report.callsPerS, 0),
        num(row.report.p50Ms, 2),
        num(row.report.p99Ms, 2),
        num(row.gatewayCpuMsPerCall, 3),
        gh ? ratio(row.report.callsPerS / gh.callsPerS) : '—',
        row.report.errors ? `${row.report.errors} (${(row.report.firstError ?? '').slice(0, 40)})` : '0',
      ];
    }),
  );
  const firstTable = renderTable(
    [
      { title: 'gateway', align: 'left' },
      { title: 'era', align: 'left' },
      { title: 'first call p50 ms' },
      { title: 'p99 ms' },
      { title: 'min ms' },
      { title: 'connect p50 ms' },
      { title: 'errors' },
    ],
    firstRows.map((row) =>
      row.report
        ? [
            row.subject,
            row.era,
            num(row.report.p50Ms, 1),
            num(row.report.p99Ms, 1),
            num(row.report.minMs, 1),
            num(row.report.connectP50Ms, 1),
            row.report.errors ? `${row.report.errors} (${(row.report.firstError ?? '').slice(0, 40)})` : '0',
          ]
        : [row.subject, row.era, 'failed', '—', '—', '—', row.failure?.slice(0, 60) ?? ''],
    ),
  );
  const memoryTable = renderTable(
    [
      { title: 'gateway', align: 'left' },
      { title: 'gateway process peak RSS MB' },
      { title: 'most processes under it' },
      { title: 'their peak RSS MB' },
    ],
    memory.map((m) => [
      m.subject,
      num(m.peakRssKb === undefined ? undefined : m.peakRssKb / 1024, 1),
      String(m.maxStdioProcesses),
      num(m.maxStdioRssKb / 1024, 1),
    ]),
  );

  const targets: string[] = [];
  for (const { label } of ERAS) {
    for (const c of CONCURRENCY) {
      const gh = rows.find((r) => r.subject === 'Gatehouse' && r.era === label && r.c === c)?.report;
      const peers = rows.filter(
        (r) => r.subject !== 'Gatehouse' && r.era === label && r.c === c && r.report && r.report.errors === 0,
      );
      const best = peers.reduce<Row | undefined>(
        (a, b) => (!a || (b.report?.callsPerS ?? 0) > (a.report?.callsPerS ?? 0) ? b : a),
        undefined,
      );
      const r = gh && best?.report ? gh.callsPerS / best.report.callsPerS : Number.NaN;
      targets.push(
        `  throughput ≥ best peer (${label}, c=${c}): ${ratio(r, 3)} of ${best?.subject ?? 'no peer'} — ` +
          (best ? verdict(r >= 1 && gh?.errors === 0) : 'no peer completed this cell'),
      );
    }
    const first = firstRows.find((r) => r.subject === 'Gatehouse' && r.era === label)?.report;
    targets.push(
      `  a new client's first call < 50 ms while the server runs (${label}), p50: ${num(first?.p50Ms, 1)} ms — ` +
        verdict((first?.p50Ms ?? Number.POSITIVE_INFINITY) < 50 && first?.errors === 0),
    );
  }

  return [
    '== stdio: one stdio MCP server (SDK, tool "echo") over Streamable HTTP — Gatehouse (/mcp/s/{server}, supervised child, agent token, allow verdict, audit on) vs supergateway (--stateful) vs mcp-proxy',
    `   gateway, stdio server(s) and load generator are separate processes; ${DURATION_MS / 1000} s measured per cell after ${WARMUP_MS / 1000} s warm-up; c = concurrent SDK clients in a closed loop; Gatehouse log level ${LOG_LEVEL}, SQLite store`,
    `   ${machine}; ${loadLine(load)}`,
    '',
    callTable,
    '',
    `a new client's first call: ${FIRST_CALLS} times in a row a new SDK client connects, calls echo once and closes (the server already running)`,
    '',
    firstTable,
    '',
    'memory: the gateway process itself (VmHWM), and the stdio server processes under it (most seen at once, sampled every 250 ms)',
    '',
    memoryTable,
    '',
    'targets:',
    ...targets,
  ].join('\n');
}
