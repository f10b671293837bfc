/**
 * Section `overview` (issue 21): `GET /api/overview`'s aggregation (`src/overview/aggregate.ts`) in process
 * on SQLite with a million audit rows — a busy gateway's week, ~100 calls a minute over 50 servers and
 * 20 tools (so the last hour holds ~6k rows and the last day ~143k). Seeded in one INSERT … SELECT, then
 * the rollups counted from those rows (`rebuildRollup`: what migration 20's backfill does on an existing
 * store); then each is aggregated 30 times after 3 warm-ups: the hour (from its rows), the day (from the
 * rollups, as served) and, beside it, the day from its rows. Target: p95 under 200 ms for the hour and the day.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { type OverviewSource, type OverviewWindow, overview } from '../src/overview/aggregate.js';
import { rebuildRollup } from '../src/overview/rollup.js';
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
    const rolled = performance.now();
    await rebuildRollup(store.db);
    const rollupS = (performance.now() - rolled) / 1000;
    const rows: string[][] = [];
    let met = true;
    const cases: [OverviewWindow, OverviewSource, boolean][] = [
      ['hour', 'rows', true],
      ['day', 'rollup', true],
      ['day', 'rows', false], // for comparison: what the day cost before the rollups
    ];
    for (const [window, source, served] of cases) {
      for (let i = 0; i < 3; i++) await overview(store.db, window, new Date(), source);
      const times: number[] = [];
      let buckets = 0;
      for (let i = 0; i < RUNS; i++) {
        const started = performance.now();
        buckets = (await overview(store.db, window, new Date(), source)).series.length;
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      const p95 = quantile(times, 0.95);
      if (served) met &&= p95 < TARGET_P95_MS;
      rows.push([
        window,
        `${source}${served ? ' (served)' : ''}`,
        String(buckets),
        num(quantile(times, 0.5)),
        num(p95),
      ]);
    }
    return [
      `## overview — GET /api/overview aggregation, SQLite, ${ROWS} audit rows (seeded in ${num(seedS)} s, rollups counted in ${num(rollupS)} s)`,
      machineLine(),
      renderTable(
        [
          { title: 'window', align: 'left' },
          { title: 'from', align: 'left' },
          { title: 'buckets' },
          { title: 'p50 ms' },
          { title: 'p95 ms' },
        ],
        rows,
      ),
      `target: p95 < ${TARGET_P95_MS} ms for the hour and the day (as served) with a million audit rows — ${verdict(met)}`,
    ].join('\n');
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
