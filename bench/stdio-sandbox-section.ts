/**
 * Section `stdio-sandbox` (issue 16): what the bubblewrap sandbox costs. One `gatehouse serve`
 * (`bench/gateway-process.ts`) runs the same stdio server (`test/fixtures/stdio/plain-server.mjs`)
 * twice, side by side in one run: `sandboxed` (the default) and `unsandboxed` (`sandbox: {mode: "off"}`).
 *
 * - First call of a new server with a warm cache: the server is stopped, then timed from
 *   `POST …/start` (spawn, handshake, pins compared) until a brand-new agent client's first
 *   `tools/call` through `/mcp/s/{id}` answers; the first round warms the caches and is not counted.
 * - Calls/s at c = 1 and c = 16 through `/mcp/s/{id}` (the load generator, 2026-07-28 era).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { DURATION_MS, noteLoad, takeLoadSamples, WARMUP_MS } from './cells.js';
import { childEnv, REPO_DIR, runLoad, startParty } from './children.js';
import type { LoadReport } from './load.js';
import { FIXTURE_MODULES } from './stdio-section.js';
import { loadLine, machineLine, num, ratio, renderTable, verdict } from './table.js';

const PLAIN_SERVER = path.join(REPO_DIR, 'test/fixtures/stdio/plain-server.mjs');
const ROUNDS = Number(process.env.BENCH_SANDBOX_ROUNDS ?? 6);
const SUBJECTS = [
  { id: 'sandboxed', sandbox: { readOnlyPaths: FIXTURE_MODULES } },
  { id: 'unsandboxed', sandbox: { mode: 'off' } },
] as const;
const CONCURRENCY = [1, 16] as const;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : (sorted[Math.floor((sorted.length - 1) / 2)] as number);
}

export async function stdioSandboxSection(): Promise<string> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-bench-sandbox-'));
  const admin = `gh_bench_${randomBytes(24).toString('hex')}`;
  process.stderr.write('stdio-sandbox: starting Gatehouse\n');
  const party = await startParty(
    'gatehouse',
    'bench/gateway-process.ts',
    [],
    childEnv({
      GATEHOUSE_DATA_DIR: dataDir,
      GATEHOUSE_ADMIN_TOKEN: admin,
      GATEHOUSE_LOG_LEVEL: 'warn',
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
  const firstCall: Record<string, number[]> = { sandboxed: [], unsandboxed: [] };
  const load: Record<string, Record<number, LoadReport>> = { sandboxed: {}, unsandboxed: {} };
  try {
    const { token } = await rest<{ token: string }>('POST', '/api/tokens', {
      role: 'agent',
      name: 'bench-agent',
      rateLimit: 1_000_000,
    });
    for (const subject of SUBJECTS) {
      await rest('POST', '/api/mcp/install', {
        manifest: {
          id: subject.id,
          name: subject.id,
          transport: 'stdio',
          command: process.execPath,
          args: [PLAIN_SERVER],
          toolPolicy: { allow: ['echo'] },
          sandbox: subject.sandbox,
        },
      });
    }
    const url = (id: string) => `${base}/mcp/s/${id}`;
    const oneCall = async (id: string) => {
      const client = new Client({ name: 'bench-first', version: '1' }, { versionNegotiation: { mode: 'auto' } });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url(id)), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      const result = await client.callTool({ name: 'echo', arguments: { text: 'first' } });
      await client.close();
      if (result.isError) throw new Error(`${id}: the first call failed: ${JSON.stringify(result).slice(0, 300)}`);
    };
    // Interleaved, so both see the same machine.
    for (let round = 0; round <= ROUNDS; round++) {
      for (const { id } of SUBJECTS) {
        await rest('POST', `/api/mcp/servers/${id}/stop`);
        const t0 = performance.now();
        await rest('POST', `/api/mcp/servers/${id}/start`);
        await oneCall(id);
        const ms = performance.now() - t0;
        if (round > 0) firstCall[id]?.push(ms);
      }
    }
    for (const { id } of SUBJECTS) {
      process.stderr.write(`  ${id} first call (start → answer), p50 ${num(median(firstCall[id] ?? []), 0)} ms\n`);
    }
    for (const c of CONCURRENCY) {
      for (const { id } of SUBJECTS) {
        noteLoad();
        process.stderr.write(`  ${id} c=${c} … `);
        const report = await runLoad({
          mode: 'sdk',
          url: url(id),
          era: 'modern',
          concurrency: c,
          tool: 'echo',
          token,
          'duration-ms': DURATION_MS,
          'warmup-ms': WARMUP_MS,
        });
        const reports = load[id];
        if (reports) reports[c] = report;
        process.stderr.write(
          `${num(report.callsPerS, 0)} calls/s, p50 ${num(report.p50Ms, 2)} ms${report.errors ? `, ${report.errors} errors (${report.firstError})` : ''}\n`,
        );
      }
    }
  } finally {
    await party.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }

  const sandboxedFirst = median(firstCall.sandboxed ?? []);
  const bareFirst = median(firstCall.unsandboxed ?? []);
  const rows: string[][] = [
    [
      `first call of a new server (start → answer, p50 of ${ROUNDS})`,
      `${num(sandboxedFirst, 0)} ms`,
      `${num(bareFirst, 0)} ms`,
      `+${num(sandboxedFirst - bareFirst, 0)} ms`,
    ],
  ];
  for (const c of CONCURRENCY) {
    const s = load.sandboxed?.[c]?.callsPerS;
    const u = load.unsandboxed?.[c]?.callsPerS;
    rows.push([`calls/s, c=${c} (2026-07-28)`, num(s, 0), num(u, 0), ratio(s !== undefined && u ? s / u : undefined)]);
  }
  const c16 = (load.sandboxed?.[16]?.callsPerS ?? 0) / (load.unsandboxed?.[16]?.callsPerS || 1);
  const c1 = (load.sandboxed?.[1]?.callsPerS ?? 0) / (load.unsandboxed?.[1]?.callsPerS || 1);
  return [
    '## stdio sandbox: sandboxed beside unsandboxed, one gateway, one run',
    machineLine(),
    loadLine(takeLoadSamples()),
    '',
    renderTable(
      [
        { title: 'measure', align: 'left' },
        { title: 'sandboxed', align: 'right' },
        { title: 'unsandboxed', align: 'right' },
        { title: 'sandboxed vs unsandboxed', align: 'right' },
      ],
      rows,
    ),
    '',
    `first call within +100 ms: ${verdict(sandboxedFirst - bareFirst < 100)}`,
    `calls/s within 5 % at c=1: ${verdict(c1 >= 0.95)}, at c=16: ${verdict(c16 >= 0.95)}`,
    '',
  ].join('\n');
}
