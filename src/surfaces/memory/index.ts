/**
 * `/mcp/memory`: the memory bank as an MCP server (Streamable HTTP, both
 * protocol eras, agent tokens), switched by `mcp.memoryEnabled` read per
 * request. Each tool validates its arguments with its own schema (a refusal is
 * `mcp.memory_schema`), datasets follow the caller's token and the private
 * header, `source` is always the caller's token, and destructive calls wait in
 * the approval queue (surface `memory`) and run once an operator approves.
 */
import type { CallToolResult, ServerContext } from '@modelcontextprotocol/server';
import { Server } from '@modelcontextprotocol/server';
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import type { ApprovalExecutor, ApprovalQueue, RecheckOutcome } from '../../approvals/queue.js';
import type { ApprovalView } from '../../approvals/types.js';
import type { Config } from '../../config.js';
import { findGatehouseError, GatehouseError } from '../../errors.js';
import type { TokenPrincipal } from '../../identity/index.js';
import { privateDatasetOf } from '../../memory/datasets.js';
import type { Actor, MemoryEngine } from '../../memory/engine.js';
import type { Store } from '../../store/db.js';
import { VERSION } from '../../version.js';
import { McpEndpoint } from '../endpoint.js';
import {
  APPROVAL_STATUS_TOOL,
  type ApprovalCard,
  auditedExecution,
  Gate,
  type GateAnswer,
  type GatePorts,
} from '../gate.js';
import { jsonToolResult } from '../results.js';
import { type DatasetView, idScope, readDatasets, wantsPrivate, writeDataset } from './datasets.js';
import {
  isAuthorKey,
  isMemoryTool,
  MEMORY_SCHEMAS,
  MEMORY_TOOLS,
  type MemoryArgs,
  type MemoryToolName,
} from './tools.js';

export const MEMORY_PATH = '/mcp/memory';

const INSTRUCTIONS =
  'Gatehouse memory: a bank shared by the agents of this gateway, with a private dataset per client. ' +
  'Search or recall before you answer, memory_add what is worth keeping, memory_curate to correct. ' +
  'Send X-Gatehouse-Private: 1 to keep your writes private. A destructive call answers ' +
  '{"status":"pending_approval","approval_id"}: poll gatehouse__approval_status.';

export interface MemorySurfaceDeps extends GatePorts {
  config: Pick<Config, 'host' | 'allowedOrigins' | 'allowedHosts' | 'maxBodySize'>;
  app: FastifyInstance;
  engine: MemoryEngine;
  approvals: ApprovalQueue;
  /** Where 2025-era sessions are shared across replicas (PostgreSQL). */
  store?: Store;
}

/** What one memory call comes to: an answer, or the approval it needs first. */
type Dispatched = { body: Record<string, unknown> } | { approval: ApprovalCard; message: string };

export interface MemorySurface {
  endpoint: McpEndpoint;
  close(): Promise<void>;
}

/** A memory refusal as hal0 shapes it: `{"status":"error","error":{code, message, detail?, details?}}`. */
export function memoryErrorResult(error: GatehouseError): CallToolResult {
  const details = { ...(error.details ?? {}) };
  const { detail, issues, ...rest } = details as { detail?: unknown; issues?: unknown } & Record<string, unknown>;
  const agentDetails = Object.fromEntries(
    Object.entries(rest).filter(([key]) =>
      ['retry_after_s', 'retryAfterS', 'limit', 'status', 'reason', 'id'].includes(key),
    ),
  );
  const body = {
    status: 'error',
    error: {
      code: error.code,
      message: error.message,
      ...(detail !== undefined ? { detail } : {}),
      ...(issues !== undefined ? { issues } : {}),
      ...(Object.keys(agentDetails).length > 0 ? { details: agentDetails } : {}),
    },
  };
  return { content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body, isError: true };
}

function schemaError(error: z.ZodError): GatehouseError {
  const issues = error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
  const detail = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
  return new GatehouseError('mcp.memory_schema', `Invalid arguments: ${detail}`, { detail, issues });
}

/** `memory_add`'s metadata may not name an author either: refused as a top-level `source` is (`isAuthorKey`). */
function refuseAuthorMetadata(args: unknown): void {
  const metadata = (args as { metadata?: unknown }).metadata;
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) return;
  const keys = Object.keys(metadata).filter(isAuthorKey);
  if (keys.length === 0) return;
  const paths = keys.map((key) => `metadata.${key}`);
  throw new GatehouseError(
    'mcp.memory_schema',
    `${paths.join(', ')}: a memory's author (source) is set by Gatehouse from your token and cannot be passed, in metadata either.`,
    {
      detail: `${paths.join(', ')} would name the author, which is server-injected from the caller identity; remove it (give a document's origin another key, e.g. source_url)`,
      issues: paths.map((path) => ({ path, message: 'reserved: the author is set from your token' })),
    },
  );
}

export function parseArgs<N extends MemoryToolName>(name: N, raw: unknown): MemoryArgs<N> {
  const args = raw ?? {};
  if (name === 'memory_add' && typeof args === 'object' && args !== null && Object.hasOwn(args, 'source')) {
    throw new GatehouseError('mcp.memory_schema', 'source is set by Gatehouse from your token and cannot be passed.', {
      detail: 'source is server-injected from the caller identity; remove it',
    });
  }
  if (name === 'memory_add') refuseAuthorMetadata(args);
  const parsed = MEMORY_SCHEMAS[name].safeParse(args);
  if (!parsed.success) throw schemaError(parsed.error);
  return parsed.data as MemoryArgs<N>;
}

const actorOf = (p: { id: string; name: string }): Actor => ({ id: p.id, name: p.name });

/** The memories a card is about, with their text (the first 500 characters): what the operator agrees to. */
const cardItems = (items: ReadonlyArray<{ text: string } & Record<string, unknown>>) =>
  items.map(({ text, ...item }) => ({ ...item, text: text.length > 500 ? `${text.slice(0, 500)}…` : text }));

export function createMemorySurface(deps: MemorySurfaceDeps): MemorySurface {
  const { engine } = deps;

  /** A call that needs an operator's approval: the card, and the sentence the agent reads. */
  const needsApproval = (
    tool: MemoryToolName,
    args: Record<string, unknown>,
    detail: Record<string, unknown>,
    message: string,
  ): Dispatched => ({
    approval: {
      arguments: args,
      pinHash: null,
      policyVersion: null,
      detail: { title: tool, description: MEMORY_TOOLS.find((t) => t.name === tool)?.description ?? '', ...detail },
    },
    message,
  });

  /** One tool call; returns the JSON answer, or the approval it needs (decided from the data, e.g. whose memory). */
  const dispatch = async (
    principal: TokenPrincipal,
    view: DatasetView,
    name: MemoryToolName,
    raw: unknown,
  ): Promise<Dispatched> => {
    const actor = actorOf(principal);
    switch (name) {
      case 'memory_search': {
        const a = parseArgs(name, raw);
        const results = await engine.search(
          a.query,
          { datasets: readDatasets(view, a.dataset), tags: a.tags, fact_type: a.fact_type },
          a.limit,
        );
        return { body: { results, count: results.length } };
      }
      case 'memory_list': {
        const a = parseArgs(name, raw);
        return {
          body: await engine.list({
            datasets: readDatasets(view, a.dataset),
            limit: a.limit,
            cursor: a.cursor,
            tags: a.tags,
            fact_type: a.fact_type,
            state: a.state,
          }),
        };
      }
      case 'memory_recall': {
        const a = parseArgs(name, raw);
        return {
          body: await engine.recall(a.query, {
            datasets: readDatasets(view, a.dataset),
            max_tokens: a.max_tokens,
            budget: a.budget,
            tags: a.tags,
          }),
        };
      }
      case 'memory_reflect': {
        const a = parseArgs(name, raw);
        return {
          body: await engine.reflect(a.query, {
            datasets: readDatasets(view, a.dataset),
            max_tokens: a.max_tokens,
            budget: a.budget,
          }),
        };
      }
      case 'memory_history': {
        const a = parseArgs(name, raw);
        return { body: await engine.history(a.id, idScope(view, undefined)) };
      }
      case 'memory_mental_model_list': {
        const a = parseArgs(name, raw);
        return { body: await engine.mentalModelList(a) };
      }
      case 'memory_mental_model_get':
        return { body: await engine.mentalModelGet(parseArgs(name, raw).id) };
      case 'memory_mental_model_create':
        return { body: await engine.mentalModelCreate(parseArgs(name, raw), actor) };
      case 'memory_mental_model_update': {
        // A model feeds every agent's reflections: rewriting one is as far-reaching as deleting it.
        const { id, ...changes } = parseArgs(name, raw);
        const model = await engine.mentalModelGet(id);
        return needsApproval(
          name,
          { id, ...changes },
          { target: { id: model.id, name: model.name }, before: model, changes },
          `Changing mental model ${model.name} needs an operator's approval.`,
        );
      }
      case 'memory_mental_model_refresh':
        return { body: await engine.mentalModelRefresh(parseArgs(name, raw).id, actor) };
      case 'memory_mental_model_delete': {
        const a = parseArgs(name, raw);
        const model = await engine.mentalModelGet(a.id);
        return needsApproval(
          name,
          { id: a.id },
          { target: { id: model.id, name: model.name } },
          `Deleting mental model ${model.name} needs an operator's approval.`,
        );
      }
      case 'memory_directive_list': {
        const a = parseArgs(name, raw);
        return { body: await engine.directiveList(a) };
      }
      case 'memory_directive_get':
        return { body: await engine.directiveGet(parseArgs(name, raw).id) };
      case 'memory_directive_create':
        return { body: await engine.directiveCreate(parseArgs(name, raw), actor) };
      case 'memory_directive_update': {
        // A directive steers every agent: rewriting one is as far-reaching as deleting it.
        const { id, ...changes } = parseArgs(name, raw);
        const directive = await engine.directiveGet(id);
        return needsApproval(
          name,
          { id, ...changes },
          { target: { id: directive.id, name: directive.name }, before: directive, changes },
          `Changing directive ${directive.name} needs an operator's approval.`,
        );
      }
      case 'memory_directive_delete': {
        const a = parseArgs(name, raw);
        const directive = await engine.directiveGet(a.id);
        return needsApproval(
          name,
          { id: a.id },
          { target: { id: directive.id, name: directive.name } },
          `Deleting directive ${directive.name} needs an operator's approval.`,
        );
      }
      case 'memory_operation_list': {
        const a = parseArgs(name, raw);
        return { body: await engine.operationList({ ...a, requesterId: principal.id }) };
      }
      case 'memory_operation_get':
        return { body: await engine.operationGet(parseArgs(name, raw).id, principal.id) };
      case 'memory_operation_cancel':
        return { body: await engine.operationCancel(parseArgs(name, raw).id, principal.id) };
      case 'memory_operation_retry':
        return { body: await engine.operationRetry(parseArgs(name, raw).id, principal.id) };
      case 'memory_tags_list':
        return { body: await engine.tags(readDatasets(view, parseArgs(name, raw).dataset)) };
      case 'memory_bank_stats': {
        const a = parseArgs(name, raw);
        return { body: await engine.stats(readDatasets(view, a.dataset)) };
      }
      case 'memory_add': {
        const { dataset, ...input } = parseArgs(name, raw);
        return { body: await engine.add(input, writeDataset(view, dataset), actor) };
      }
      case 'memory_delete': {
        const a = parseArgs(name, raw);
        const ids = [...new Set(a.ids)];
        const datasets = idScope(view, a.dataset);
        const { found, missing } = await engine.resolveForDelete(ids, datasets);
        if (missing.length > 0) {
          throw new GatehouseError('memory.not_found', `No memory ${missing.join(', ')} in your datasets.`, {
            detail: `unknown ids: ${missing.join(', ')}`,
          });
        }
        const only = found[0];
        const ownSingle =
          ids.length === 1 &&
          only !== undefined &&
          (only.dataset === 'shared' || only.dataset === privateDatasetOf(principal.id)) &&
          only.source === principal.id;
        if (ownSingle) return { body: await engine.delete(ids, datasets, actor) };
        const args = { ids, ...(a.dataset !== undefined ? { dataset: a.dataset } : {}) };
        const reason =
          ids.length > 1
            ? `a bulk delete of ${ids.length} ids`
            : only && only.source !== principal.id
              ? "a delete of another client's memory"
              : `a delete in the ${only?.dataset} dataset`;
        return needsApproval(
          name,
          args,
          { reason, items: cardItems(found) },
          `This is ${reason}; it needs an operator's approval.`,
        );
      }
      case 'memory_curate': {
        const { id, ...changes } = parseArgs(name, raw);
        const datasets = idScope(view, undefined);
        const { found } = await engine.resolveForDelete([id], datasets);
        const unit = found[0];
        // Another client's memory keeps its author's name (`source`): editing or invalidating it is theirs
        // to agree to, as deleting it is — an operator's approval.
        if (unit && unit.source !== principal.id) {
          return needsApproval(
            name,
            { id, ...changes },
            { reason: "a change to another client's memory", items: cardItems(found), changes },
            "This is a change to another client's memory; it needs an operator's approval.",
          );
        }
        return { body: { ...(await engine.curate(id, changes, datasets, actor)) } };
      }
      case 'memory_bank_consolidate': {
        const a = parseArgs(name, raw);
        return { body: await engine.consolidate(writeDataset(view, a.dataset), actor) };
      }
    }
  };

  // Every known refusal is a result the agent reads, in hal0's memory error shape.
  const gate = new Gate(deps, { surface: 'memory', refusal: memoryErrorResult });

  const run = (principal: TokenPrincipal, view: DatasetView, name: string, raw: unknown): Promise<GateAnswer> =>
    gate.call({
      principal,
      name,
      arguments: raw,
      // Whether a memory call needs approval depends on its data (whose memory, how many ids): `run` decides.
      resolve: () =>
        isMemoryTool(name)
          ? { verdict: 'allow', serverId: null, tool: name }
          : { verdict: 'unknown_tool', serverId: null },
      run: async () => {
        const dispatched = await dispatch(principal, view, name as MemoryToolName, raw);
        return 'approval' in dispatched
          ? dispatched
          : { answer: jsonToolResult(dispatched.body), outcome: 'ok', audited: dispatched.body };
      },
    });

  const buildServer = (principal: TokenPrincipal): Server => {
    const server = new Server(
      { name: 'gatehouse-memory', version: VERSION },
      { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS },
    );
    server.setRequestHandler('tools/list', async () => ({ tools: [...MEMORY_TOOLS, gate.statusTool] }));
    server.setRequestHandler('tools/call', async (request, ctx: ServerContext) => {
      const { name } = request.params;
      const args = request.params.arguments ?? {};
      if (name === APPROVAL_STATUS_TOOL) return gate.approvalStatus(principal, args);
      const view: DatasetView = { clientId: principal.id, private: wantsPrivate(ctx.http?.req?.headers) };
      return run(principal, view, name, args);
    });
    return server;
  };

  const endpoint = new McpEndpoint({
    host: deps.config.host,
    hubAuth: 'token', // private datasets belong to tokens: the memory surface always needs one
    allowedOrigins: deps.config.allowedOrigins,
    allowedHosts: deps.config.allowedHosts,
    maxBodySize: deps.config.maxBodySize,
    gate: async () =>
      (await deps.settings.current())['mcp.memoryEnabled']
        ? undefined
        : new GatehouseError('not_found', 'No such MCP endpoint.'),
    buildServer: (principal) => buildServer(principal),
    ...(deps.store ? { sessionStore: { store: deps.store, surface: 'memory' } } : {}),
  });
  endpoint.route(deps.app, MEMORY_PATH, () => ({ kind: 'aggregate' }));

  const requesterView = (approval: ApprovalView): DatasetView => ({
    clientId: approval.requester.id,
    private: false,
  });
  const requesterActor = (approval: ApprovalView): Actor => actorOf(approval.requester);

  const executor: ApprovalExecutor = {
    async recheck(approval): Promise<RecheckOutcome> {
      if (!(await deps.settings.current())['mcp.memoryEnabled']) {
        return { ok: false, reason: 'The memory surface was switched off after the call was approved.' };
      }
      try {
        if (approval.tool === 'memory_delete') {
          const a = parseArgs('memory_delete', approval.arguments);
          const { missing } = await engine.resolveForDelete(a.ids, idScope(requesterView(approval), a.dataset));
          return missing.length > 0 ? { ok: false, reason: `Already gone: ${missing.join(', ')}.` } : { ok: true };
        }
        if (approval.tool === 'memory_curate') {
          const { id } = parseArgs('memory_curate', approval.arguments);
          const { missing } = await engine.resolveForDelete([id], idScope(requesterView(approval), undefined));
          return missing.length > 0 ? { ok: false, reason: `Already gone: ${id}.` } : { ok: true };
        }
        if (approval.tool === 'memory_mental_model_delete' || approval.tool === 'memory_mental_model_update') {
          await engine.mentalModelGet(parseArgs(approval.tool, approval.arguments).id);
          return { ok: true };
        }
        if (approval.tool === 'memory_directive_delete' || approval.tool === 'memory_directive_update') {
          await engine.directiveGet(parseArgs(approval.tool, approval.arguments).id);
          return { ok: true };
        }
        return { ok: false, reason: `${approval.tool} is not a gated memory tool.` };
      } catch (error) {
        const known = findGatehouseError(error);
        if (known && known.code !== 'memory.engine_unavailable') return { ok: false, reason: known.message };
        throw error;
      }
    },
    execute: (approval) =>
      // Its call event carries the trace id of the call that waited (tracing on).
      auditedExecution(deps.audit, 'memory', approval, async (): Promise<unknown> => {
        if (approval.tool === 'memory_delete') {
          const a = parseArgs('memory_delete', approval.arguments);
          return engine.delete(a.ids, idScope(requesterView(approval), a.dataset), requesterActor(approval));
        }
        if (approval.tool === 'memory_curate') {
          const { id, ...changes } = parseArgs('memory_curate', approval.arguments);
          return engine.curate(id, changes, idScope(requesterView(approval), undefined), requesterActor(approval));
        }
        if (approval.tool === 'memory_mental_model_delete') {
          return engine.mentalModelDelete(parseArgs('memory_mental_model_delete', approval.arguments).id);
        }
        if (approval.tool === 'memory_mental_model_update') {
          const { id, ...changes } = parseArgs('memory_mental_model_update', approval.arguments);
          return engine.mentalModelUpdate(id, changes);
        }
        if (approval.tool === 'memory_directive_update') {
          const { id, ...changes } = parseArgs('memory_directive_update', approval.arguments);
          return engine.directiveUpdate(id, changes);
        }
        return engine.directiveDelete(parseArgs('memory_directive_delete', approval.arguments).id);
      }),
  };
  deps.approvals.registerExecutor('memory', executor);

  return { endpoint, close: () => endpoint.close() };
}
