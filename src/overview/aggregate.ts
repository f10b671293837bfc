/**
 * The dashboard's Overview in one answer, aggregated in SQL (SQLite and PostgreSQL alike).
 * - calls per bucket (a minute over the last hour, ten minutes over the last day) by verdict and outcome:
 *   the bucket is a prefix of the stored ISO time, so grouping needs no date functions;
 * - per server: calls, errors, and p50/p95 latency from a fixed histogram counted in SQL (the upper
 *   bound of the bucket the percentile falls in: exact enough for a glance, and no row leaves the database);
 * - top tools; pending approvals and quarantined tools (a few, for links); servers by status.
 * The hour reads its call rows by `at` from the covering index `audit_events_overview` (migration 15). The
 * day reads the rollups (`rollup.ts`, migration 20): the same numbers — the same histogram — from whole
 * ten-minute and hour periods, so it starts at the ten-minute boundary at or before 24 hours ago.
 */
import { type Kysely, sql } from 'kysely';
import type { Database } from '../store/schema.js';
import { errorsSql, GRAINS, HISTOGRAM_COLUMNS, LATENCY_BOUNDS, latencyBucketSql } from './rollup.js';

export { LATENCY_BOUNDS } from './rollup.js';

export type OverviewWindow = 'hour' | 'day';
/** Where the call counts come from: the rollups (the day's default) or the call rows (the hour's). */
export type OverviewSource = 'rollup' | 'rows';

const WINDOWS: Record<OverviewWindow, { ms: number; prefix: number; bucketMinutes: number; source: OverviewSource }> = {
  hour: { ms: 3_600_000, prefix: 16, bucketMinutes: 1, source: 'rows' }, // 2026-12-02T00:43
  day: { ms: 86_400_000, prefix: 15, bucketMinutes: 10, source: 'rollup' }, // 2026-12-02T00:4
};

export interface Overview {
  window: OverviewWindow;
  since: string;
  bucketMinutes: number;
  /** One entry per bucket that had calls, oldest first; `at` is the bucket's start. */
  series: { at: string; total: number; verdicts: Record<string, number>; outcomes: Record<string, number> }[];
  servers: { id: string; calls: number; errors: number; p50Ms: number | null; p95Ms: number | null }[];
  topTools: { server: string | null; tool: string | null; calls: number }[];
  approvals: { pending: number; oldest: { id: string; serverId: string | null; tool: string; createdAt: string }[] };
  quarantined: { total: number; items: { serverId: string; tool: string; kind: string }[] };
  serversByStatus: Record<string, number>;
}

/** The bucket start of a stored-time prefix: `…T00:4` → `…T00:40:00.000Z`. */
function bucketStart(prefix: string): string {
  return `${prefix}${'0000-00-00T00:00:00.000Z'.slice(prefix.length)}`;
}

/** The upper bound of the bucket where the `q` quantile falls, from the histogram's counts. */
export function quantileOf(counts: readonly number[], q: number): number | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(q * total);
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] ?? 0;
    if (seen >= rank) return LATENCY_BOUNDS[i] ?? Number.POSITIVE_INFINITY;
  }
  return null;
}

/** The window's call counts, wherever they were read from. */
interface Counts {
  /** Per series bucket (a prefix of `at`), verdict and outcome. */
  byBucket: { b: string; verdict: string | null; outcome: string | null; n: number }[];
  servers: Map<string, { calls: number; errors: number; histogram: number[] }>;
  topTools: { server: string | null; tool: string | null; calls: number }[];
}

const TOP_TOOLS = 10;

/** The window's counts from its call rows (the covering index `audit_events_overview`). */
async function countRows(db: Kysely<Database>, since: string, prefix: number): Promise<Counts> {
  // `kind || ''`: an expression, so neither SQLite nor PostgreSQL picks the (kind, actor, server, at) index
  // for the equality (every call row matches it) over the time index, which bounds the rows to the window.
  const calls = db.selectFrom('audit_events').where('at', '>=', since).where(sql<string>`kind || ''`, '=', 'call');
  const bucket = sql<string>`substr(at, 1, ${sql.lit(prefix)})`;
  const latencyBucket = latencyBucketSql();
  // Grouping columns as expressions (`server_id || ''`): otherwise SQLite walks a whole (server_id, …) index
  // in group order instead of the window's rows in the covering index (audit_events_overview).
  const server = sql<string | null>`server_id || ''`;
  const tool = sql<string | null>`tool || ''`;

  // Three passes over the window: series by (bucket, verdict, outcome); per server by latency bucket (its
  // calls, errors and histogram at once); top tools.
  const [byBucket, perServer, topTools] = await Promise.all([
    calls
      .select([bucket.as('b'), 'verdict', 'outcome', (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy([bucket, 'verdict', 'outcome'])
      .execute(),
    calls
      .select([
        server.as('server_id'),
        latencyBucket.as('lb'),
        (eb) => eb.fn.countAll<number>().as('n'),
        errorsSql().as('errors'),
      ])
      .groupBy([server, latencyBucket])
      .execute(),
    calls
      .select([server.as('server_id'), tool.as('tool'), (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy([server, tool])
      .orderBy('n', 'desc')
      // Ties as the rollup orders them (absent as ''), on both databases (PostgreSQL sorts nulls last).
      .orderBy(sql`coalesce(${server}, '')`)
      .orderBy(sql`coalesce(${tool}, '')`)
      .limit(TOP_TOOLS)
      .execute(),
  ]);
  const servers: Counts['servers'] = new Map();
  for (const row of perServer) {
    const key = row.server_id ?? '';
    let entry = servers.get(key);
    if (!entry) {
      entry = { calls: 0, errors: 0, histogram: new Array<number>(HISTOGRAM_COLUMNS.length).fill(0) };
      servers.set(key, entry);
    }
    entry.calls += Number(row.n);
    entry.errors += Number(row.errors ?? 0);
    if (row.lb !== null) entry.histogram[Number(row.lb)] = Number(row.n);
  }
  return {
    byBucket: byBucket.map((r) => ({ b: r.b, verdict: r.verdict, outcome: r.outcome, n: Number(r.n) })),
    servers,
    topTools: topTools.map((r) => ({ server: r.server_id, tool: r.tool, calls: Number(r.n) })),
  };
}

/**
 * The day's counts from the rollups: ten-minute rows from `since` (a ten-minute boundary) to the first
 * whole hour, hour rows for the whole hours, ten-minute rows for the current hour (and anything later).
 */
async function countRollup(db: Kysely<Database>, since: string, now: Date): Promise<Counts> {
  const [ten, hour] = GRAINS;
  const firstHour = new Date(Math.ceil(Date.parse(since) / 3_600_000) * 3_600_000).toISOString().slice(0, 13);
  const thisHour = now.toISOString().slice(0, 13);
  const inWindow = sql<boolean>`(grain_minutes = ${hour.minutes} and period >= ${firstHour} and period < ${thisHour})
    or (grain_minutes = ${ten.minutes} and period >= ${since.slice(0, ten.prefix)} and period < ${`${firstHour}:0`})
    or (grain_minutes = ${ten.minutes} and period >= ${`${thisHour}:0`})`;
  const histogram = HISTOGRAM_COLUMNS.map((c) => sql<number>`sum(${sql.ref(c)})`.as(c));
  const [byBucket, perServer, topTools] = await Promise.all([
    db
      .selectFrom('audit_rollup_calls')
      .select(['period', 'verdict', 'outcome', 'calls'])
      .where('period', '>=', since.slice(0, ten.prefix))
      .execute(),
    db
      .selectFrom('audit_rollup_servers')
      .where(inWindow)
      .select((eb) => [
        'server_id',
        eb.fn.sum<number>('calls').as('calls'),
        eb.fn.sum<number>('errors').as('errors'),
        ...histogram,
      ])
      .groupBy('server_id')
      .execute(),
    db
      .selectFrom('audit_rollup_tools')
      .where(inWindow)
      .select((eb) => ['server_id', 'tool', eb.fn.sum<number>('calls').as('n')])
      .groupBy(['server_id', 'tool'])
      .orderBy('n', 'desc')
      .orderBy('server_id')
      .orderBy('tool')
      .limit(TOP_TOOLS)
      .execute(),
  ]);
  const servers: Counts['servers'] = new Map();
  for (const row of perServer) {
    const r = row as unknown as Record<string, unknown>;
    servers.set(row.server_id, {
      calls: Number(row.calls),
      errors: Number(row.errors),
      histogram: HISTOGRAM_COLUMNS.map((c) => Number(r[c] ?? 0)),
    });
  }
  return {
    byBucket: byBucket.map((r) => ({
      b: r.period,
      verdict: r.verdict === '' ? null : r.verdict,
      outcome: r.outcome === '' ? null : r.outcome,
      n: Number(r.calls),
    })),
    servers,
    topTools: topTools.map((r) => ({
      server: r.server_id === '' ? null : r.server_id,
      tool: r.tool === '' ? null : r.tool,
      calls: Number(r.n),
    })),
  };
}

/**
 * The Overview of the last hour or day. `source` is for tests and benches: the day may also be counted from
 * its call rows (the same window, the same numbers, slower).
 */
export async function overview(
  db: Kysely<Database>,
  window: OverviewWindow,
  now = new Date(),
  source: OverviewSource = WINDOWS[window].source,
): Promise<Overview> {
  const { ms, prefix, bucketMinutes } = WINDOWS[window];
  // The day starts on a ten-minute boundary (its first bucket whole, and the rollups hold whole periods).
  const start = now.getTime() - ms;
  const since = new Date(window === 'day' ? Math.floor(start / 600_000) * 600_000 : start).toISOString();
  if (source === 'rollup' && window !== 'day') throw new RangeError('only the day window has a rollup');

  const [counts, pending, oldest, quarantined, qItems, statuses] = await Promise.all([
    source === 'rollup' ? countRollup(db, since, now) : countRows(db, since, prefix),
    db
      .selectFrom('approvals')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('approvals')
      .select(['id', 'server_id', 'tool', 'created_at'])
      .where('status', '=', 'pending')
      .orderBy('created_at')
      .limit(5)
      .execute(),
    db
      .selectFrom('tool_pins')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('state', '=', 'quarantined')
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('tool_pins')
      .select(['server_id', 'tool_name', 'kind'])
      .where('state', '=', 'quarantined')
      .orderBy('server_id')
      .orderBy('tool_name')
      .limit(5)
      .execute(),
    db
      .selectFrom('servers')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy('status')
      .execute(),
  ]);

  const series = new Map<string, Overview['series'][number]>();
  for (const row of counts.byBucket) {
    let entry = series.get(row.b);
    if (!entry) {
      entry = { at: bucketStart(row.b), total: 0, verdicts: {}, outcomes: {} };
      series.set(row.b, entry);
    }
    const verdict = row.verdict ?? 'unknown';
    const outcome = row.outcome ?? 'none';
    entry.total += row.n;
    entry.verdicts[verdict] = (entry.verdicts[verdict] ?? 0) + row.n;
    entry.outcomes[outcome] = (entry.outcomes[outcome] ?? 0) + row.n;
  }
  return {
    window,
    since,
    bucketMinutes,
    series: [...series.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => v),
    servers: [...counts.servers.entries()]
      .map(([id, s]) => ({
        id,
        calls: s.calls,
        errors: s.errors,
        p50Ms: quantileOf(s.histogram, 0.5),
        p95Ms: quantileOf(s.histogram, 0.95),
      }))
      .sort((a, b) => b.calls - a.calls || a.id.localeCompare(b.id)),
    topTools: counts.topTools,
    approvals: {
      pending: Number(pending.n),
      oldest: oldest.map((a) => ({ id: a.id, serverId: a.server_id, tool: a.tool, createdAt: a.created_at })),
    },
    quarantined: {
      total: Number(quarantined.n),
      items: qItems.map((p) => ({ serverId: p.server_id, tool: p.tool_name, kind: p.kind })),
    },
    serversByStatus: Object.fromEntries(statuses.map((s) => [s.status, Number(s.n)])),
  };
}
