/**
 * Full-text search over memory units, one results contract on both databases:
 * candidates ranked by the database (SQLite FTS5 BM25, PostgreSQL `ts_rank`),
 * relevance normalised to [0, 1] within the candidates, then blended with
 * recency (half-life 30 days): score = 0.85 · relevance + 0.15 · recency.
 */
import { sql } from 'kysely';
import type { Store } from '../store/db.js';
import type { MemoryUnitTable } from './tables.js';
import { hasTag } from './tags.js';
import { queryTerms } from './text.js';

export type UnitRow = Omit<MemoryUnitTable, 'seq'> & { seq: number };

export interface SearchFilter {
  datasets: readonly string[];
  tags?: readonly string[] | undefined;
  factType?: string | undefined;
}

export interface RankedUnit {
  row: UnitRow;
  score: number;
}

const RELEVANCE_WEIGHT = 0.85;
const HALF_LIFE_DAYS = 30;
const DAY_MS = 86_400_000;

const UNIT_COLUMNS = [
  'seq',
  'id',
  'dataset',
  'text',
  'context',
  'fact_type',
  'entities',
  'tags',
  'occurred_start',
  'occurred_end',
  'state',
  'source',
  'document_id',
  'content_hash',
  'metadata',
  'created_at',
  'updated_at',
] as const;

function columnList(alias: string) {
  return sql.join(UNIT_COLUMNS.map((c) => sql.ref(`${alias}.${c}`)));
}

/** A tag filter over the JSON list column: tags are restricted to characters that need no JSON escaping. */
function tagClauses(alias: string, tags: readonly string[] | undefined) {
  return (tags ?? []).map((tag) => sql` and ${hasTag(`${alias}.tags`, tag)}`);
}

export function recency(createdAt: string, now: number): number {
  const age = Math.max(0, now - Date.parse(createdAt)) / DAY_MS;
  return 0.5 ** (age / HALF_LIFE_DAYS);
}

/**
 * SQLite: the index ranks first on its own (FTS5 sorts by `rank` = BM25 internally, the fast path), a few
 * times more rows than needed; the filters (dataset, state, tags, fact type) apply to those. Only when
 * the filters leave too few and the index had more matches does the complete join run — same answer,
 * the slow path only where it is needed.
 */
async function sqliteCandidates(
  store: Store,
  match: string,
  filter: SearchFilter,
  candidates: number,
): Promise<(UnitRow & { rank: number })[]> {
  const datasets = sql.join(filter.datasets.map((d) => sql`${d}`));
  const factType = filter.factType ? sql` and u.fact_type = ${filter.factType}` : sql``;
  const tags = sql.join(tagClauses('u', filter.tags), sql``);
  const prefetch = candidates * 4;
  const ranked = (
    await sql<{ rowid: number; rank: number }>`
      select rowid, rank from memory_units_fts where memory_units_fts match ${match} order by rank limit ${prefetch}`.execute(
      store.db,
    )
  ).rows;
  if (ranked.length === 0) return [];
  const rankOf = new Map(ranked.map((r) => [Number(r.rowid), -Number(r.rank)]));
  const seqs = sql.join(ranked.map((r) => sql`${r.rowid}`));
  const found = (
    await sql<UnitRow>`
      select ${columnList('u')} from memory_units u
      where u.seq in (${seqs}) and u.dataset in (${datasets}) and u.state = 'valid'${factType}${tags}`.execute(store.db)
  ).rows;
  if (found.length >= candidates || ranked.length < prefetch) {
    return found
      .map((row) => ({ ...row, rank: rankOf.get(Number(row.seq)) ?? 0 }))
      .sort((a, b) => b.rank - a.rank)
      .slice(0, candidates);
  }
  const result = await sql<UnitRow & { rank: number }>`
    select ${columnList('u')}, -bm25(memory_units_fts) as rank
    from memory_units_fts join memory_units u on u.seq = memory_units_fts.rowid
    where memory_units_fts match ${match} and u.dataset in (${datasets}) and u.state = 'valid'${factType}${tags}
    order by bm25(memory_units_fts) limit ${candidates}`.execute(store.db);
  return result.rows;
}

/** Ranked candidates (best first), at most `limit`. An empty query (no searchable terms) finds nothing. */
export async function searchUnits(
  store: Store,
  query: string,
  filter: SearchFilter,
  limit: number,
): Promise<RankedUnit[]> {
  const terms = queryTerms(query);
  if (terms.length === 0 || filter.datasets.length === 0) return [];
  const candidates = Math.min(Math.max(limit * 3, 30), 600);
  const datasets = sql.join(filter.datasets.map((d) => sql`${d}`));
  const factType = filter.factType ? sql` and u.fact_type = ${filter.factType}` : sql``;
  const tags = sql.join(tagClauses('u', filter.tags), sql``);
  let rows: (UnitRow & { rank: number })[];
  if (store.kind === 'sqlite') {
    const match = terms.map((t) => `"${t}"`).join(' OR ');
    rows = await sqliteCandidates(store, match, filter, candidates);
  } else {
    const tsquery = terms.join(' | ');
    const result = await sql<UnitRow & { rank: number }>`
      select ${columnList('u')}, ts_rank(u.tsv, q) as rank
      from memory_units u, to_tsquery('english', ${tsquery}) q
      where u.tsv @@ q and u.dataset in (${datasets}) and u.state = 'valid'${factType}${tags}
      order by rank desc limit ${candidates}`.execute(store.db);
    rows = result.rows;
  }
  if (rows.length === 0) return [];
  const best = Math.max(...rows.map((r) => Number(r.rank)));
  const now = Date.now();
  return rows
    .map(({ rank, ...row }) => {
      const relevance = best > 0 ? Number(rank) / best : 0;
      const score = RELEVANCE_WEIGHT * relevance + (1 - RELEVANCE_WEIGHT) * recency(row.created_at, now);
      return { row: { ...row, seq: Number(row.seq) }, score: Math.round(score * 10_000) / 10_000 };
    })
    .sort((a, b) => b.score - a.score || b.row.seq - a.row.seq)
    .slice(0, limit);
}

export { UNIT_COLUMNS };
