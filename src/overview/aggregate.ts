/**
 * The dashboard's Overview in one answer, aggregated in SQL (SQLite and PostgreSQL alike) over the audit
 * trail's covering index: the window's call rows are read by `at` from `audit_events_overview` (migration 15),
 * which holds every grouped column, then grouped in three passes.
 * - calls per bucket (a minute over the last hour, ten minutes over the last day) by verdict and outcome:
 *   the bucket is a prefix of the stored ISO time, so grouping needs no date functions;
 * - per server: calls, errors, and p50/p95 latency from a fixed histogram counted in SQL (the upper
 *   bound of the bucket the percentile falls in: exact enough for a glance, and no row leaves the database);
 * - top tools; pending approvals and quarantined tools (a few, for links); servers by status.
 */
import { type Kysely, sql } from 'kysely';
import type { Database } from '../store/schema.js';

export type OverviewWindow = 'hour' | 'day';

/** Upper bounds (ms) of the latency histogram; the last bucket is open. */
export const LATENCY_BOUNDS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000] as const;

const WINDOWS: Record<OverviewWindow, { ms: number; prefix: number; bucketMinutes: number }> = {
  hour: { ms: 3_600_000, prefix: 16, bucketMinutes: 1 }, // 2026-12-02T00:43
  day: { ms: 86_400_000, prefix: 15, bucketMinutes: 10 }, // 2026-12-02T00:4
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

export async function overview(db: Kysely<Database>, window: OverviewWindow, now = new Date()): Promise<Overview> {
  const { ms, prefix, bucketMinutes } = WINDOWS[window];
  const since = new Date(now.getTime() - ms).toISOString();
  // `kind || ''`: an expression, so neither SQLite nor PostgreSQL picks the (kind, actor, server, at) index
  // for the equality (every call row matches it) over the time index, which bounds the rows to the window.
  const calls = db.selectFrom('audit_events').where('at', '>=', since).where(sql<string>`kind || ''`, '=', 'call');
  const bucket = sql<string>`substr(at, 1, ${sql.lit(prefix)})`;

  // The histogram bucket of each latency, as one CASE (index 0…n; null latency: no bucket).
  const cases = LATENCY_BOUNDS.map((bound, i) => sql`when latency_ms <= ${sql.lit(bound)} then ${sql.lit(i)}`);
  const latencyBucket = sql<
    number | null
  >`case when latency_ms is null then null ${sql.join(cases, sql` `)} else ${sql.lit(LATENCY_BOUNDS.length)} end`;

  // Grouping columns as expressions (`server_id || ''`): otherwise SQLite walks a whole (server_id, …) index
  // in group order instead of the window's rows in the covering index (audit_events_overview).
  const server = sql<string | null>`server_id || ''`;
  const tool = sql<string | null>`tool || ''`;
  const failed = sql<number>`sum(case when outcome is not null and outcome not in ('ok', 'pending_approval', 'input_required') then 1 else 0 end)`;

  // Three passes over the window: series by (bucket, verdict, outcome); per server by latency bucket (its
  // calls, errors and histogram at once); top tools.
  const [byBucket, perServer, topTools, pending, oldest, quarantined, qItems, statuses] = await Promise.all([
    calls
      .select([bucket.as('b'), 'verdict', 'outcome', (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy([bucket, 'verdict', 'outcome'])
      .execute(),
    calls
      .select([
        server.as('server_id'),
        latencyBucket.as('lb'),
        (eb) => eb.fn.countAll<number>().as('n'),
        failed.as('errors'),
      ])
      .groupBy([server, latencyBucket])
      .execute(),
    calls
      .select([server.as('server_id'), tool.as('tool'), (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy([server, tool])
      .orderBy('n', 'desc')
      .limit(10)
      .execute(),
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
  const at = (b: string) => {
    let entry = series.get(b);
    if (!entry) {
      entry = { at: bucketStart(b), total: 0, verdicts: {}, outcomes: {} };
      series.set(b, entry);
    }
    return entry;
  };
  for (const row of byBucket) {
    const entry = at(row.b);
    const n = Number(row.n);
    const verdict = row.verdict ?? 'unknown';
    const outcome = row.outcome ?? 'none';
    entry.total += n;
    entry.verdicts[verdict] = (entry.verdicts[verdict] ?? 0) + n;
    entry.outcomes[outcome] = (entry.outcomes[outcome] ?? 0) + n;
  }

  const servers = new Map<string, { calls: number; errors: number; histogram: number[] }>();
  for (const row of perServer) {
    const key = row.server_id ?? '';
    let entry = servers.get(key);
    if (!entry) {
      entry = { calls: 0, errors: 0, histogram: new Array<number>(LATENCY_BOUNDS.length + 1).fill(0) };
      servers.set(key, entry);
    }
    entry.calls += Number(row.n);
    entry.errors += Number(row.errors ?? 0);
    if (row.lb !== null) entry.histogram[Number(row.lb)] = Number(row.n);
  }
  return {
    window,
    since,
    bucketMinutes,
    series: [...series.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => v),
    servers: [...servers.entries()]
      .map(([id, s]) => ({
        id,
        calls: s.calls,
        errors: s.errors,
        p50Ms: quantileOf(s.histogram, 0.5),
        p95Ms: quantileOf(s.histogram, 0.95),
      }))
      .sort((a, b) => b.calls - a.calls),
    topTools: topTools.map((row) => ({ server: row.server_id, tool: row.tool, calls: Number(row.n) })),
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
