/**
 * Section `overview` (issue 21): `GET /api/overview`'s aggregation (`src/overview/aggregate.ts`) in process
 * on SQLite with a million audit rows — a busy gateway's week, ~100 calls a minute over 50 servers and
 * 20 tools (so the last hour holds ~6k rows and the last day ~143k). Seeded in one INSERT … SELECT;
 * then the hour and the day are each aggregated 30 times after 3 warm-ups. Target: p95 under 200 ms.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { type OverviewWindow, overview } from '../src/overview/aggregate.js';
import { openStore } from '../src/store/db.js';
import { machineLine, num, renderTable, verdict } from './table.js';

const ROWS = Number(process.env.BENCH_OVERVIEW_ROWS ?? 1_000_000);
const SPAN_S = 7 * 24 * 3600;
const RUNS = 30;
const TARGET_P95_MS = 200;

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number;
}

export async function overviewSection(): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-bench-overview-'));
  const store = await openStore({ dataDir: dir });
  try {
    process.stderr.write(`overview: seeding ${ROWS} audit rows over 7 days\n`);
    const nowS = Date.now() / 1000;
    const step = SPAN_S / ROWS;
    const seeded = performance.now();
    await sql`
      insert into audit_events (at, kind, action, actor_id, server_id, tool, verdict, outcome, latency_ms)
      with recursive n(i) as (select 0 union all select i + 1 from n where i < ${ROWS - 1})
      select strftime('%Y-%m-%dT%H:%M:%fZ', ${nowS} - i * ${step}, 'unixepoch'), 'call', 'tool.call', 'tok',
        's' || (i % 50), 't' || (i % 20),
        case i % 20 when 0 then 'gated' when 1 then 'blocked' else 'allow' end,
        case when i % 37 = 0 then 'upstream_timeout' when i % 20 = 0 then 'pending_approval' else 'ok' end,
        (i * 7919) % 2000
      from n`.execute(store.db);
    const seedS = (performance.now() - seeded) / 1000;
    const rows: string[][] = [];
    let met = true;
    for (const window of ['hour', 'day'] as OverviewWindow[]) {
      for (let i = 0; i < 3; i++) await overview(store.db, window);
      const times: number[] = [];
      let buckets = 0;
      for (let i = 0; i < RUNS; i++) {
        const started = performance.now();
        buckets = (await overview(store.db, window)).series.length;
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      const p95 = quantile(times, 0.95);
      met &&= p95 < TARGET_P95_MS;
      rows.push([window, String(buckets), num(quantile(times, 0.5)), num(p95)]);
    }
    return [
      `## overview — GET /api/overview aggregation, SQLite, ${ROWS} audit rows (seeded in ${num(seedS)} s)`,
      machineLine(),
      renderTable(
        [{ title: 'window', align: 'left' }, { title: 'buckets' }, { title: 'p50 ms' }, { title: 'p95 ms' }],
        rows,
      ),
      `target: p95 < ${TARGET_P95_MS} ms with a million audit rows — ${verdict(met)}`,
    ].join('\n');
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
