/**
 * The memory bank over REST (`/api/memory/…`): what the dashboard reads and
 * curates, and — through each route's declaration (scope `memory`, gated by
 * `mcp.scope.memory`) — what the admin surface offers agents. Operators and
 * admins see every dataset; an agent arriving through the admin surface sees
 * what it sees on `/mcp/memory`: shared, named and its own private dataset,
 * never another client's.
 */
import { z } from 'zod';
import type { Principal } from '../identity/index.js';
import { agentScope } from '../memory/datasets.js';
import type { Actor, DatasetScope, MemoryEngine } from '../memory/engine.js';
import { DATASET_PATTERN, ID_PATTERN } from '../surfaces/memory/tools.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;

const idParams = z.strictObject({ id: z.string().regex(ID_PATTERN, 'an id of 1-64 letters, digits, _ or -') });
const dataset = z.string().regex(DATASET_PATTERN, 'shared, agents, private:<client> or project:<id>');
const tag = z.string().regex(/^[A-Za-z0-9_.:/-]{1,64}$/);

const modelName = z.string().trim().min(1).max(200);
const sourceQuery = z.string().trim().min(1).max(2000);
const mentalModelFields = z.strictObject({
  name: modelName.optional(),
  source_query: sourceQuery.optional(),
  max_tokens: z.number().int().min(1).max(32_768).optional(),
  tags: z.array(tag).max(32).optional(),
  trigger: z.record(z.string(), z.unknown()).optional(),
});

function actorOf(principal: Principal | undefined): Actor {
  return principal ? { id: principal.id, name: principal.name } : { id: 'system', name: 'system' };
}

/** Who may see which dataset: managers everything, an agent (through a surface grant) by the engine's privacy rule. */
function scopeFor(principal: Principal | undefined, named: string | undefined): DatasetScope {
  if (principal?.role === 'agent') return agentScope(principal.id, named);
  return named !== undefined ? [named] : () => true;
}

/** Datasets as a list (search, list, stats): managers get every dataset in use. */
async function datasetList(engine: MemoryEngine, scope: DatasetScope): Promise<string[]> {
  if (typeof scope !== 'function') return [...scope];
  const rows = await engine.db.selectFrom('memory_units').select('dataset').distinct().execute();
  return rows.map((r) => r.dataset).filter(scope);
}

export function memoryRoutes({ engine }: { engine: MemoryEngine }): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/api/memory/units',
      summary: 'Memory units, newest first, optionally of one dataset, state or tag.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_unit_list', tier: 'autonomousRead' },
      query: pageQuery.extend({
        dataset: dataset.optional(),
        state: z.enum(['valid', 'invalidated', 'all']).default('valid'),
        tag: tag.optional(),
      }),
      async handler({ query, principal }) {
        const datasets = await datasetList(engine, scopeFor(principal, query.dataset));
        const { units, total } = await engine.listPage({ ...query, datasets });
        return listAnswer('units', units, total);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/memory/search',
      summary: 'Full-text search over memory units (BM25 / ts_rank blended with recency).',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_unit_search', tier: 'autonomousRead' },
      query: z.strictObject({
        query: z.string().trim().min(1).max(2000),
        limit: z.coerce.number().int().min(1).max(200).default(10),
        dataset: dataset.optional(),
      }),
      async handler({ query, principal }) {
        const datasets = await datasetList(engine, scopeFor(principal, query.dataset));
        const results = await engine.search(query.query, { datasets }, query.limit);
        return { results, count: results.length, total: results.length };
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/memory/units/:id',
      summary: 'One memory unit with its curation history.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_unit_get', tier: 'autonomousRead' },
      params: idParams,
      handler: ({ params, principal }) => engine.history(params.id, scopeFor(principal, undefined)),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/memory/units/:id',
      summary: 'Curate a memory unit: edit it, or invalidate / restore it (kept in its history).',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_unit_curate', tier: 'gated' },
      params: idParams,
      body: z
        .strictObject({
          text: z.string().trim().min(1).max(100_000).optional(),
          context: z.string().max(2000).nullable().optional(),
          fact_type: z.enum(['world', 'experience']).optional(),
          entities: z.array(z.string().min(1).max(200)).max(50).optional(),
          state: z.enum(['valid', 'invalidated']).optional(),
        })
        .refine((b) => Object.values(b).some((v) => v !== undefined), 'give at least one field to change'),
      handler: ({ params, body, principal }) =>
        engine.curate(params.id, body, scopeFor(principal, undefined), actorOf(principal)),
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/memory/units/:id',
      summary: 'Delete a memory unit or a document (with its units) for good.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_unit_delete', tier: 'gated' },
      params: idParams,
      handler: ({ params, principal }) =>
        engine.delete([params.id], scopeFor(principal, undefined), actorOf(principal)),
    }),
    defineRoute({
      method: 'GET',
      url: '/api/memory/stats',
      summary: 'Memory bank counts: nodes, documents, datasets, directives, mental models, operations.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_stats_get', tier: 'autonomousRead' },
      query: z.strictObject({ dataset: dataset.optional() }),
      handler: async ({ query, principal }) =>
        engine.stats(await datasetList(engine, scopeFor(principal, query.dataset))),
    }),
    defineRoute({
      method: 'GET',
      url: '/api/memory/tags',
      summary: 'Tags in use, with usage counts.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_tag_list', tier: 'autonomousRead' },
      query: z.strictObject({ dataset: dataset.optional() }),
      async handler({ query, principal }) {
        const { tags } = await engine.tags(await datasetList(engine, scopeFor(principal, query.dataset)));
        return listAnswer('tags', tags, tags.length);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/memory/operations',
      summary: 'Memory operations (retain, consolidation, refresh); an agent sees its own.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_operation_list', tier: 'autonomousRead' },
      query: pageQuery.extend({
        status: z.enum(['pending', 'processing', 'completed', 'failed', 'cancelled']).optional(),
      }),
      handler: ({ query, principal }) =>
        engine.operationList({
          ...query,
          requesterId: principal?.role === 'agent' ? principal.id : undefined,
        }),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/memory/consolidate',
      summary: 'Merge exact and near-duplicate facts of a dataset now (duplicates are invalidated, not deleted).',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_consolidate', tier: 'autonomousWrite' },
      body: z.strictObject({ dataset: dataset.default('shared') }).default({ dataset: 'shared' }),
      handler: ({ body, principal }) => {
        const scope = scopeFor(principal, body.dataset);
        return engine.consolidate((scope as string[])[0] as string, actorOf(principal));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/memory/directives',
      summary: 'Directives: standing instructions injected into prompts.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_directive_list', tier: 'autonomousRead' },
      query: pageQuery,
      handler: ({ query }) => engine.directiveList(query),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/memory/directives',
      summary: 'Create a directive.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_directive_create', tier: 'autonomousWrite' },
      status: 201,
      body: z.strictObject({
        name: z.string().trim().min(1).max(200),
        content: z.string().trim().min(1).max(8000),
        priority: z.number().int().min(-100).max(100).optional(),
        is_active: z.boolean().optional(),
        tags: z.array(tag).max(32).optional(),
      }),
      handler: ({ body, principal }) => engine.directiveCreate(body, actorOf(principal)),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/memory/directives/:id',
      summary: 'Update a directive.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_directive_update', tier: 'gated' },
      params: idParams,
      body: z
        .strictObject({
          name: z.string().trim().min(1).max(200).optional(),
          content: z.string().trim().min(1).max(8000).optional(),
          priority: z.number().int().min(-100).max(100).optional(),
          is_active: z.boolean().optional(),
          tags: z.array(tag).max(32).optional(),
        })
        .refine((b) => Object.values(b).some((v) => v !== undefined), 'give at least one field to change'),
      handler: ({ params, body }) => engine.directiveUpdate(params.id, body),
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/memory/directives/:id',
      summary: 'Delete a directive.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_directive_delete', tier: 'gated' },
      params: idParams,
      handler: ({ params }) => engine.directiveDelete(params.id),
    }),
    defineRoute({
      method: 'GET',
      url: '/api/memory/mental-models',
      summary: 'Mental models with their content and staleness.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_mental_model_list', tier: 'autonomousRead' },
      query: pageQuery,
      handler: ({ query }) => engine.mentalModelList({ detail: 'full', ...query }),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/memory/mental-models',
      summary: 'Create a mental model; its content comes from a refresh (unsupported without a language model).',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_mental_model_create', tier: 'autonomousWrite' },
      status: 201,
      body: mentalModelFields.extend({ name: modelName, source_query: sourceQuery }),
      handler: ({ body, principal }) => engine.mentalModelCreate(body, actorOf(principal)),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/memory/mental-models/:id',
      summary: 'Update a mental model: name, source query, token budget, tags or trigger.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_mental_model_update', tier: 'gated' },
      params: idParams,
      body: mentalModelFields.refine(
        (b) => Object.values(b).some((v) => v !== undefined),
        'give at least one field to change',
      ),
      handler: ({ params, body }) => engine.mentalModelUpdate(params.id, body),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/memory/mental-models/:id/refresh',
      summary: 'Regenerate a mental model in the background; {"status": "unsupported"} without a language model.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_mental_model_refresh', tier: 'autonomousWrite' },
      params: idParams,
      handler: ({ params, principal }) => engine.mentalModelRefresh(params.id, actorOf(principal)),
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/memory/mental-models/:id',
      summary: 'Delete a mental model.',
      scope: 'memory',
      access: MANAGERS,
      mcp: { tool: 'memory_mental_model_delete', tier: 'gated' },
      params: idParams,
      handler: ({ params }) => engine.mentalModelDelete(params.id),
    }),
  ];
}
