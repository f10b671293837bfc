/**
 * The Overview's rollups of the audit trail's call rows (migration 20), so the day window is read from a few
 * thousand rollup rows instead of a day of call rows:
 * - `audit_rollup_calls`: calls per ten minutes × verdict × outcome (the day chart's buckets);
 * - `audit_rollup_servers`: per server, calls, errors and the latency histogram (`LATENCY_BOUNDS`, one
 *   column per bucket), per ten minutes and per hour;
 * - `audit_rollup_tools`: calls per server and tool, per ten minutes and per hour.
 * The day window reads whole hours from the hour rows and its two ragged ends from the ten-minute rows.
 *
 * They are kept by the audit log, which adds the rows it committed once a second (`rollupIncrements`: the
 * rows are summed in memory first, one upsert per key; off the calls' own commits); by the migration, which counts the rows already
 * there (`backfillRollup`); and by retention, which deletes whole hours of both (`pruneRollup`).
 */
import { type Kysely, sql } from 'kysely';
import type { Increment } from '../store/db.js';
import type { AuditEventTable, Database } from '../store/schema.js';

/** Upper bounds (ms) of the latency histogram; the last bucket (index 15) is open. */
export const LATENCY_BOUNDS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000] as const;
/** Histogram columns of `audit_rollup_servers`: `h0` … `h15`. */
export const HISTOGRAM_COLUMNS = Array.from({ length: LATENCY_BOUNDS.length + 1 }, (_, i) => `h${i}` as const);
export type HistogramColumn = (typeof HISTOGRAM_COLUMNS)[number];

/** Outcomes that are not errors (every other non-null outcome is). */
export const NOT_ERRORS = ['ok', 'pending_approval', 'input_required'] as const;

/** Grains of the server and tool rollups, in minutes, and the length of their `period` prefix of `at`. */
export const GRAINS = [
  { minutes: 10, prefix: 15 }, // 2026-12-02T06:4
  { minutes: 60, prefix: 13 }, // 2026-12-02T06
] as const;

/** The histogram bucket of a latency (null: none). */
export function latencyBucketOf(ms: number | null | undefined): number | null {
  if (ms === null || ms === undefined) return null;
  for (let i = 0; i < LATENCY_BOUNDS.length; i++) if (ms <= (LATENCY_BOUNDS[i] as number)) return i;
  return LATENCY_BOUNDS.length;
}

export function isError(outcome: string | null): boolean {
  return outcome !== null && !(NOT_ERRORS as readonly string[]).includes(outcome);
}

export type RollupSource = Pick<
  AuditEventTable,
  'at' | 'kind' | 'server_id' | 'tool' | 'verdict' | 'outcome' | 'latency_ms'
>;

/**
 * The rollup increments of a batch of audit rows (call rows only): summed in memory, one per key, in key
 * order. A few map updates per row; the batch then costs one upsert per distinct key.
 */
export function rollupIncrements(rows: readonly RollupSource[]): Increment[] {
  const calls = new Map<string, { period: string; verdict: string; outcome: string; calls: number }>();
  const servers = new Map<
    string,
    { grain_minutes: number; period: string; server_id: string; calls: number; errors: number; h: number[] }
  >();
  const tools = new Map<
    string,
    { grain_minutes: number; period: string; server_id: string; tool: string; calls: number }
  >();
  for (const row of rows) {
    if (row.kind !== 'call') continue;
    const verdict = row.verdict ?? '';
    const outcome = row.outcome ?? '';
    const server = row.server_id ?? '';
    const tool = row.tool ?? '';
    const failed = isError(row.outcome) ? 1 : 0;
    const bucket = latencyBucketOf(row.latency_ms);
    const ten = row.at.slice(0, 15);
    const callsKey = `${ten}\u0000${verdict}\u0000${outcome}`;
    const c = calls.get(callsKey);
    if (c) c.calls++;
    else calls.set(callsKey, { period: ten, verdict, outcome, calls: 1 });
    for (const grain of GRAINS) {
      const period = row.at.slice(0, grain.prefix);
      const serverKey = `${grain.minutes}\u0000${period}\u0000${server}`;
      let s = servers.get(serverKey);
      if (!s) {
        s = {
          grain_minutes: grain.minutes,
          period,
          server_id: server,
          calls: 0,
          errors: 0,
          h: new Array(HISTOGRAM_COLUMNS.length).fill(0),
        };
        servers.set(serverKey, s);
      }
      s.calls++;
      s.errors += failed;
      if (bucket !== null) s.h[bucket] = (s.h[bucket] as number) + 1;
      const toolKey = `${serverKey}\u0000${tool}`;
      const t = tools.get(toolKey);
      if (t) t.calls++;
      else tools.set(toolKey, { grain_minutes: grain.minutes, period, server_id: server, tool, calls: 1 });
    }
  }
  const ordered = <V>(map: Map<string, V>) => [...map.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, v]) => v);
  const increments: Increment[] = [];
  for (const c of ordered(calls))
    increments.push({
      table: 'audit_rollup_calls',
      key: { period: c.period, verdict: c.verdict, outcome: c.outcome },
      add: { calls: c.calls },
    });
  for (const s of ordered(servers)) {
    const add: Record<string, number> = { calls: s.calls, errors: s.errors };
    HISTOGRAM_COLUMNS.forEach((column, i) => {
      add[column] = s.h[i] as number;
    });
    increments.push({
      table: 'audit_rollup_servers',
      key: { grain_minutes: s.grain_minutes, period: s.period, server_id: s.server_id },
      add,
    });
  }
  for (const t of ordered(tools))
    increments.push({
      table: 'audit_rollup_tools',
      key: { grain_minutes: t.grain_minutes, period: t.period, server_id: t.server_id, tool: t.tool },
      add: { calls: t.calls },
    });
  return increments;
}

// biome-ignore lint/suspicious/noExplicitAny: the migration creates tables the typed schema does not know yet
type AnyDb = Kysely<any>;

/** Creates the three rollup tables (migration 20). */
export async function createRollupTables(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('audit_rollup_calls')
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('verdict', 'text', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('calls', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_rollup_calls_pk', ['period', 'verdict', 'outcome'])
    .execute();
  let servers = db.schema
    .createTable('audit_rollup_servers')
    .addColumn('grain_minutes', 'integer', (c) => c.notNull())
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('server_id', 'text', (c) => c.notNull())
    .addColumn('calls', 'bigint', (c) => c.notNull())
    .addColumn('errors', 'bigint', (c) => c.notNull());
  for (const column of HISTOGRAM_COLUMNS)
    servers = servers.addColumn(column, 'bigint', (c) => c.notNull().defaultTo(0));
  await servers.addPrimaryKeyConstraint('audit_rollup_servers_pk', ['grain_minutes', 'period', 'server_id']).execute();
  await db.schema
    .createTable('audit_rollup_tools')
    .addColumn('grain_minutes', 'integer', (c) => c.notNull())
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('server_id', 'text', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('calls', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_rollup_tools_pk', ['grain_minutes', 'period', 'server_id', 'tool'])
    .execute();
}

/** The histogram bucket of `latency_ms` in SQL, as `latencyBucketOf` (null latency: null). */
export function latencyBucketSql() {
  const cases = LATENCY_BOUNDS.map((bound, i) => sql`when latency_ms <= ${sql.lit(bound)} then ${sql.lit(i)}`);
  return sql<
    number | null
  >`case when latency_ms is null then null ${sql.join(cases, sql` `)} else ${sql.lit(LATENCY_BOUNDS.length)} end`;
}

/** Errors among the grouped rows, in SQL, as `isError`. */
export function errorsSql() {
  const fine = sql.join(NOT_ERRORS.map((o) => sql.lit(o)));
  return sql<number>`sum(case when outcome is not null and outcome not in (${fine}) then 1 else 0 end)`;
}

/** Counts the call rows already in `audit_events` into the (empty) rollups: the migration's backfill. */
export async function backfillRollup(db: AnyDb): Promise<void> {
  await sql`
    insert into audit_rollup_calls (period, verdict, outcome, calls)
    select substr(at, 1, 15), coalesce(verdict, ''), coalesce(outcome, ''), count(*)
    from audit_events where kind = 'call'
    group by substr(at, 1, 15), coalesce(verdict, ''), coalesce(outcome, '')`.execute(db);
  const histogram = sql.join(
    HISTOGRAM_COLUMNS.map((_, i) => sql`sum(case when lb = ${sql.lit(i)} then 1 else 0 end)`),
    sql`, `,
  );
  const columns = sql.join(HISTOGRAM_COLUMNS.map((c) => sql.ref(c)));
  const sums = sql.join(HISTOGRAM_COLUMNS.map((c) => sql`sum(${sql.ref(c)})`));
  const [ten, hour] = GRAINS;
  // Ten-minute periods from the rows (one pass each), then the hours from the ten-minute periods.
  await sql`
    insert into audit_rollup_servers (grain_minutes, period, server_id, calls, errors, ${columns})
    select ${sql.lit(ten.minutes)}, p, s, count(*), ${errorsSql()}, ${histogram}
    from (select substr(at, 1, ${sql.lit(ten.prefix)}) as p, coalesce(server_id, '') as s, outcome,
            ${latencyBucketSql()} as lb
          from audit_events where kind = 'call') calls
    group by p, s`.execute(db);
  await sql`
    insert into audit_rollup_tools (grain_minutes, period, server_id, tool, calls)
    select ${sql.lit(ten.minutes)}, substr(at, 1, ${sql.lit(ten.prefix)}), coalesce(server_id, ''), coalesce(tool, ''), count(*)
    from audit_events where kind = 'call'
    group by substr(at, 1, ${sql.lit(ten.prefix)}), coalesce(server_id, ''), coalesce(tool, '')`.execute(db);
  const hourOf = sql`substr(period, 1, ${sql.lit(hour.prefix)})`;
  await sql`
    insert into audit_rollup_servers (grain_minutes, period, server_id, calls, errors, ${columns})
    select ${sql.lit(hour.minutes)}, ${hourOf}, server_id, sum(calls), sum(errors), ${sums}
    from audit_rollup_servers where grain_minutes = ${sql.lit(ten.minutes)}
    group by ${hourOf}, server_id`.execute(db);
  await sql`
    insert into audit_rollup_tools (grain_minutes, period, server_id, tool, calls)
    select ${sql.lit(hour.minutes)}, ${hourOf}, server_id, tool, sum(calls)
    from audit_rollup_tools where grain_minutes = ${sql.lit(ten.minutes)}
    group by ${hourOf}, server_id, tool`.execute(db);
}

const ROLLUP_TABLES = ['audit_rollup_calls', 'audit_rollup_servers', 'audit_rollup_tools'] as const;

/** Empties the rollups and counts them again from the call rows (rows written around the audit log: bench, tests). */
export async function rebuildRollup(db: Kysely<Database>): Promise<void> {
  await db.transaction().execute(async (trx) => {
    for (const table of ROLLUP_TABLES) await trx.deleteFrom(table).execute();
    await backfillRollup(trx as AnyDb);
  });
}

/**
 * Deletes the rollup periods before `cutoffHour` (`YYYY-MM-DDTHH`), a bounded number of periods per
 * statement; answers the rows deleted. Retention deletes the call rows before the same hour, so rollup and
 * rows stay in step (both grains: every ten-minute period of an earlier hour sorts before the hour).
 */
export async function pruneRollup(db: Kysely<Database>, cutoffHour: string, periodsPerStatement = 50): Promise<number> {
  const anyDb = db as AnyDb;
  let total = 0;
  const prune = async (table: string, grain: number | undefined) => {
    for (;;) {
      const periods = anyDb
        .selectFrom(table)
        .select('period')
        .where('period', '<', cutoffHour)
        .$if(grain !== undefined, (q) => q.where('grain_minutes', '=', grain))
        .groupBy('period')
        .orderBy('period')
        .limit(periodsPerStatement);
      const result = await anyDb
        .deleteFrom(table)
        .$if(grain !== undefined, (q) => q.where('grain_minutes', '=', grain))
        .where('period', 'in', periods)
        .executeTakeFirst();
      const deleted = Number(result.numDeletedRows);
      total += deleted;
      if (deleted === 0) return;
    }
  };
  await prune('audit_rollup_calls', undefined);
  for (const grain of GRAINS) {
    await prune('audit_rollup_servers', grain.minutes);
    await prune('audit_rollup_tools', grain.minutes);
  }
  return total;
}
