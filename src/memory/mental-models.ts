/**
 * Mental models: named standing questions whose answer (a reflect over the shared dataset) is kept and
 * refreshed as an operation; their CRUD, and staleness against the newest change to the shared facts.
 */
import { GatehouseError } from '../errors.js';
import { nowIso, parseJson } from '../store/json.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { completeOperation, insertOperation } from './operations.js';
import { reflect } from './recall.js';
import { notFound } from './scope.js';
import type { MemoryMentalModelTable, MemoryOperationTable } from './tables.js';
import { hasTag } from './tags.js';
import { newMemoryId, uniq } from './text.js';
import { type Actor, MENTAL_MODEL_DATASETS } from './types.js';

export type MentalModelDetail = 'metadata' | 'content' | 'full';

function toMentalModel(row: MemoryMentalModelTable, latestChange: string | null, detail: MentalModelDetail) {
  const stale = row.refreshed_at === null || (latestChange !== null && latestChange > row.refreshed_at);
  const base = {
    id: row.id,
    name: row.name,
    tags: parseJson<string[]>(row.tags, []),
    stale,
    refreshed_at: row.refreshed_at,
  };
  if (detail === 'metadata') return base;
  if (detail === 'content') return { ...base, content: row.content };
  return {
    ...base,
    content: row.content,
    source_query: row.source_query,
    max_tokens: Number(row.max_tokens),
    trigger: parseJson<Record<string, unknown>>(row.trigger, {}),
    grounding: parseJson<string[]>(row.grounding, []),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface MentalModelListOptions {
  detail: MentalModelDetail;
  tags?: string[] | undefined;
  limit: number;
  offset: number;
}

export interface MentalModelChanges {
  name?: string | undefined;
  source_query?: string | undefined;
  max_tokens?: number | undefined;
  tags?: string[] | undefined;
  trigger?: Record<string, unknown> | undefined;
}

export type NewMentalModel = MentalModelChanges & { name: string; source_query: string };

/** The newest change to the facts mental models are built from (staleness). */
async function latestSharedChange(ctx: MemoryContext): Promise<string | null> {
  const row = await ctx.store.db
    .selectFrom('memory_units')
    .select((eb) => eb.fn.max('updated_at').as('at'))
    .where('dataset', 'in', [...MENTAL_MODEL_DATASETS])
    .executeTakeFirst();
  return (row?.at as string | null | undefined) ?? null;
}

export async function listMentalModels(ctx: MemoryContext, options: MentalModelListOptions) {
  return withStore(async () => {
    let q = ctx.store.db.selectFrom('memory_mental_models');
    for (const tag of options.tags ?? []) q = q.where(hasTag('tags', tag));
    const { total } = await q.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    const page = await q
      .selectAll()
      .orderBy('created_at')
      .orderBy('id')
      .limit(options.limit)
      .offset(options.offset)
      .execute();
    const latest = await latestSharedChange(ctx);
    return {
      mental_models: page.map((r) => toMentalModel(r, latest, options.detail)),
      count: page.length,
      total: Number(total),
    };
  });
}

export async function getMentalModel(ctx: MemoryContext, id: string) {
  return withStore(async () => {
    const row = await ctx.store.db
      .selectFrom('memory_mental_models')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('mental model', id);
    return toMentalModel(row, await latestSharedChange(ctx), 'full');
  });
}

/** Creates the model and queues its first refresh. */
export async function createMentalModel(
  ctx: MemoryContext,
  input: NewMentalModel,
  actor: Actor,
): Promise<Record<string, unknown>> {
  const id = newMemoryId('mm');
  await withStore(async () => {
    const at = nowIso();
    await ctx.store.db
      .insertInto('memory_mental_models')
      .values({
        id,
        name: input.name,
        source_query: input.source_query,
        max_tokens: input.max_tokens ?? 2048,
        tags: JSON.stringify(uniq(input.tags ?? [])),
        trigger: JSON.stringify(input.trigger ?? {}),
        content: null,
        grounding: '[]',
        refreshed_at: null,
        created_by: actor.id,
        created_at: at,
        updated_at: at,
      })
      .execute();
  });
  const refresh = await refreshMentalModel(ctx, id, actor);
  return {
    mental_model_id: id,
    operation_id: refresh.operation_id ?? null,
    ...(refresh.status === 'unsupported' ? { content_status: 'unsupported', reason: refresh.reason } : {}),
  };
}

export async function updateMentalModel(ctx: MemoryContext, id: string, changes: MentalModelChanges) {
  await getMentalModel(ctx, id);
  return withStore(async () => {
    const set: Record<string, unknown> = { updated_at: nowIso() };
    if (changes.name !== undefined) set.name = changes.name;
    if (changes.source_query !== undefined) set.source_query = changes.source_query;
    if (changes.max_tokens !== undefined) set.max_tokens = changes.max_tokens;
    if (changes.tags !== undefined) set.tags = JSON.stringify(uniq(changes.tags));
    if (changes.trigger !== undefined) set.trigger = JSON.stringify(changes.trigger);
    await ctx.store.db.updateTable('memory_mental_models').set(set).where('id', '=', id).execute();
    return getMentalModel(ctx, id);
  });
}

/** Queues a refresh (reflect over the shared dataset); `unsupported` without a language model. */
export async function refreshMentalModel(
  ctx: MemoryContext,
  id: string,
  actor: Actor,
): Promise<Record<string, unknown>> {
  await getMentalModel(ctx, id);
  if (!ctx.llm) {
    return {
      status: 'unsupported',
      mental_model_id: id,
      reason: 'No language-model endpoint is configured (GATEHOUSE_LLM_URL); mental model content needs one.',
    };
  }
  const operationId = newMemoryId('op');
  await withStore(() =>
    insertOperation(ctx, {
      id: operationId,
      kind: 'refresh',
      status: 'pending',
      dataset: null,
      actor,
      targetId: id,
      payload: { mental_model_id: id },
      at: nowIso(),
    }),
  );
  ctx.runner.launch(operationId);
  return { status: 'queued', operation_id: operationId, mental_model_id: id };
}

/** The refresh operation: reflect on the model's question, store the answer and what grounds it. */
export async function runRefresh(ctx: MemoryContext, op: MemoryOperationTable): Promise<void> {
  const model = await ctx.store.db
    .selectFrom('memory_mental_models')
    .selectAll()
    .where('id', '=', op.target_id ?? '')
    .executeTakeFirst();
  if (!model) throw new GatehouseError('memory.not_found', `The mental model ${op.target_id} was deleted.`);
  const answer = await reflect(ctx, model.source_query, {
    datasets: MENTAL_MODEL_DATASETS,
    max_tokens: Number(model.max_tokens),
    budget: 'mid',
  });
  const basedOn = (answer.based_on as { id: string }[] | undefined) ?? [];
  const at = nowIso();
  await ctx.store.db.transaction().execute(async (trx) => {
    await trx
      .updateTable('memory_mental_models')
      .set({
        content: typeof answer.text === 'string' ? answer.text : '',
        grounding: JSON.stringify(basedOn.map((b) => b.id)),
        refreshed_at: at,
        updated_at: at,
      })
      .where('id', '=', model.id)
      .execute();
    await completeOperation(trx, op.id, { mental_model_id: model.id, grounded_in: basedOn.length });
  });
}

export async function deleteMentalModel(ctx: MemoryContext, id: string): Promise<{ deleted: string }> {
  await getMentalModel(ctx, id);
  await withStore(() => ctx.store.db.deleteFrom('memory_mental_models').where('id', '=', id).execute());
  return { deleted: id };
}
