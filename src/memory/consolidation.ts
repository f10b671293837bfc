/**
 * Consolidation: merges exact duplicates (same normalised text) and near-duplicates (word overlap ≥ 0.85)
 * within one dataset. The oldest unit is kept and absorbs the others' tags and entities; the others are
 * invalidated (not deleted: `memory_curate` with `state: "valid"` brings one back). Runs as an operation.
 */
import { ERROR_CATALOGUE, type ErrorCode, GatehouseError } from '../errors.js';
import { nowIso, parseJson } from '../store/json.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { recordHistory } from './history.js';
import { completeOperation, getOperation, insertOperation } from './operations.js';
import type { MemoryOperationTable } from './tables.js';
import { jaccard, newMemoryId, uniq, wordSet } from './text.js';
import type { Actor } from './types.js';

const NEAR_DUPLICATE = 0.85;
/** Near-duplicate candidates share a word that appears in at most this many units of the dataset. */
const RARE_WORD_LIMIT = 64;

/** Queues the consolidation, runs it (claimed, leased, retryable like the others), and waits: the answer carries the count. */
export async function consolidate(
  ctx: MemoryContext,
  dataset: string,
  actor: Actor,
): Promise<{ operation_id: string; deduplicated: number }> {
  return withStore(async () => {
    const id = newMemoryId('op');
    await insertOperation(ctx, {
      id,
      kind: 'consolidation',
      status: 'pending',
      dataset,
      actor,
      targetId: null,
      payload: { dataset },
      at: nowIso(),
    });
    ctx.runner.launch(id);
    await ctx.runner.settled(id);
    const op = await getOperation(ctx, id);
    if (op.status !== 'completed') {
      const code = op.error?.code;
      throw new GatehouseError(
        op.status === 'cancelled'
          ? 'memory.operation_state'
          : code && Object.hasOwn(ERROR_CATALOGUE, code)
            ? (code as ErrorCode)
            : 'internal_error',
        op.error?.message ?? `The consolidation ended ${op.status}.`,
      );
    }
    return { operation_id: id, deduplicated: Number(op.deduplicated ?? 0) };
  });
}

interface Candidate {
  text: string;
  content_hash: string;
}

/** Which unit each duplicate merges into (index → index of its keeper, the oldest of its group); rows oldest first. */
function planMerges(rows: readonly Candidate[]): Map<number, number> {
  const keeperOf = new Map<number, number>(); // index → index of the unit it merges into
  const root = (i: number): number => {
    let r = i;
    while (keeperOf.has(r)) r = keeperOf.get(r) as number;
    return r;
  };
  const byHash = new Map<string, number>();
  rows.forEach((row, i) => {
    const first = byHash.get(row.content_hash);
    if (first === undefined) byHash.set(row.content_hash, i);
    else keeperOf.set(i, first);
  });
  // Near-duplicates: candidates share a rare word; compare only those pairs.
  const words = rows.map((r) => wordSet(r.text));
  const postings = new Map<string, number[]>();
  words.forEach((set, i) => {
    if (keeperOf.has(i)) return;
    for (const w of set) {
      const list = postings.get(w) ?? [];
      if (list.length <= RARE_WORD_LIMIT) list.push(i);
      postings.set(w, list);
    }
  });
  for (const [i, set] of words.entries()) {
    if (keeperOf.has(i)) continue;
    const seen = new Set<number>();
    for (const w of set) {
      const list = postings.get(w) as number[];
      if (list.length > RARE_WORD_LIMIT) continue;
      for (const j of list) {
        if (j >= i || seen.has(j) || keeperOf.has(j)) continue;
        seen.add(j);
        if (jaccard(words[j] as Set<string>, set) >= NEAR_DUPLICATE) {
          keeperOf.set(i, root(j));
          break;
        }
      }
      if (keeperOf.has(i)) break;
    }
  }
  // Flatten chains so every duplicate points at its group's keeper.
  for (const i of keeperOf.keys()) keeperOf.set(i, root(i));
  return keeperOf;
}

/** The consolidation operation: plan the merges, then write them with their history and the completion. */
export async function runConsolidation(ctx: MemoryContext, op: MemoryOperationTable): Promise<void> {
  const operationId = op.id;
  const dataset = op.dataset ?? 'shared';
  const actor: Actor = { id: op.requester_id, name: op.requester_name };
  const rows = await ctx.store.db
    .selectFrom('memory_units')
    .select(['id', 'text', 'tags', 'entities', 'content_hash'])
    .where('dataset', '=', dataset)
    .where('state', '=', 'valid')
    .orderBy('seq')
    .execute();
  const keeperOf = planMerges(rows);
  const absorbed = new Map<number, number[]>();
  for (const [i, k] of keeperOf) absorbed.set(k, [...(absorbed.get(k) ?? []), i]);
  const at = nowIso();
  await ctx.store.db.transaction().execute(async (trx) => {
    for (const [k, merged] of absorbed) {
      const keeper = rows[k] as (typeof rows)[number];
      const group = [keeper, ...merged.map((m) => rows[m])];
      const tags = uniq(group.flatMap((r) => parseJson<string[]>(r?.tags, [])));
      const entities = uniq(group.flatMap((r) => parseJson<string[]>(r?.entities, [])));
      await trx
        .updateTable('memory_units')
        .set({ tags: JSON.stringify(tags), entities: JSON.stringify(entities), updated_at: at })
        .where('id', '=', keeper.id)
        .execute();
      const mergedIds = merged.map((m) => (rows[m] as (typeof rows)[number]).id);
      await recordHistory(trx, {
        unitId: keeper.id,
        at,
        actor,
        action: 'merged',
        after: { absorbed: mergedIds, operation_id: operationId },
      });
      await trx
        .updateTable('memory_units')
        .set({ state: 'invalidated', updated_at: at })
        .where('id', 'in', mergedIds)
        .execute();
      for (const id of mergedIds) {
        await recordHistory(trx, {
          unitId: id,
          at,
          actor,
          action: 'invalidated',
          before: { state: 'valid' },
          after: { state: 'invalidated', merged_into: keeper.id, operation_id: operationId },
        });
      }
    }
    await completeOperation(trx, operationId, { dataset, deduplicated: keeperOf.size });
  });
}
