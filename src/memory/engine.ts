/**
 * The memory engine Gatehouse embeds, on the store it already has: memory
 * units (facts) in datasets, the documents they were retained from, their
 * curation history, directives, mental models, and asynchronous operations
 * (retain, consolidation, mental-model refresh) run in the background.
 *
 * Datasets are the caller's business: every read takes the datasets it may
 * see, every write the one dataset it goes to; the surface decides them.
 * Language-model features use the optional `LlmClient`; without one, retain
 * stores each document as one fact, and reflect and refresh answer
 * `unsupported` — never a made-up answer.
 */
import { ERROR_CATALOGUE, type ErrorCode, GatehouseError } from '../errors.js';
import type { Logger } from '../logging.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { extractFacts } from './extraction.js';
import type { LlmClient } from './llm.js';
import {
  cancelOperation,
  completeOperation,
  getOperation,
  insertOperation,
  listOperations,
  type OperationListOptions,
  operationRow,
  retryOperation,
} from './operations.js';
import { OperationRunner } from './runner.js';
import { notFound, visible } from './scope.js';
import { searchUnits, UNIT_COLUMNS } from './search.js';
import type { MemoryOperationTable } from './tables.js';
import { contentHash, estimateTokens, jaccard, newMemoryId, uniq, wordSet } from './text.js';
import {
  type Actor,
  BUDGET_CANDIDATES,
  type Budget,
  type CurateChanges,
  type DatasetScope,
  type FactType,
  MAX_RECALL_TOKENS,
  MENTAL_MODEL_DATASETS,
  type MemoryUnit,
  type NewMemory,
  type OperationView,
  type SearchResult,
  type UnitState,
} from './types.js';
import { toResult, toUnit } from './views.js';

export { parseExtraction } from './extraction.js';
export * from './types.js';

const NEAR_DUPLICATE = 0.85;
const RECALL_COLLAPSE = 0.8;
/** Near-duplicate candidates share a word that appears in at most this many units of the dataset. */
const RARE_WORD_LIMIT = 64;

const NOTHING_LEARNED =
  'Nothing new was learned from this document: every fact extracted from it is already in memory, or none could be extracted.';
const ALREADY_KNOWN = 'content was already known: this exact document was retained before in this dataset.';

export interface MemoryEngineOptions {
  store: Store;
  llm?: LlmClient | undefined;
  logger?: Logger | undefined;
  /** A running operation refreshes `updated_at` this often (default 10 s) … */
  heartbeatMs?: number;
  /** … and a `processing` one not refreshed for this long belongs to a dead process: it runs again (default 60 s). */
  leaseMs?: number;
}

export class MemoryEngine {
  readonly store: Store;
  readonly llm: LlmClient | undefined;
  private readonly runner: OperationRunner;
  private readonly ctx: MemoryContext;

  constructor(options: MemoryEngineOptions) {
    this.store = options.store;
    this.llm = options.llm;
    this.runner = new OperationRunner({
      store: options.store,
      logger: options.logger,
      heartbeatMs: options.heartbeatMs ?? 10_000,
      leaseMs: options.leaseMs ?? 60_000,
      handlers: {
        retain: (op, signal) => this.runRetain(op, signal),
        refresh: (op) => this.runRefresh(op),
        consolidation: async (op) => {
          await this.runConsolidation(op.id, op.dataset ?? 'shared', { id: op.requester_id, name: op.requester_name });
        },
      },
    });
    this.ctx = { store: options.store, llm: options.llm, logger: options.logger, runner: this.runner };
  }

  /** Runs what is pending now, then every heartbeat refreshes leases and reclaims lapsed operations. */
  start(): Promise<void> {
    return this.runner.start();
  }

  /** `processing` operations whose lease lapsed (and that this process does not run) go back to `pending`. */
  reclaimLapsed(): Promise<number> {
    return this.runner.reclaimLapsed();
  }

  get db() {
    return this.store.db;
  }

  // --- retain ----------------------------------------------------------------------------------------------

  /**
   * Stores the document and queues its extraction. A document whose content this dataset already holds is
   * not extracted again: its operation completes at once with `document_fact_count` and the already-known notice.
   */
  async add(
    input: NewMemory,
    dataset: string,
    actor: Actor,
  ): Promise<{ id: string; timestamp: string; operation_id: string }> {
    return withStore(async () => {
      const hash = contentHash(input.text, input.context);
      const at = nowIso();
      const known = await this.db
        .selectFrom('memory_documents')
        .select(['id', 'fact_count', 'created_at'])
        .where('dataset', '=', dataset)
        .where('content_hash', '=', hash)
        .orderBy('created_at')
        .executeTakeFirst();
      const operationId = newMemoryId('op');
      if (known) {
        const count = await this.countDocumentFacts(known.id);
        const result = {
          document_id: known.id,
          facts_extracted: 0,
          document_fact_count: count,
          notice: ALREADY_KNOWN,
        };
        await insertOperation(this.ctx, {
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
      await this.db.transaction().execute(async (trx) => {
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
      this.runner.launch(operationId);
      return { id: documentId, timestamp: at, operation_id: operationId };
    });
  }

  private async countDocumentFacts(documentId: string): Promise<number> {
    const row = await this.db
      .selectFrom('memory_units')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('document_id', '=', documentId)
      .where('state', '=', 'valid')
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  private async runRetain(op: MemoryOperationTable, signal: AbortSignal): Promise<void> {
    const payload = parseJson<{ document_id: string; hints?: NewMemory }>(op.payload, { document_id: '' });
    const doc = await this.db
      .selectFrom('memory_documents')
      .selectAll()
      .where('id', '=', payload.document_id)
      .executeTakeFirst();
    if (!doc) throw new GatehouseError('memory.not_found', `The document ${payload.document_id} was deleted.`);
    const hints = payload.hints ?? { text: doc.text };
    const facts = await extractFacts(this.llm, doc.text, hints, signal);
    const at = nowIso();
    await this.db.transaction().execute(async (trx) => {
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
        await trx
          .insertInto('memory_history')
          .values({
            unit_id: id,
            at,
            actor_id: doc.source,
            actor_name: op.requester_name,
            action: 'created',
            before: null,
            after: JSON.stringify({ text: row.text, fact_type: row.fact_type, document_id: doc.id }),
          })
          .execute();
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

  // --- reading ---------------------------------------------------------------------------------------------

  async search(
    query: string,
    filter: { datasets: readonly string[]; tags?: string[] | undefined; fact_type?: FactType | undefined },
    limit: number,
  ): Promise<SearchResult[]> {
    return withStore(async () =>
      (
        await searchUnits(
          this.store,
          query,
          { datasets: filter.datasets, tags: filter.tags, factType: filter.fact_type },
          limit,
        )
      ).map(toResult),
    );
  }

  async list(options: {
    datasets: readonly string[];
    limit: number;
    cursor?: string | undefined;
    tags?: string[] | undefined;
    fact_type?: FactType | undefined;
    state?: UnitState | 'all' | undefined;
  }): Promise<{ items: MemoryUnit[]; next_cursor: string | null }> {
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
      let query = this.db
        .selectFrom('memory_units')
        .select([...UNIT_COLUMNS])
        .where('dataset', 'in', [...options.datasets]);
      const state = options.state ?? 'valid';
      if (state !== 'all') query = query.where('state', '=', state);
      if (options.fact_type) query = query.where('fact_type', '=', options.fact_type);
      for (const tag of options.tags ?? []) query = query.where('tags', 'like', `%${JSON.stringify(tag)}%`);
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

  /** An offset page with its total (the REST list contract). */
  async listPage(options: {
    datasets: readonly string[];
    state: UnitState | 'all';
    tag?: string | undefined;
    limit: number;
    offset: number;
  }): Promise<{ units: MemoryUnit[]; total: number }> {
    return withStore(async () => {
      if (options.datasets.length === 0) return { units: [], total: 0 };
      let q = this.db.selectFrom('memory_units').where('dataset', 'in', [...options.datasets]);
      if (options.state !== 'all') q = q.where('state', '=', options.state);
      if (options.tag) q = q.where('tags', 'like', `%${JSON.stringify(options.tag)}%`);
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

  /**
   * Token-budgeted, consolidated recall: `budget` sets how many candidates are considered, near-duplicates
   * (word overlap ≥ 0.8) collapse into the best-scored one, and results are packed best first until
   * `max_tokens` would be exceeded.
   */
  async recall(
    query: string,
    options: { datasets: readonly string[]; max_tokens: number; budget: Budget; tags?: string[] | undefined },
  ): Promise<{
    results: (SearchResult & { collapsed?: string[] })[];
    tokens: number;
    max_tokens: number;
    budget: Budget;
    truncated: boolean;
  }> {
    return withStore(async () => {
      const candidates = await searchUnits(
        this.store,
        query,
        { datasets: options.datasets, tags: options.tags },
        BUDGET_CANDIDATES[options.budget],
      );
      const kept: { result: SearchResult & { collapsed?: string[] }; words: Set<string> }[] = [];
      for (const candidate of candidates) {
        const words = wordSet(candidate.row.text);
        const twin = kept.find((k) => jaccard(k.words, words) >= RECALL_COLLAPSE);
        if (twin) {
          twin.result.collapsed = [...(twin.result.collapsed ?? []), candidate.row.id];
          continue;
        }
        kept.push({ result: toResult(candidate), words });
      }
      const results: (SearchResult & { collapsed?: string[] })[] = [];
      let tokens = 0;
      let truncated = false;
      for (const { result } of kept) {
        const cost = estimateTokens(result.text) + (result.context ? estimateTokens(result.context) : 0) + 8;
        if (tokens + cost > options.max_tokens) {
          truncated = true;
          continue; // a shorter, lower-ranked fact may still fit
        }
        tokens += cost;
        results.push(result);
      }
      return { results, tokens, max_tokens: options.max_tokens, budget: options.budget, truncated };
    });
  }

  /** An answer synthesised by the language model from recalled facts only; `unsupported` without one. */
  async reflect(
    query: string,
    options: { datasets: readonly string[]; max_tokens: number; budget: Budget },
  ): Promise<Record<string, unknown>> {
    if (!this.llm) {
      return {
        status: 'unsupported',
        reason: 'No language-model endpoint is configured (GATEHOUSE_LLM_URL); reflect needs one.',
      };
    }
    const recalled = await this.recall(query, {
      datasets: options.datasets,
      budget: options.budget,
      max_tokens: Math.min(options.max_tokens, MAX_RECALL_TOKENS),
    });
    if (recalled.results.length === 0) {
      return {
        status: 'ok',
        text: '',
        based_on: [],
        notice: 'No memory matched the query; nothing to reflect on.',
      };
    }
    const directives = await this.activeDirectives();
    const facts = recalled.results.map((r, i) => `[${i + 1}] (${r.id}) ${r.text}`).join('\n');
    const text = await this.llm.chat(
      [
        {
          role: 'system',
          content:
            'Answer the question using only the numbered memory facts given. Cite facts as [n]. ' +
            'If the facts do not answer it, say so.' +
            (directives.length > 0 ? `\nStanding directives:\n${directives.map((d) => `- ${d}`).join('\n')}` : ''),
        },
        { role: 'user', content: `Facts:\n${facts}\n\nQuestion: ${query}` },
      ],
      { maxTokens: Math.min(options.max_tokens, 4096) },
    );
    return {
      status: 'ok',
      text,
      based_on: recalled.results.map((r) => ({ id: r.id, text: r.text, score: r.score })),
      model: this.llm.model,
    };
  }

  private async activeDirectives(): Promise<string[]> {
    const rows = await this.db
      .selectFrom('memory_directives')
      .select(['content'])
      .where('is_active', '=', 1)
      .orderBy('priority', 'desc')
      .orderBy('created_at')
      .limit(20)
      .execute();
    return rows.map((r) => r.content);
  }

  /** One unit, if it lives in one of `datasets` (otherwise it does not exist for this caller). */
  async getUnit(id: string, datasets: DatasetScope): Promise<MemoryUnit> {
    return withStore(async () => {
      const row = await this.db
        .selectFrom('memory_units')
        .select([...UNIT_COLUMNS])
        .where('id', '=', id)
        .executeTakeFirst();
      if (!row || !visible(datasets, row.dataset)) throw notFound('memory unit', id);
      return toUnit(row);
    });
  }

  async history(id: string, datasets: DatasetScope): Promise<{ id: string; unit: MemoryUnit; history: unknown[] }> {
    const unit = await this.getUnit(id, datasets);
    const rows = await withStore(() =>
      this.db.selectFrom('memory_history').selectAll().where('unit_id', '=', id).orderBy('seq').execute(),
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

  async tags(datasets: readonly string[]): Promise<{ tags: { tag: string; count: number }[]; count: number }> {
    return withStore(async () => {
      if (datasets.length === 0) return { tags: [], count: 0 };
      const rows = await this.db
        .selectFrom('memory_units')
        .select('tags')
        .where('dataset', 'in', [...datasets])
        .where('state', '=', 'valid')
        .where('tags', '!=', '[]')
        .execute();
      const counts = new Map<string, number>();
      for (const row of rows)
        for (const tag of parseJson<string[]>(row.tags, [])) counts.set(tag, (counts.get(tag) ?? 0) + 1);
      const tags = [...counts]
        .map(([tag, count]) => ({ tag, count }))
        .sort((a, b) => b.count - a.count || (a.tag < b.tag ? -1 : 1));
      return { tags, count: tags.length };
    });
  }

  async stats(datasets: readonly string[]): Promise<Record<string, unknown>> {
    return withStore(async () => {
      const byDataset =
        datasets.length === 0
          ? []
          : await this.db
              .selectFrom('memory_units')
              .select(['dataset', 'state', 'fact_type', (eb) => eb.fn.countAll<number>().as('n')])
              .where('dataset', 'in', [...datasets])
              .groupBy(['dataset', 'state', 'fact_type'])
              .execute();
      const documents =
        datasets.length === 0
          ? 0
          : Number(
              (
                await this.db
                  .selectFrom('memory_documents')
                  .select((eb) => eb.fn.countAll<number>().as('n'))
                  .where('dataset', 'in', [...datasets])
                  .executeTakeFirstOrThrow()
              ).n,
            );
      const ops = await this.db
        .selectFrom('memory_operations')
        .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy('status')
        .execute();
      const count = async (table: 'memory_directives' | 'memory_mental_models') =>
        Number(
          (
            await this.db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const perDataset: Record<string, { valid: number; invalidated: number }> = {};
      const factTypes: Record<string, number> = {};
      let valid = 0;
      let invalidated = 0;
      for (const row of byDataset) {
        const n = Number(row.n);
        const entry = perDataset[row.dataset] ?? { valid: 0, invalidated: 0 };
        perDataset[row.dataset] = entry;
        if (row.state === 'valid') {
          entry.valid += n;
          valid += n;
          factTypes[row.fact_type] = (factTypes[row.fact_type] ?? 0) + n;
        } else {
          entry.invalidated += n;
          invalidated += n;
        }
      }
      return {
        nodes: valid,
        invalidated,
        documents,
        fact_types: factTypes,
        datasets: perDataset,
        directives: await count('memory_directives'),
        mental_models: await count('memory_mental_models'),
        operations: Object.fromEntries(ops.map((o) => [o.status, Number(o.n)])),
      };
    });
  }

  // --- curation --------------------------------------------------------------------------------------------

  /** Edits a unit or (in)validates it; every change is kept in its history. */
  async curate(id: string, changes: CurateChanges, datasets: DatasetScope, actor: Actor): Promise<MemoryUnit> {
    const before = await this.getUnit(id, datasets);
    return withStore(async () => {
      const at = nowIso();
      const set: Record<string, unknown> = { updated_at: at };
      const was: Record<string, unknown> = {};
      const now: Record<string, unknown> = {};
      const keys = ['text', 'context', 'occurred_start', 'occurred_end', 'fact_type', 'entities', 'state'] as const;
      for (const key of keys) {
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
      await this.db.transaction().execute(async (trx) => {
        await trx.updateTable('memory_units').set(set).where('id', '=', id).execute();
        await trx
          .insertInto('memory_history')
          .values({
            unit_id: id,
            at,
            actor_id: actor.id,
            actor_name: actor.name,
            action,
            before: JSON.stringify(was),
            after: JSON.stringify(now),
          })
          .execute();
      });
      return this.getUnit(id, datasets);
    });
  }

  /** Units (and documents, with their units) that live in `datasets`; ids elsewhere count as not found. */
  async resolveForDelete(ids: readonly string[], datasets: DatasetScope) {
    return withStore(async () => {
      const units = await this.db
        .selectFrom('memory_units')
        .select(['id', 'dataset', 'source'])
        .where('id', 'in', [...ids])
        .execute();
      const docs = await this.db
        .selectFrom('memory_documents')
        .select(['id', 'dataset', 'source'])
        .where('id', 'in', [...ids])
        .execute();
      const found = [...units, ...docs].filter((r) => visible(datasets, r.dataset));
      const missing = ids.filter((id) => !found.some((r) => r.id === id));
      return { found, missing };
    });
  }

  /** Hard delete of units and documents (a document takes its units with it); returns how many units went. */
  async delete(ids: readonly string[], datasets: DatasetScope, actor: Actor): Promise<{ deleted: number }> {
    const { found, missing } = await this.resolveForDelete(ids, datasets);
    if (missing.length > 0) throw notFound('memory unit or document', missing.join(', '));
    return withStore(() =>
      this.db.transaction().execute(async (trx) => {
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
          await trx
            .insertInto('memory_history')
            .values({
              unit_id: id,
              at,
              actor_id: actor.id,
              actor_name: actor.name,
              action: 'deleted',
              before: null,
              after: null,
            })
            .execute();
        }
        return { deleted };
      }),
    );
  }

  /**
   * Merges exact duplicates (same normalised text) and near-duplicates (word overlap ≥ 0.85) within one
   * dataset: the oldest unit is kept and absorbs the others' tags and entities; the others are invalidated
   * (not deleted: `memory_curate` with `state: "valid"` brings one back). Runs as an operation.
   */
  async consolidate(dataset: string, actor: Actor): Promise<{ operation_id: string; deduplicated: number }> {
    return withStore(async () => {
      const id = newMemoryId('op');
      await insertOperation(this.ctx, {
        id,
        kind: 'consolidation',
        status: 'pending',
        dataset,
        actor,
        targetId: null,
        payload: { dataset },
        at: nowIso(),
      });
      // Run as an operation (claimed, leased, retryable like the others), and wait for it: the answer carries the count.
      this.runner.launch(id);
      await this.runner.settled(id);
      const op = await this.operationGet(id);
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

  private async runConsolidation(operationId: string, dataset: string, actor: Actor): Promise<number> {
    const rows = await this.db
      .selectFrom('memory_units')
      .select(['id', 'text', 'tags', 'entities', 'content_hash'])
      .where('dataset', '=', dataset)
      .where('state', '=', 'valid')
      .orderBy('seq')
      .execute();
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
    const absorbed = new Map<number, number[]>();
    for (const i of keeperOf.keys()) {
      const k = root(i);
      absorbed.set(k, [...(absorbed.get(k) ?? []), i]);
    }
    const at = nowIso();
    await this.db.transaction().execute(async (trx) => {
      for (const [k, merged] of absorbed) {
        const keeper = rows[k] as (typeof rows)[number];
        const tags = uniq([keeper, ...merged.map((m) => rows[m])].flatMap((r) => parseJson<string[]>(r?.tags, [])));
        const entities = uniq(
          [keeper, ...merged.map((m) => rows[m])].flatMap((r) => parseJson<string[]>(r?.entities, [])),
        );
        await trx
          .updateTable('memory_units')
          .set({ tags: JSON.stringify(tags), entities: JSON.stringify(entities), updated_at: at })
          .where('id', '=', keeper.id)
          .execute();
        const mergedIds = merged.map((m) => (rows[m] as (typeof rows)[number]).id);
        await trx
          .insertInto('memory_history')
          .values({
            unit_id: keeper.id,
            at,
            actor_id: actor.id,
            actor_name: actor.name,
            action: 'merged',
            before: null,
            after: JSON.stringify({ absorbed: mergedIds, operation_id: operationId }),
          })
          .execute();
        await trx
          .updateTable('memory_units')
          .set({ state: 'invalidated', updated_at: at })
          .where('id', 'in', mergedIds)
          .execute();
        for (const id of mergedIds) {
          await trx
            .insertInto('memory_history')
            .values({
              unit_id: id,
              at,
              actor_id: actor.id,
              actor_name: actor.name,
              action: 'invalidated',
              before: JSON.stringify({ state: 'valid' }),
              after: JSON.stringify({ state: 'invalidated', merged_into: keeper.id, operation_id: operationId }),
            })
            .execute();
        }
      }
      await completeOperation(trx, operationId, { dataset, deduplicated: keeperOf.size });
    });
    return keeperOf.size;
  }

  // --- directives ------------------------------------------------------------------------------------------

  async directiveList(options: {
    active_only?: boolean | undefined;
    tags?: string[] | undefined;
    limit: number;
    offset: number;
  }) {
    return withStore(async () => {
      let q = this.db.selectFrom('memory_directives').selectAll();
      if (options.active_only) q = q.where('is_active', '=', 1);
      for (const tag of options.tags ?? []) q = q.where('tags', 'like', `%${JSON.stringify(tag)}%`);
      const all = await q.orderBy('priority', 'desc').orderBy('created_at').execute();
      const page = all.slice(options.offset, options.offset + options.limit);
      return { directives: page.map(toDirective), count: page.length, total: all.length };
    });
  }

  async directiveGet(id: string) {
    return withStore(async () => {
      const row = await this.db.selectFrom('memory_directives').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row) throw notFound('directive', id);
      return toDirective(row);
    });
  }

  async directiveCreate(
    input: {
      name: string;
      content: string;
      priority?: number | undefined;
      is_active?: boolean | undefined;
      tags?: string[] | undefined;
    },
    actor: Actor,
  ) {
    return withStore(async () => {
      const at = nowIso();
      const row = {
        id: newMemoryId('dir'),
        name: input.name,
        content: input.content,
        priority: input.priority ?? 0,
        is_active: input.is_active === false ? 0 : 1,
        tags: JSON.stringify(uniq(input.tags ?? [])),
        created_by: actor.id,
        created_at: at,
        updated_at: at,
      };
      await this.db.insertInto('memory_directives').values(row).execute();
      return toDirective(row);
    });
  }

  async directiveUpdate(
    id: string,
    changes: {
      name?: string | undefined;
      content?: string | undefined;
      priority?: number | undefined;
      is_active?: boolean | undefined;
      tags?: string[] | undefined;
    },
  ) {
    await this.directiveGet(id);
    return withStore(async () => {
      const set: Record<string, unknown> = { updated_at: nowIso() };
      if (changes.name !== undefined) set.name = changes.name;
      if (changes.content !== undefined) set.content = changes.content;
      if (changes.priority !== undefined) set.priority = changes.priority;
      if (changes.is_active !== undefined) set.is_active = changes.is_active ? 1 : 0;
      if (changes.tags !== undefined) set.tags = JSON.stringify(uniq(changes.tags));
      await this.db.updateTable('memory_directives').set(set).where('id', '=', id).execute();
      return this.directiveGet(id);
    });
  }

  async directiveDelete(id: string): Promise<{ deleted: string }> {
    await this.directiveGet(id);
    await withStore(() => this.db.deleteFrom('memory_directives').where('id', '=', id).execute());
    return { deleted: id };
  }

  // --- mental models ---------------------------------------------------------------------------------------

  /** The newest change to the facts mental models are built from (staleness). */
  private async latestSharedChange(): Promise<string | null> {
    const row = await this.db
      .selectFrom('memory_units')
      .select((eb) => eb.fn.max('updated_at').as('at'))
      .where('dataset', 'in', [...MENTAL_MODEL_DATASETS])
      .executeTakeFirst();
    return (row?.at as string | null | undefined) ?? null;
  }

  async mentalModelList(options: {
    detail: 'metadata' | 'content' | 'full';
    tags?: string[] | undefined;
    limit: number;
    offset: number;
  }) {
    return withStore(async () => {
      let q = this.db.selectFrom('memory_mental_models').selectAll();
      for (const tag of options.tags ?? []) q = q.where('tags', 'like', `%${JSON.stringify(tag)}%`);
      const all = await q.orderBy('created_at').execute();
      const latest = await this.latestSharedChange();
      const page = all.slice(options.offset, options.offset + options.limit);
      return {
        mental_models: page.map((r) => toMentalModel(r, latest, options.detail)),
        count: page.length,
        total: all.length,
      };
    });
  }

  async mentalModelGet(id: string) {
    return withStore(async () => {
      const row = await this.db.selectFrom('memory_mental_models').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row) throw notFound('mental model', id);
      return toMentalModel(row, await this.latestSharedChange(), 'full');
    });
  }

  async mentalModelCreate(
    input: {
      name: string;
      source_query: string;
      max_tokens?: number | undefined;
      tags?: string[] | undefined;
      trigger?: Record<string, unknown> | undefined;
    },
    actor: Actor,
  ): Promise<Record<string, unknown>> {
    const id = newMemoryId('mm');
    await withStore(async () => {
      const at = nowIso();
      await this.db
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
    const refresh = await this.mentalModelRefresh(id, actor);
    return {
      mental_model_id: id,
      operation_id: refresh.operation_id ?? null,
      ...(refresh.status === 'unsupported' ? { content_status: 'unsupported', reason: refresh.reason } : {}),
    };
  }

  async mentalModelUpdate(
    id: string,
    changes: {
      name?: string | undefined;
      source_query?: string | undefined;
      max_tokens?: number | undefined;
      tags?: string[] | undefined;
      trigger?: Record<string, unknown> | undefined;
    },
  ) {
    await this.mentalModelGet(id);
    return withStore(async () => {
      const set: Record<string, unknown> = { updated_at: nowIso() };
      if (changes.name !== undefined) set.name = changes.name;
      if (changes.source_query !== undefined) set.source_query = changes.source_query;
      if (changes.max_tokens !== undefined) set.max_tokens = changes.max_tokens;
      if (changes.tags !== undefined) set.tags = JSON.stringify(uniq(changes.tags));
      if (changes.trigger !== undefined) set.trigger = JSON.stringify(changes.trigger);
      await this.db.updateTable('memory_mental_models').set(set).where('id', '=', id).execute();
      return this.mentalModelGet(id);
    });
  }

  /** Queues a refresh (reflect over the shared dataset); `unsupported` without a language model. */
  async mentalModelRefresh(id: string, actor: Actor): Promise<Record<string, unknown>> {
    await this.mentalModelGet(id);
    if (!this.llm) {
      return {
        status: 'unsupported',
        mental_model_id: id,
        reason: 'No language-model endpoint is configured (GATEHOUSE_LLM_URL); mental model content needs one.',
      };
    }
    const operationId = newMemoryId('op');
    await withStore(() =>
      insertOperation(this.ctx, {
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
    this.runner.launch(operationId);
    return { status: 'queued', operation_id: operationId, mental_model_id: id };
  }

  private async runRefresh(op: MemoryOperationTable): Promise<void> {
    const model = await this.db
      .selectFrom('memory_mental_models')
      .selectAll()
      .where('id', '=', op.target_id ?? '')
      .executeTakeFirst();
    if (!model) throw new GatehouseError('memory.not_found', `The mental model ${op.target_id} was deleted.`);
    const answer = await this.reflect(model.source_query, {
      datasets: MENTAL_MODEL_DATASETS,
      max_tokens: Number(model.max_tokens),
      budget: 'mid',
    });
    const basedOn = (answer.based_on as { id: string }[] | undefined) ?? [];
    const at = nowIso();
    await this.db.transaction().execute(async (trx) => {
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

  async mentalModelDelete(id: string): Promise<{ deleted: string }> {
    await this.mentalModelGet(id);
    await withStore(() => this.db.deleteFrom('memory_mental_models').where('id', '=', id).execute());
    return { deleted: id };
  }

  // --- operations ------------------------------------------------------------------------------------------

  operationList(options: OperationListOptions) {
    return listOperations(this.ctx, options);
  }

  operationGet(id: string, requesterId?: string): Promise<OperationView> {
    return getOperation(this.ctx, id, requesterId);
  }

  /** pending or processing → cancelled; a running extraction is aborted and writes nothing. */
  operationCancel(id: string, requesterId?: string): Promise<OperationView> {
    return cancelOperation(this.ctx, id, requesterId);
  }

  /** failed or cancelled → pending again, and run. */
  operationRetry(id: string, requesterId?: string): Promise<OperationView> {
    return retryOperation(this.ctx, id, requesterId);
  }

  /** Picks up pending operations (left by a restart) now. */
  resume(): Promise<number> {
    return this.runner.resume();
  }

  /** Resolves when every operation this process started has finished (tests, shutdown). */
  idle(): Promise<void> {
    return this.runner.idle();
  }

  close(): Promise<void> {
    return this.runner.close();
  }
}

function toDirective(row: {
  id: string;
  name: string;
  content: string;
  priority: number;
  is_active: number;
  tags: string;
  created_by: string | null;
  created_at: string;
  updated_at: string;
}) {
  return {
    id: row.id,
    name: row.name,
    content: row.content,
    priority: Number(row.priority),
    is_active: Number(row.is_active) === 1,
    tags: parseJson<string[]>(row.tags, []),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function toMentalModel(
  row: {
    id: string;
    name: string;
    source_query: string;
    max_tokens: number;
    tags: string;
    trigger: string;
    content: string | null;
    grounding: string;
    refreshed_at: string | null;
    created_at: string;
    updated_at: string;
  },
  latestChange: string | null,
  detail: 'metadata' | 'content' | 'full',
) {
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
