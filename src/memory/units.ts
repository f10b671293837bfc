/** Reading memory units: search, the cursor and offset lists, one unit, its history, and the tag counts. */
import { GatehouseError } from '../errors.js';
import { parseJson } from '../store/json.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { notFound, visible } from './scope.js';
import { searchUnits, UNIT_COLUMNS } from './search.js';
import { hasTag } from './tags.js';
import type { DatasetScope, FactType, MemoryUnit, SearchResult, UnitState } from './types.js';
import { toResult, toUnit } from './views.js';

export interface SearchFilterOptions {
  datasets: readonly string[];
  tags?: string[] | undefined;
  fact_type?: FactType | undefined;
}

export async function search(
  ctx: MemoryContext,
  query: string,
  filter: SearchFilterOptions,
  limit: number,
): Promise<SearchResult[]> {
  return withStore(async () =>
    (
      await searchUnits(
        ctx.store,
        query,
        { datasets: filter.datasets, tags: filter.tags, factType: filter.fact_type },
        limit,
      )
    ).map(toResult),
  );
}

export interface ListOptions {
  datasets: readonly string[];
  limit: number;
  cursor?: string | undefined;
  tags?: string[] | undefined;
  fact_type?: FactType | undefined;
  state?: UnitState | 'all' | undefined;
}

/** Newest first, paged by an opaque cursor (the base64url of the last unit's sequence number). */
export async function list(
  ctx: MemoryContext,
  options: ListOptions,
): Promise<{ items: MemoryUnit[]; next_cursor: string | null }> {
  return withStore(async () => {
    if (options.datasets.length === 0) return { items: [], next_cursor: null };
    let before: number | undefined;
    if (options.cursor !== undefined) {
      const decoded = /^[A-Za-z0-9_-]{1,24}$/.test(options.cursor)
        ? Buffer.from(options.cursor, 'base64url').toString('utf8')
        : '';
      before = /^[1-9]\d{0,15}$/.test(decoded) ? Number(decoded) : Number.NaN;
      if (!Number.isSafeInteger(before)) {
        throw new GatehouseError('mcp.memory_schema', 'cursor is not one this server gave.', {
          detail: 'cursor is not one this server gave',
        });
      }
    }
    let query = ctx.store.db
      .selectFrom('memory_units')
      .select([...UNIT_COLUMNS])
      .where('dataset', 'in', [...options.datasets]);
    const state = options.state ?? 'valid';
    if (state !== 'all') query = query.where('state', '=', state);
    if (options.fact_type) query = query.where('fact_type', '=', options.fact_type);
    for (const tag of options.tags ?? []) query = query.where(hasTag('tags', tag));
    if (before !== undefined) query = query.where('seq', '<', before);
    const rows = await query
      .orderBy('seq', 'desc')
      .limit(options.limit + 1)
      .execute();
    const page = rows.slice(0, options.limit);
    const last = page[page.length - 1];
    return {
      items: page.map(toUnit),
      next_cursor:
        rows.length > options.limit && last ? Buffer.from(String(Number(last.seq))).toString('base64url') : null,
    };
  });
}

export interface ListPageOptions {
  datasets: readonly string[];
  state: UnitState | 'all';
  tag?: string | undefined;
  limit: number;
  offset: number;
}

/** An offset page with its total (the REST list contract). */
export async function listPage(
  ctx: MemoryContext,
  options: ListPageOptions,
): Promise<{ units: MemoryUnit[]; total: number }> {
  return withStore(async () => {
    if (options.datasets.length === 0) return { units: [], total: 0 };
    let q = ctx.store.db.selectFrom('memory_units').where('dataset', 'in', [...options.datasets]);
    if (options.state !== 'all') q = q.where('state', '=', options.state);
    if (options.tag) q = q.where(hasTag('tags', options.tag));
    const rows = await q
      .select([...UNIT_COLUMNS])
      .orderBy('seq', 'desc')
      .limit(options.limit)
      .offset(options.offset)
      .execute();
    const { total } = await q.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    return { units: rows.map(toUnit), total: Number(total) };
  });
}

/** One unit, if it lives in one of `datasets` (otherwise it does not exist for this caller). */
export async function getUnit(ctx: MemoryContext, id: string, datasets: DatasetScope): Promise<MemoryUnit> {
  return withStore(async () => {
    const row = await ctx.store.db
      .selectFrom('memory_units')
      .select([...UNIT_COLUMNS])
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row || !visible(datasets, row.dataset)) throw notFound('memory unit', id);
    return toUnit(row);
  });
}

export async function history(
  ctx: MemoryContext,
  id: string,
  datasets: DatasetScope,
): Promise<{ id: string; unit: MemoryUnit; history: unknown[] }> {
  const unit = await getUnit(ctx, id, datasets);
  const rows = await withStore(() =>
    ctx.store.db.selectFrom('memory_history').selectAll().where('unit_id', '=', id).orderBy('seq').execute(),
  );
  return {
    id,
    unit,
    history: rows.map((r) => ({
      at: r.at,
      action: r.action,
      actor: r.actor_id ? { id: r.actor_id, name: r.actor_name } : null,
      before: parseJson<unknown>(r.before, null),
      after: parseJson<unknown>(r.after, null),
    })),
  };
}

/** Tags of valid units with how many carry each, most used first. */
export async function tags(
  ctx: MemoryContext,
  datasets: readonly string[],
): Promise<{ tags: { tag: string; count: number }[]; count: number }> {
  return withStore(async () => {
    if (datasets.length === 0) return { tags: [], count: 0 };
    const rows = await ctx.store.db
      .selectFrom('memory_units')
      .select('tags')
      .where('dataset', 'in', [...datasets])
      .where('state', '=', 'valid')
      .where('tags', '!=', '[]')
      .execute();
    const counts = new Map<string, number>();
    for (const row of rows)
      for (const tag of parseJson<string[]>(row.tags, [])) counts.set(tag, (counts.get(tag) ?? 0) + 1);
    const sorted = [...counts]
      .map(([tag, count]) => ({ tag, count }))
      .sort((a, b) => b.count - a.count || (a.tag < b.tag ? -1 : 1));
    return { tags: sorted, count: sorted.length };
  });
}
