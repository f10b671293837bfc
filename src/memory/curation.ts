/** Curation: editing or (in)validating a unit with its history kept, and hard deletes of units and documents. */
import { nowIso } from '../store/json.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { recordHistory } from './history.js';
import { notFound, visible } from './scope.js';
import { contentHash, uniq } from './text.js';
import type { Actor, CurateChanges, DatasetScope, MemoryUnit } from './types.js';
import { getUnit } from './units.js';

const CURATED_FIELDS = ['text', 'context', 'occurred_start', 'occurred_end', 'fact_type', 'entities', 'state'] as const;

/** Edits a unit or (in)validates it; every change is kept in its history. */
export async function curate(
  ctx: MemoryContext,
  id: string,
  changes: CurateChanges,
  datasets: DatasetScope,
  actor: Actor,
): Promise<MemoryUnit> {
  const before = await getUnit(ctx, id, datasets);
  return withStore(async () => {
    const at = nowIso();
    const set: Record<string, unknown> = { updated_at: at };
    const was: Record<string, unknown> = {};
    const now: Record<string, unknown> = {};
    for (const key of CURATED_FIELDS) {
      const value = changes[key];
      if (value === undefined) continue;
      was[key] = before[key];
      now[key] = value;
      set[key] = key === 'entities' ? JSON.stringify(uniq(value as string[])) : value;
    }
    if (changes.text !== undefined) set.content_hash = contentHash(changes.text);
    const action =
      changes.state === 'invalidated' && before.state === 'valid'
        ? 'invalidated'
        : changes.state === 'valid' && before.state === 'invalidated'
          ? 'restored'
          : 'edited';
    await ctx.store.db.transaction().execute(async (trx) => {
      await trx.updateTable('memory_units').set(set).where('id', '=', id).execute();
      await recordHistory(trx, { unitId: id, at, actor, action, before: was, after: now });
    });
    return getUnit(ctx, id, datasets);
  });
}

/** Units (and documents, with their units) that live in `datasets`; ids elsewhere count as not found. */
export async function resolveForDelete(ctx: MemoryContext, ids: readonly string[], datasets: DatasetScope) {
  return withStore(async () => {
    const units = await ctx.store.db
      .selectFrom('memory_units')
      .select(['id', 'dataset', 'source', 'text'])
      .where('id', 'in', [...ids])
      .execute();
    const docs = await ctx.store.db
      .selectFrom('memory_documents')
      .select(['id', 'dataset', 'source', 'text'])
      .where('id', 'in', [...ids])
      .execute();
    const found = [...units, ...docs].filter((r) => visible(datasets, r.dataset));
    const missing = ids.filter((id) => !found.some((r) => r.id === id));
    return { found, missing };
  });
}

/** Hard delete of units and documents (a document takes its units with it); returns how many units went. */
export async function deleteUnits(
  ctx: MemoryContext,
  ids: readonly string[],
  datasets: DatasetScope,
  actor: Actor,
): Promise<{ deleted: number }> {
  const { found, missing } = await resolveForDelete(ctx, ids, datasets);
  if (missing.length > 0) throw notFound('memory unit or document', missing.join(', '));
  return withStore(() =>
    ctx.store.db.transaction().execute(async (trx) => {
      const docIds = found.filter((r) => r.id.startsWith('doc_')).map((r) => r.id);
      const unitIds = found.filter((r) => !r.id.startsWith('doc_')).map((r) => r.id);
      let deleted = 0;
      if (docIds.length > 0) {
        const res = await trx.deleteFrom('memory_units').where('document_id', 'in', docIds).executeTakeFirst();
        deleted += Number(res.numDeletedRows);
        await trx.deleteFrom('memory_documents').where('id', 'in', docIds).execute();
      }
      if (unitIds.length > 0) {
        const res = await trx.deleteFrom('memory_units').where('id', 'in', unitIds).executeTakeFirst();
        deleted += Number(res.numDeletedRows);
      }
      // The history of a deleted unit keeps one last line saying who deleted it.
      const at = nowIso();
      for (const id of unitIds) {
        await recordHistory(trx, { unitId: id, at, actor, action: 'deleted' });
      }
      return { deleted };
    }),
  );
}
