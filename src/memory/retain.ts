/**
 * Retain: `add` stores a document and queues its extraction; the retain operation then extracts the
 * document's facts and stores those not already known, all in the transaction that completes it.
 */
import { GatehouseError } from '../errors.js';
import { nowIso, parseJson } from '../store/json.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { extractFacts } from './extraction.js';
import { recordHistory } from './history.js';
import { completeOperation, insertOperation, operationRow } from './operations.js';
import type { MemoryOperationTable } from './tables.js';
import { contentHash, newMemoryId, uniq } from './text.js';
import type { Actor, NewMemory } from './types.js';

const NOTHING_LEARNED =
  'Nothing new was learned from this document: every fact extracted from it is already in memory, or none could be extracted.';
const ALREADY_KNOWN = 'content was already known: this exact document was retained before in this dataset.';

/**
 * Stores the document and queues its extraction. A document whose content this dataset already holds is
 * not extracted again: its operation completes at once with `document_fact_count` and the already-known notice.
 */
export async function add(
  ctx: MemoryContext,
  input: NewMemory,
  dataset: string,
  actor: Actor,
): Promise<{ id: string; timestamp: string; operation_id: string }> {
  const db = ctx.store.db;
  return withStore(async () => {
    const hash = contentHash(input.text, input.context);
    const at = nowIso();
    const known = await db
      .selectFrom('memory_documents')
      .select(['id', 'fact_count', 'created_at'])
      .where('dataset', '=', dataset)
      .where('content_hash', '=', hash)
      .orderBy('created_at')
      .executeTakeFirst();
    const operationId = newMemoryId('op');
    if (known) {
      const count = await countDocumentFacts(ctx, known.id);
      const result = {
        document_id: known.id,
        facts_extracted: 0,
        document_fact_count: count,
        notice: ALREADY_KNOWN,
      };
      await insertOperation(ctx, {
        id: operationId,
        kind: 'retain',
        status: 'completed',
        dataset,
        actor,
        targetId: known.id,
        payload: { document_id: known.id, already_known: true },
        result,
        at,
      });
      return { id: known.id, timestamp: known.created_at, operation_id: operationId };
    }
    const documentId = newMemoryId('doc');
    await db.transaction().execute(async (trx) => {
      await trx
        .insertInto('memory_documents')
        .values({
          id: documentId,
          dataset,
          content_hash: hash,
          text: input.text,
          context: input.context ?? null,
          tags: JSON.stringify(uniq(input.tags ?? [])),
          source: actor.id,
          fact_count: 0,
          created_at: at,
        })
        .execute();
      await trx
        .insertInto('memory_operations')
        .values(
          operationRow({
            id: operationId,
            kind: 'retain',
            status: 'pending',
            dataset,
            actor,
            targetId: documentId,
            payload: { document_id: documentId, hints: { ...input, text: undefined } },
            at,
          }),
        )
        .execute();
    });
    ctx.runner.launch(operationId);
    return { id: documentId, timestamp: at, operation_id: operationId };
  });
}

async function countDocumentFacts(ctx: MemoryContext, documentId: string): Promise<number> {
  const row = await ctx.store.db
    .selectFrom('memory_units')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('document_id', '=', documentId)
    .where('state', '=', 'valid')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The retain operation: extract, skip exact duplicates of valid facts, store the rest with their history. */
export async function runRetain(ctx: MemoryContext, op: MemoryOperationTable, signal: AbortSignal): Promise<void> {
  const payload = parseJson<{ document_id: string; hints?: NewMemory }>(op.payload, { document_id: '' });
  const doc = await ctx.store.db
    .selectFrom('memory_documents')
    .selectAll()
    .where('id', '=', payload.document_id)
    .executeTakeFirst();
  if (!doc) throw new GatehouseError('memory.not_found', `The document ${payload.document_id} was deleted.`);
  const hints = payload.hints ?? { text: doc.text };
  const facts = await extractFacts(ctx.llm, doc.text, hints, signal);
  const at = nowIso();
  await ctx.store.db.transaction().execute(async (trx) => {
    const hashes = facts.map((f) => contentHash(f.text));
    const existing = new Set(
      hashes.length === 0
        ? []
        : (
            await trx
              .selectFrom('memory_units')
              .select('content_hash')
              .where('dataset', '=', doc.dataset)
              .where('state', '=', 'valid')
              .where('content_hash', 'in', uniq(hashes))
              .execute()
          ).map((r) => r.content_hash),
    );
    const ids: string[] = [];
    for (const [i, fact] of facts.entries()) {
      const hash = hashes[i] as string;
      if (existing.has(hash)) continue; // an exact duplicate of a fact already known
      existing.add(hash);
      const id = newMemoryId('mem');
      const row = {
        id,
        dataset: doc.dataset,
        text: fact.text,
        context: doc.context,
        fact_type: fact.fact_type ?? hints.fact_type ?? 'world',
        entities: JSON.stringify(uniq([...(hints.entities ?? []), ...(fact.entities ?? [])])),
        tags: doc.tags,
        occurred_start: fact.occurred_start ?? hints.occurred_start ?? null,
        occurred_end: fact.occurred_end ?? hints.occurred_end ?? null,
        state: 'valid',
        source: doc.source,
        document_id: doc.id,
        content_hash: hash,
        metadata: JSON.stringify(hints.metadata ?? {}),
        created_at: at,
        updated_at: at,
      };
      await trx.insertInto('memory_units').values(row).execute();
      await recordHistory(trx, {
        unitId: id,
        at,
        actor: { id: doc.source, name: op.requester_name },
        action: 'created',
        after: { text: row.text, fact_type: row.fact_type, document_id: doc.id },
      });
      ids.push(id);
    }
    await trx.updateTable('memory_documents').set({ fact_count: ids.length }).where('id', '=', doc.id).execute();
    const result = {
      document_id: doc.id,
      facts_extracted: ids.length,
      unit_ids: ids,
      ...(ids.length === 0 ? { nothing_learned: true, notice: NOTHING_LEARNED } : {}),
    };
    await completeOperation(trx, op.id, result);
  });
}
