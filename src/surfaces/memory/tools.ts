/**
 * The 26 tools of `/mcp/memory` (hal0-memory's contract), each with its real
 * typed input schema — written once in zod, validated with it, and listed as
 * the JSON Schema converted from it — and its tier: reads and reversible
 * writes are autonomous, the two deletes of bank-level objects are gated, and
 * `memory_delete` gates itself (see the surface).
 */
import type { Tool } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { Tier } from '../../api/route.js';

export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const DATASET_PATTERN = /^(shared|agents|private:[A-Za-z0-9_-]{1,64}|project:[A-Za-z0-9_.-]{1,64})$/;
const TAG_PATTERN = /^[A-Za-z0-9_.:/-]{1,64}$/;

const id = z.string().regex(ID_PATTERN, 'an id of 1-64 letters, digits, _ or -');
const dataset = z
  .string()
  .regex(DATASET_PATTERN, 'shared, agents, private:<client> or project:<id>')
  .describe(
    'Dataset: "shared" (default), "agents", "project:<id>", or your own "private:<client>". Reads default to shared plus your private dataset.',
  );
const tags = z.array(z.string().regex(TAG_PATTERN, 'a tag of 1-64 letters, digits, _ . : / or -')).max(32);
/** `2026-12-05`, or a date and time (`2026-12-05T10:00`, seconds, a fraction and an offset optional). */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
const isoDate = z
  .string()
  .max(40)
  .refine((v) => ISO_8601.test(v) && !Number.isNaN(Date.parse(v)), 'an ISO-8601 date or time');

/** An event's start is not after its end, when both are given. */
const startNotAfterEnd = (
  value: { occurred_start?: string | null | undefined; occurred_end?: string | null | undefined },
  ctx: z.RefinementCtx,
): void => {
  const { occurred_start: start, occurred_end: end } = value;
  if (start && end && Date.parse(start) > Date.parse(end)) {
    ctx.addIssue({ code: 'custom', path: ['occurred_end'], message: 'occurred_end is before occurred_start' });
  }
};
const factType = z.enum(['world', 'experience']);
const budget = z.enum(['low', 'mid', 'high']);
const query = z.string().trim().min(1).max(2000);
const entities = z.array(z.string().min(1).max(200)).max(50);
const page = { limit: z.number().int().min(1).max(200).default(50), offset: z.number().int().min(0).default(0) };

const atLeastOne =
  (fields: readonly string[]) =>
  (value: Record<string, unknown>, ctx: z.RefinementCtx): void => {
    if (!fields.some((f) => value[f] !== undefined)) {
      ctx.addIssue({ code: 'custom', message: `give id plus at least one field to change: ${fields.join(', ')}` });
    }
  };

/**
 * What a metadata key may not be on `memory_add`: a name for the memory's author. The author is `source`, set by
 * Gatehouse from the caller's token; `metadata.source` (or `author`, `creator`, `created_by`, with `_id` / `_name`,
 * in any case or separator) beside it would let an agent make a memory read as another client's. Words with
 * business meanings of their own (a customer's `client`, a repository's `owner`) stay free.
 */
const AUTHOR_WORDS = new Set(['source', 'author', 'creator', 'createdby']);

export function isAuthorKey(key: string): boolean {
  const word = key.toLowerCase().replace(/[^a-z0-9]/g, '');
  return AUTHOR_WORDS.has(word) || AUTHOR_WORDS.has(word.replace(/(id|name)$/, ''));
}

const CURATE_FIELDS = ['text', 'context', 'occurred_start', 'occurred_end', 'fact_type', 'entities', 'state'] as const;
const MODEL_FIELDS = ['name', 'source_query', 'max_tokens', 'tags', 'trigger'] as const;
const DIRECTIVE_FIELDS = ['name', 'content', 'priority', 'is_active', 'tags'] as const;

export const MEMORY_SCHEMAS = {
  memory_search: z.strictObject({
    query,
    limit: z.number().int().min(1).max(200).default(10),
    dataset: dataset.optional(),
    tags: tags.optional(),
    fact_type: factType.optional(),
  }),
  memory_list: z.strictObject({
    limit: z.number().int().min(1).max(200).default(50),
    cursor: z.string().max(64).optional(),
    dataset: dataset.optional(),
    tags: tags.optional(),
    fact_type: factType.optional(),
    state: z.enum(['valid', 'invalidated', 'all']).default('valid'),
  }),
  memory_recall: z.strictObject({
    query,
    max_tokens: z.number().int().min(1).max(32768).default(4096),
    budget: budget.default('mid'),
    dataset: dataset.optional(),
    tags: tags.optional(),
  }),
  memory_reflect: z.strictObject({
    query,
    max_tokens: z.number().int().min(1).max(32768).default(2048),
    budget: budget.default('mid'),
    dataset: dataset.optional(),
  }),
  memory_history: z.strictObject({ id }),
  memory_mental_model_list: z.strictObject({
    detail: z.enum(['metadata', 'content', 'full']).default('metadata'),
    tags: tags.optional(),
    ...page,
  }),
  memory_mental_model_get: z.strictObject({ id }),
  memory_mental_model_create: z.strictObject({
    name: z.string().trim().min(1).max(200),
    source_query: query,
    max_tokens: z.number().int().min(1).max(32768).optional(),
    tags: tags.optional(),
    trigger: z.record(z.string(), z.unknown()).optional(),
  }),
  memory_mental_model_update: z
    .strictObject({
      id,
      name: z.string().trim().min(1).max(200).optional(),
      source_query: query.optional(),
      max_tokens: z.number().int().min(1).max(32768).optional(),
      tags: tags.optional(),
      trigger: z.record(z.string(), z.unknown()).optional(),
    })
    .superRefine(atLeastOne(MODEL_FIELDS)),
  memory_mental_model_refresh: z.strictObject({ id }),
  memory_mental_model_delete: z.strictObject({ id }),
  memory_directive_list: z.strictObject({ active_only: z.boolean().optional(), tags: tags.optional(), ...page }),
  memory_directive_get: z.strictObject({ id }),
  memory_directive_create: z.strictObject({
    name: z.string().trim().min(1).max(200),
    content: z.string().trim().min(1).max(8000),
    priority: z.number().int().min(-100).max(100).optional(),
    is_active: z.boolean().optional(),
    tags: tags.optional(),
  }),
  memory_directive_update: z
    .strictObject({
      id,
      name: z.string().trim().min(1).max(200).optional(),
      content: z.string().trim().min(1).max(8000).optional(),
      priority: z.number().int().min(-100).max(100).optional(),
      is_active: z.boolean().optional(),
      tags: tags.optional(),
    })
    .superRefine(atLeastOne(DIRECTIVE_FIELDS)),
  memory_directive_delete: z.strictObject({ id }),
  memory_operation_list: z.strictObject({
    status: z.enum(['pending', 'processing', 'completed', 'failed', 'cancelled']).optional(),
    kind: z.enum(['retain', 'consolidation', 'refresh']).optional(),
    ...page,
  }),
  memory_operation_get: z.strictObject({ id }),
  memory_operation_cancel: z.strictObject({ id }),
  memory_operation_retry: z.strictObject({ id }),
  memory_tags_list: z.strictObject({ dataset: dataset.optional() }),
  memory_bank_stats: z.strictObject({ dataset: dataset.optional() }),
  memory_add: z
    .strictObject({
      text: z.string().trim().min(1, 'text must not be empty').max(100_000),
      context: z.string().max(2000).optional(),
      fact_type: factType.optional(),
      entities: entities.optional(),
      tags: tags.optional(),
      occurred_start: isoDate.optional(),
      occurred_end: isoDate.optional(),
      metadata: z
        .record(z.string(), z.union([z.string().max(2000), z.number(), z.boolean(), z.null()]))
        .describe(
          'Free-form key/values kept with the memory. Keys naming its author (source, author, creator, created_by) are refused: the author is set from your token.',
        )
        .optional(),
      dataset: dataset.optional(),
    })
    .superRefine(startNotAfterEnd),
  memory_delete: z.strictObject({
    ids: z.array(id).min(1, 'ids must name at least one memory').max(100),
    dataset: dataset.optional(),
  }),
  memory_curate: z
    .strictObject({
      id,
      text: z.string().trim().min(1).max(100_000).optional(),
      context: z.string().max(2000).nullable().optional(),
      occurred_start: isoDate.nullable().optional(),
      occurred_end: isoDate.nullable().optional(),
      fact_type: factType.optional(),
      entities: entities.optional(),
      state: z.enum(['valid', 'invalidated']).optional(),
    })
    .superRefine(atLeastOne(CURATE_FIELDS))
    .superRefine(startNotAfterEnd),
  memory_bank_consolidate: z.strictObject({ dataset: dataset.optional() }),
} as const;

export type MemoryToolName = keyof typeof MEMORY_SCHEMAS;
export type MemoryArgs<N extends MemoryToolName> = z.output<(typeof MEMORY_SCHEMAS)[N]>;

interface ToolMeta {
  title: string;
  description: string;
  /** `memory_delete` is autonomous for one id of the caller's own and gates itself otherwise. */
  tier: Tier;
}

const META: Record<MemoryToolName, ToolMeta> = {
  memory_search: {
    title: 'Search memory',
    description:
      'Full-text search over memory units (BM25 / ts_rank blended with recency). Returns {results: [{id, text, score, timestamp, dataset, tags, source, metadata, ...}], count}.',
    tier: 'autonomousRead',
  },
  memory_list: {
    title: 'List memory',
    description: 'Memory units, newest first. Returns {items: [...], next_cursor}; pass next_cursor back as cursor.',
    tier: 'autonomousRead',
  },
  memory_recall: {
    title: 'Recall',
    description:
      'Token-budgeted, consolidated memory for a query: near-duplicates collapsed, best first, within max_tokens (up to 32768). budget (low/mid/high) sets how many candidates are considered. Returns {results, tokens, truncated}.',
    tier: 'autonomousRead',
  },
  memory_reflect: {
    title: 'Reflect',
    description:
      'A language-model answer grounded only in recalled facts ({status: "ok", text, based_on}); {status: "unsupported"} when no language-model endpoint is configured.',
    tier: 'autonomousRead',
  },
  memory_history: {
    title: 'Memory history',
    description: 'The curation history of one memory unit (created, edited, invalidated, restored, merged).',
    tier: 'autonomousRead',
  },
  memory_mental_model_list: {
    title: 'List mental models',
    description:
      "The bank's mental models (stored reflect answers over the shared dataset, kept refreshed). Metadata only (id, name, tags, stale) unless detail is content or full.",
    tier: 'autonomousRead',
  },
  memory_mental_model_get: { title: 'Get mental model', description: 'One mental model.', tier: 'autonomousRead' },
  memory_mental_model_create: {
    title: 'Create mental model',
    description:
      'Creates a mental model; its content is generated by an asynchronous refresh. Returns {mental_model_id, operation_id}.',
    tier: 'autonomousWrite',
  },
  memory_mental_model_update: {
    title: 'Update mental model',
    description: 'Updates name, source_query, max_tokens, tags or trigger.',
    tier: 'autonomousWrite',
  },
  memory_mental_model_refresh: {
    title: 'Refresh mental model',
    description:
      'Regenerates a mental model asynchronously: {operation_id, ...}; {status: "unsupported"} without a language-model endpoint.',
    tier: 'autonomousWrite',
  },
  memory_mental_model_delete: {
    title: 'Delete mental model',
    description: "Deletes a mental model. Destructive: waits for an operator's approval.",
    tier: 'gated',
  },
  memory_directive_list: {
    title: 'List directives',
    description: "The bank's directives (standing instructions injected into prompts).",
    tier: 'autonomousRead',
  },
  memory_directive_get: { title: 'Get directive', description: 'One directive.', tier: 'autonomousRead' },
  memory_directive_create: { title: 'Create directive', description: 'Creates a directive.', tier: 'autonomousWrite' },
  memory_directive_update: {
    title: 'Update directive',
    description: 'Updates name, content, priority, is_active or tags.',
    tier: 'autonomousWrite',
  },
  memory_directive_delete: {
    title: 'Delete directive',
    description: "Deletes a directive. Destructive: waits for an operator's approval.",
    tier: 'gated',
  },
  memory_operation_list: {
    title: 'List operations',
    description: 'Your asynchronous operations (retain, consolidation, refresh), newest first.',
    tier: 'autonomousRead',
  },
  memory_operation_get: {
    title: 'Get operation',
    description:
      "One operation's status — the poll target of memory_add, memory_mental_model_refresh and memory_bank_consolidate. A completed retain reports facts_extracted, plus nothing_learned and a notice when nothing was learned, or document_fact_count and a 'content was already known' notice.",
    tier: 'autonomousRead',
  },
  memory_operation_cancel: {
    title: 'Cancel operation',
    description: 'Aborts pending or processing work.',
    tier: 'autonomousWrite',
  },
  memory_operation_retry: {
    title: 'Retry operation',
    description: 'Re-queues a failed or cancelled operation.',
    tier: 'autonomousWrite',
  },
  memory_tags_list: { title: 'List tags', description: 'Tags in use, with usage counts.', tier: 'autonomousRead' },
  memory_bank_stats: {
    title: 'Bank statistics',
    description:
      'Counts: memory nodes, invalidated units, documents, fact types, datasets, directives, mental models, operations.',
    tier: 'autonomousRead',
  },
  memory_add: {
    title: 'Add memory',
    description:
      'Retains a document: {id, timestamp, operation_id}; fact extraction runs in the background (poll memory_operation_get). source is set from your token and cannot be passed, at the top level or in metadata. The X-Gatehouse-Private: 1 header makes writes go to your private dataset.',
    tier: 'autonomousWrite',
  },
  memory_delete: {
    title: 'Delete memory',
    description:
      'Deletes memory units or documents: {deleted}. One id of your own in shared or your private dataset runs at once; several ids, another dataset or another client\'s memory answer {status: "pending_approval", approval_id, detail}.',
    tier: 'autonomousWrite',
  },
  memory_curate: {
    title: 'Curate memory',
    description:
      'The non-destructive correction path: edits text, context, occurred range, fact_type or entities, or invalidates (state: "invalidated") / restores a unit. id alone is an error.',
    tier: 'autonomousWrite',
  },
  memory_bank_consolidate: {
    title: 'Consolidate',
    description:
      'Merges exact and near-duplicate facts of a dataset now (the duplicates are invalidated, not deleted): {operation_id, deduplicated}.',
    tier: 'autonomousWrite',
  },
};

export const MEMORY_TOOL_NAMES = Object.keys(MEMORY_SCHEMAS) as MemoryToolName[];

export function tierOf(name: MemoryToolName): Tier {
  return META[name].tier;
}

export function isMemoryTool(name: string): name is MemoryToolName {
  return Object.hasOwn(MEMORY_SCHEMAS, name);
}

function inputSchemaOf(schema: z.ZodType): Tool['inputSchema'] {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest as Tool['inputSchema'];
}

export const MEMORY_TOOLS: readonly Tool[] = MEMORY_TOOL_NAMES.map((name) => {
  const meta = META[name];
  const read = meta.tier === 'autonomousRead';
  return {
    name,
    title: meta.title,
    description: meta.description,
    inputSchema: inputSchemaOf(MEMORY_SCHEMAS[name]),
    annotations: {
      title: meta.title,
      readOnlyHint: read,
      destructiveHint: name.endsWith('_delete'),
      idempotentHint: read,
      openWorldHint: false,
    },
  };
});
