/**
 * The hub's MCP server for one caller and one scope: built per request
 * (2026-07-28) or per session (2025 era) from the same factory, so both eras
 * see exactly the same tools, verdicts and answers.
 */
import type {
  GetPromptResult,
  Implementation,
  InputRequiredResult,
  ListResourceTemplatesResult,
  Prompt,
  ReadResourceResult,
  Resource,
  ServerContext,
  Tool,
} from '@modelcontextprotocol/server';
import { CLIENT_CAPABILITIES_META_KEY, ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { findGatehouseError } from '../../errors.js';
import type { TokenPrincipal, ToolView } from '../../identity/index.js';
import { boundResult, COMPLETION_RESULT, PROMPT_RESULT, RESOURCE_RESULT } from '../../upstream/bounds.js';
import { drainList } from '../../upstream/drain.js';
import { upstreamRpcErrorOf } from '../../upstream/map-error.js';
import { VERSION } from '../../version.js';
import { MODERN_PROTOCOL_VERSION } from '../../wire.js';
import { pageOf } from '../cursor.js';
import { APPROVAL_STATUS_TOOL, approvalStatusTool as approvalStatusToolOf } from '../gate.js';
import { type DetailedTask, declaresTasks, TASKS_EXTENSION, taskNotFound, tasksNotDeclared } from '../results.js';
import type { ApprovedRounds } from './approved-rounds.js';
import {
  agentExtensions,
  agentInputCapabilities,
  type CallScope,
  callContextOf,
  type HubCalls,
  resolveTool,
} from './calls.js';
import { handleSetLevel, sessionLogLevel } from './log-levels.js';
import { GATEHOUSE_PREFIX, UI_EXTENSION, unwrapResourceUri, wrapResourceTemplate, wrapResourceUri } from './names.js';
import { type AsCaller, livePrompts, liveResources } from './per-user-lists.js';
import { isInputRequired, requestInRounds } from './request-rounds.js';
import type { HubStateCodec } from './request-state.js';
import type { SearchIndexes } from './search/indexes.js';
import {
  CALL_TOOL,
  callArgs,
  DESCRIBE_TOOL,
  describeTool,
  isRefusal,
  META_TOOLS,
  parseArgs,
  SEARCH_TOOL,
  searchTools,
  VIA_CALL_TOOL,
} from './search/meta-tools.js';
import { resourceOwner as resourceOwnerIn, type SubscribeDeps, subscribeUpstream } from './subscribe-upstream.js';
import type { HubTasks, TaskMethod } from './tasks.js';
import { isUiUri, type UiPinGuard } from './ui-pins.js';
import { advertised, type GrantOptions, type HubServer, isListed, type Snapshot } from './view.js';
import { assertInsideWorkspace } from './workspace.js';

/** The hub's own tool, as the gate defines it (plain arguments). */
const approvalStatusTool = approvalStatusToolOf();

/** What `/mcp` lists besides the catalog: the agent's tool view, and in search mode its recent tools. */
export interface ListView {
  view: ToolView;
  /** Exposed names of the agent's recently called tools (search mode lists those still usable). */
  recent?: readonly string[] | undefined;
}

/** Search mode's list without recent tools: one array, so its key order is computed once. */
const SEARCH_LIST: Tool[] = [...META_TOOLS, approvalStatusTool];

/** The aggregate's list in a search or toolset view, or undefined for `all`. */
function viewList(snapshot: Snapshot, groups: readonly string[], listView: ListView | undefined): Tool[] | undefined {
  if (!listView || listView.view.kind === 'all') return undefined;
  // A toolset view: the toolset's tools (what its groups may use), as `/mcp/t/{name}` lists them.
  if (listView.view.kind === 'toolset')
    return [...snapshot.toolsetTools(listView.view.name, groups), approvalStatusTool];
  const recent: Tool[] = [];
  for (const name of listView.recent ?? []) {
    const resolution = resolveTool(snapshot, groups, { kind: 'aggregate' }, name);
    if (!('missing' in resolution) && isListed(resolution.tool)) recent.push(advertised(resolution.tool, name, true));
  }
  return recent.length > 0 ? [...SEARCH_LIST, ...recent] : SEARCH_LIST;
}

/** The tools a caller sees in this scope: the listed ones (or its view's), then the hub's own. */
export function hubToolList(
  snapshot: Snapshot,
  groups: readonly string[],
  scope: CallScope,
  listView?: ListView,
): Tool[] {
  if (scope.kind === 'aggregate') {
    return viewList(snapshot, groups, listView) ?? [...snapshot.aggregateTools(groups), approvalStatusTool];
  }
  if (scope.kind === 'toolset') return [...snapshot.toolsetTools(scope.toolset, groups), approvalStatusTool];
  const tools: Tool[] = [];
  for (const tool of snapshot.server(scope.serverId, groups)?.tools.values() ?? []) {
    // No upstream may take a gatehouse__ name, unprefixed or not.
    if (isListed(tool) && !tool.name.startsWith(GATEHOUSE_PREFIX)) tools.push(advertised(tool, tool.name));
  }
  return [...tools, approvalStatusTool];
}

/** The aggregate list with the hub's own tool, one array per cached aggregate (so its key order is computed once). */
const withApprovalTool = new WeakMap<Tool[], Tool[]>();

/** One page of the tools a caller sees (`cursor.ts`): the whole list while it fits in one page. */
export function hubToolPage(
  snapshot: Snapshot,
  groups: readonly string[],
  scope: CallScope,
  cursor: string | undefined,
  pageSize: number,
  listView?: ListView,
): { tools: Tool[]; nextCursor?: string } {
  let tools: Tool[];
  const viewed = scope.kind === 'aggregate' ? viewList(snapshot, groups, listView) : undefined;
  if (viewed) tools = viewed;
  else if (scope.kind === 'aggregate') {
    const aggregate = snapshot.aggregateTools(groups);
    tools = withApprovalTool.get(aggregate) ?? [...aggregate, approvalStatusTool];
    withApprovalTool.set(aggregate, tools);
  } else tools = hubToolList(snapshot, groups, scope);
  const page = pageOf('tools', tools, (tool) => tool.name, cursor, pageSize);
  return { tools: page.items, ...(page.nextCursor !== undefined ? { nextCursor: page.nextCursor } : {}) };
}

export interface HubServerDeps extends SubscribeDeps {
  calls: HubCalls;
  approvedRounds: ApprovedRounds;
  /** Verifies the hub's signed `requestState` at the SDK seam, before any handler runs. */
  stateCodec: HubStateCodec;
  /** Most items in one page of tools/list, prompts/list or resources/list. */
  listPageSize: number;
  /** The tool view and recent tools of an agent on this scope (`all` off the aggregate). */
  listViewOf(principal: TokenPrincipal, scope: CallScope): Promise<ListView>;
  /** Search mode's index, rebuilt in the background when the catalog changes. */
  searchIndexes: SearchIndexes;
  /** Checks a `ui://` resource's content against its pin before it is served. */
  uiPins: UiPinGuard;
  /** Upstream tasks bound to the tokens that created them (the Tasks extension). */
  tasks: HubTasks;
  /** A 2025-era session accepted a subscription (on a fleet, another replica takes it over if this one dies). */
  subscribed(server: Server, uri: string): void;
}

/** What every task method carries: the task's id (the agent sends it back in `Mcp-Name` too). */
const TASK_PARAMS = z.looseObject({ taskId: z.string().min(1).max(600), inputResponses: z.unknown().optional() });

const INSTRUCTIONS =
  'Gatehouse aggregates the MCP servers you may use. Tools are named <server>__<tool>. A call that needs ' +
  'approval answers {"status":"pending_approval","approval_id",...}: poll gatehouse__approval_status.';

const SEARCH_INSTRUCTIONS =
  'Gatehouse aggregates the MCP servers you may use, in search mode: find a tool with gatehouse__search_tools, ' +
  'read its full definition with gatehouse__describe_tool, and call it with gatehouse__call_tool. A call that ' +
  'needs approval answers {"status":"pending_approval","approval_id",...}: poll gatehouse__approval_status.';

/** What an agent whose view is a toolset reads: its tools only (a toolset not defined lists none, and says so). */
function toolsetNote(name: string, defined: boolean): string {
  return defined
    ? `Your token's tool view is the toolset "${name}": only its tools are listed and callable.`
    : `Your token's tool view is the toolset "${name}", which is not defined on this gateway: no tools are listed.`;
}

/** The scope a call resolves in: on `/mcp`, an agent whose view is a toolset calls only that toolset's tools. */
export function callScopeOf(scope: CallScope, listView: ListView): CallScope {
  return scope.kind === 'aggregate' && listView.view.kind === 'toolset'
    ? { kind: 'toolset', toolset: listView.view.name }
    : scope;
}

/** Templates taken from one upstream's list (its first page). */
const MAX_TEMPLATES_PER_SERVER = 100;
const FIRST_TEMPLATES_PAGE = Object.freeze({ maxPages: 1, maxItems: MAX_TEMPLATES_PER_SERVER });
type Template = ListResourceTemplatesResult['resourceTemplates'][number];
/** The hub's `resources/templates/list`: every server's templates, in one array. */
const TEMPLATES_RESULT = Object.freeze({ list: ['resourceTemplates'] as const });
/** Lists ask each per-user server with the caller's grant, and start no connect flow where there is none. */
const QUIET: GrantOptions = { connectLink: false };

function invalidParams(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, message);
}

/**
 * Upstream failures of prompts and resources are protocol errors: there is no tool result to carry them.
 * An upstream's own JSON-RPC error passes through as itself (bounded).
 */
function asProtocolError(error: unknown): unknown {
  const known = findGatehouseError(error);
  if (!known) return error;
  const upstream = upstreamRpcErrorOf(known);
  if (upstream) return new ProtocolError(upstream.code, upstream.message, upstream.data);
  return new ProtocolError(ProtocolErrorCode.InternalError, `${known.code}: ${known.message}`);
}

/** Who the hub says it is (the SDK stamps it into every result's `_meta`, and so does the fast path). */
export const HUB_SERVER_INFO = Object.freeze({ name: 'gatehouse', version: VERSION });

/** What `/mcp/s/{server}` adds to the upstream's own instructions. */
const SINGLE_NOTE =
  'Served through Gatehouse: a call that needs approval answers {"status":"pending_approval","approval_id",...}: ' +
  'poll gatehouse__approval_status.';

/** What `/mcp/t/{toolset}` tells its agents. */
const TOOLSET_NOTE =
  'A Gatehouse toolset: a curated set of tools from several MCP servers. A call that needs approval answers ' +
  '{"status":"pending_approval","approval_id",...}: poll gatehouse__approval_status.';

/**
 * Who the hub says it is in this scope: Gatehouse on `/mcp`; on `/mcp/s/{server}` the upstream as it
 * introduced itself at its last handshake (its `serverInfo`, its `instructions` with Gatehouse's note
 * appended), so a drop-in proxy looks like the server behind it. Both paths (SDK and fast) ask here.
 */
export function hubIdentity(
  snapshot: Snapshot | undefined,
  groups: readonly string[],
  scope: CallScope,
  view?: ToolView,
): { serverInfo: Implementation; instructions: string } {
  if (scope.kind === 'aggregate') {
    if (view?.kind === 'search') return { serverInfo: HUB_SERVER_INFO, instructions: SEARCH_INSTRUCTIONS };
    if (view?.kind === 'toolset') {
      // Defined for this caller: a toolset none of whose servers its groups see reads as no toolset at all.
      const defined = snapshot?.toolset(view.name, groups) !== undefined;
      return { serverInfo: HUB_SERVER_INFO, instructions: `${INSTRUCTIONS} ${toolsetNote(view.name, defined)}` };
    }
    return { serverInfo: HUB_SERVER_INFO, instructions: INSTRUCTIONS };
  }
  if (scope.kind === 'toolset') {
    const description = snapshot?.toolsets.get(scope.toolset)?.description;
    return {
      serverInfo: { name: `gatehouse-toolset-${scope.toolset}`, version: VERSION },
      instructions: description ? `${description}\n\n${TOOLSET_NOTE}` : TOOLSET_NOTE,
    };
  }
  const identity = snapshot?.server(scope.serverId, groups)?.identity;
  return {
    serverInfo: identity?.serverInfo ?? HUB_SERVER_INFO,
    instructions: identity?.instructions ? `${identity.instructions}\n\n${SINGLE_NOTE}` : SINGLE_NOTE,
  };
}

export function buildHubServer(
  deps: HubServerDeps,
  principal: TokenPrincipal,
  scope: CallScope,
  /** The agent's tool view as of this request (the endpoint read the settings before building). */
  view?: ToolView,
): Server {
  // The endpoint read the snapshot for this very request (is the scope visible?) before building.
  const latest = deps.registry.latest();
  const identity = hubIdentity(latest, principal.groups, scope, view);
  // MCP Apps is declared where an upstream behind this scope offers it (a toolset is tools only: no UI resources).
  const offersUi =
    scope.kind === 'aggregate'
      ? (latest?.offersUi(principal.groups) ?? false)
      : scope.kind === 'single' && (latest?.server(scope.serverId, principal.groups)?.offersUi ?? false);
  const server = new Server(
    { ...identity.serverInfo },
    {
      capabilities: {
        tools: { listChanged: true },
        prompts: { listChanged: true },
        // Subscriptions pass to the upstream that owns the URI (one that cannot subscribe says so).
        resources: { listChanged: true, subscribe: true },
        completions: {},
        // `logging/setLevel` is answered by the SDK per server, and the hub builds one per 2025 session
        // (one per request on 2026-07-28): a level is the agent session's own, never global.
        logging: {},
        // The Tasks extension: a gated call is a task for agents that declare it; upstream tasks pass through.
        // MCP Apps: declared where an upstream behind this path offers it.
        extensions: { [TASKS_EXTENSION]: {}, ...(offersUi ? { [UI_EXTENSION]: {} } : {}) },
      },
      instructions: identity.instructions,
      // A forged, expired or foreign requestState is refused (-32602) before a handler sees it.
      requestState: { verify: (state, ctx) => deps.stateCodec.verify(state, ctx) },
    },
  );
  const single = (snapshot: Snapshot): HubServer | undefined =>
    scope.kind === 'single' ? snapshot.server(scope.serverId, principal.groups) : undefined;
  // A toolset is tools only: no prompts, resources or completions of its servers.
  const visible = (snapshot: Snapshot): HubServer[] =>
    scope.kind === 'toolset'
      ? []
      : scope.kind === 'single'
        ? [single(snapshot)].filter((s): s is HubServer => s !== undefined)
        : snapshot.visibleTo(principal.groups);

  handleSetLevel(server);

  server.setRequestHandler('tools/list', async (request) => {
    const listView = await deps.listViewOf(principal, scope);
    const snapshot = await deps.registry.snapshot();
    return hubToolPage(snapshot, principal.groups, scope, request.params?.cursor, deps.listPageSize, listView);
  });

  /** Whether the agent declared the Tasks extension: on this request's `_meta`, or for its 2025 session. */
  const declaredTasks = (ctx: ServerContext, params: { _meta?: unknown } | undefined): boolean =>
    declaresTasks((ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY]) ||
    declaresTasks((params?._meta as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY]) ||
    declaresTasks(server.getClientCapabilities());

  // A 2025-era agent is asked with real server→client requests during its call: what it declared it can answer.
  const askable = (inputs: Record<string, unknown> | undefined) => {
    const version = server.getNegotiatedProtocolVersion();
    return version !== undefined && version < MODERN_PROTOCOL_VERSION ? inputs : undefined;
  };

  server.setRequestHandler('tools/call', async (request, ctx: ServerContext) => {
    const { name } = request.params;
    const inputs = agentInputCapabilities(ctx, server.getClientCapabilities());
    if (name === APPROVAL_STATUS_TOOL) {
      return deps.calls.approvalStatus(principal, request.params.arguments, (approvalId, waitS) =>
        deps.approvedRounds.status(
          principal,
          approvalId,
          waitS,
          ctx,
          agentInputCapabilities(ctx, server.getClientCapabilities()),
        ),
      );
    }
    if (scope.kind !== 'aggregate' && name.startsWith(GATEHOUSE_PREFIX)) throw invalidParams(`Tool ${name} not found`);
    if (name === SEARCH_TOOL || name === DESCRIBE_TOOL || name === CALL_TOOL) {
      // The meta-tools exist for agents in search mode only; to others they are tools that do not exist.
      if ((await deps.listViewOf(principal, scope)).view.kind !== 'search')
        throw invalidParams(`Tool ${name} not found`);
      const snapshot = await deps.registry.snapshot();
      if (name === SEARCH_TOOL)
        return searchTools(deps.searchIndexes, snapshot, principal.groups, request.params.arguments);
      if (name === DESCRIBE_TOOL) return describeTool(snapshot, principal.groups, request.params.arguments);
      const inner = parseArgs(callArgs, request.params.arguments, CALL_TOOL);
      if (isRefusal(inner)) return inner;
      // The very call a direct `tools/call` of that name makes (same gate, card and audit), marked as carried.
      return deps.calls.call(
        principal,
        snapshot,
        scope,
        { name: inner.name, arguments: inner.arguments },
        {
          ...callContextOf(
            ctx,
            request.params as Parameters<typeof callContextOf>[1],
            sessionLogLevel(server),
            askable(inputs),
            server.getClientCapabilities(),
          ),
          tasks: declaredTasks(ctx, request.params),
        },
        inputs,
        VIA_CALL_TOOL,
      );
    }
    const callScope = scope.kind === 'aggregate' ? callScopeOf(scope, await deps.listViewOf(principal, scope)) : scope;
    const snapshot = await deps.registry.snapshot();
    const params = request.params as Parameters<HubCalls['call']>[3] & Parameters<typeof callContextOf>[1];
    return deps.calls.call(
      principal,
      snapshot,
      callScope,
      params,
      {
        ...callContextOf(ctx, params, sessionLogLevel(server), askable(inputs), server.getClientCapabilities()),
        tasks: declaredTasks(ctx, params),
      },
      inputs,
    );
  });

  // The Tasks extension's methods (SEP-2663), for agents that declared it: a gated call's task is the gate's
  // (its approval), any other the upstream's that created it, for the token it is bound to. A task that is
  // not this token's reads exactly like one that does not exist (-32602).
  const taskMethod = (
    method: TaskMethod,
    answer: (
      params: z.infer<typeof TASK_PARAMS>,
      ctx: ServerContext,
    ) => Promise<DetailedTask | Record<string, never> | undefined>,
  ) =>
    server.setRequestHandler(method, { params: TASK_PARAMS }, async (params, ctx: ServerContext) => {
      if (!declaredTasks(ctx, params as { _meta?: unknown })) throw tasksNotDeclared(method);
      let answered: DetailedTask | Record<string, never> | undefined;
      try {
        answered = await answer(params, ctx);
      } catch (error) {
        throw asProtocolError(error);
      }
      if (!answered) throw taskNotFound(params.taskId);
      return answered as Record<string, unknown>;
    });
  // The SDK lifts a request's `inputResponses` into its context (the multi-round-trip seam): read them there.
  const answersOf = (params: z.infer<typeof TASK_PARAMS>, ctx: ServerContext): unknown =>
    ctx.mcpReq.inputResponses ?? params.inputResponses ?? {};
  const upstreamTask = async (method: TaskMethod, params: z.infer<typeof TASK_PARAMS>, ctx: ServerContext) =>
    deps.tasks.relay(
      principal,
      await deps.registry.snapshot(),
      scope,
      method,
      { taskId: params.taskId, inputResponses: answersOf(params, ctx) },
      ctx.mcpReq.signal,
    );
  taskMethod(
    'tasks/get',
    async (params, ctx) =>
      (await deps.approvedRounds.task(await deps.calls.approvalTask(principal, params.taskId))) ??
      upstreamTask('tasks/get', params, ctx),
  );
  // A gated call's task asks for input only when its approved call did: the answers are that call's next round.
  taskMethod('tasks/update', async (params, ctx) => {
    const gated = await deps.calls.approvalTask(principal, params.taskId);
    if (!gated) return upstreamTask('tasks/update', params, ctx);
    if (gated.status === 'input_required') {
      await deps.approvedRounds.taskRound(
        principal,
        params.taskId.slice(GATEHOUSE_PREFIX.length),
        answersOf(params, ctx),
        agentInputCapabilities(ctx, server.getClientCapabilities()),
        ctx.mcpReq.signal,
      );
    }
    return {};
  });
  taskMethod('tasks/cancel', async (params, ctx) =>
    (await deps.calls.cancelApprovalTask(principal, params.taskId)) ? {} : upstreamTask('tasks/cancel', params, ctx),
  );

  /** A per-user server's lists are asked with the caller's own grant (`per-user-lists.ts`). */
  const asCaller =
    (snapshot: Snapshot, signal: AbortSignal): AsCaller =>
    (hub, fn) =>
      deps.withUpstream(snapshot, hub, fn, signal, principal, QUIET);

  server.setRequestHandler('prompts/list', async (request, ctx: ServerContext) => {
    const snapshot = await deps.registry.snapshot();
    const lists = await Promise.all(
      visible(snapshot).map((hub) =>
        hub.perUser
          ? livePrompts(hub, asCaller(snapshot, ctx.mcpReq.signal))
          : [...hub.prompts.values()].map((entry) => ({ entry, prompt: entry.prompt })),
      ),
    );
    const prompts: Prompt[] = lists
      .flat()
      .map(({ entry, prompt }) => ({ ...prompt, name: scope.kind === 'aggregate' ? entry.exposed : entry.name }));
    const page = pageOf('prompts', prompts, (p) => p.name, request.params?.cursor, deps.listPageSize);
    return { prompts: page.items, ...(page.nextCursor !== undefined ? { nextCursor: page.nextCursor } : {}) };
  });

  server.setRequestHandler('prompts/get', async (request, ctx: ServerContext) => {
    const snapshot = await deps.registry.snapshot();
    const { name } = request.params;
    let target: { hub: HubServer; upstreamName: string } | undefined;
    for (const hub of visible(snapshot)) {
      for (const entry of hub.prompts.values()) {
        if ((scope.kind === 'aggregate' ? entry.exposed : entry.name) === name)
          target = { hub, upstreamName: entry.name };
      }
    }
    if (!target) throw invalidParams(`Prompt ${name} not found`);
    const { hub, upstreamName } = target;
    assertInsideWorkspace(hub.detail, request.params.arguments ?? {});
    try {
      // In rounds when the upstream asks for input (2026-07-28), as tool calls are.
      const answer = await requestInRounds(
        deps.stateCodec,
        { clientId: principal.id, serverId: hub.row.id },
        { method: 'prompts/get', params: { name: upstreamName, arguments: request.params.arguments ?? {} } },
        ctx,
        agentInputCapabilities(ctx, server.getClientCapabilities()),
        (params) =>
          deps.withUpstream(
            snapshot,
            hub,
            (client, signal) =>
              client.getPrompt(params(client.getProtocolEra() === 'modern') as { name: string }, {
                signal,
                allowInputRequired: true,
              }) as Promise<Record<string, unknown>>,
            ctx.mcpReq.signal,
            principal,
          ),
        agentExtensions(ctx, server.getClientCapabilities()),
      );
      if (isInputRequired(answer)) return answer as InputRequiredResult;
      // Bounded as a tool result is: strings, nesting, messages and the serialized ceiling.
      return boundResult(answer as GetPromptResult, PROMPT_RESULT);
    } catch (error) {
      throw asProtocolError(error);
    }
  });

  server.setRequestHandler('resources/list', async (request, ctx: ServerContext) => {
    const snapshot = await deps.registry.snapshot();
    const hubs = visible(snapshot);
    // A per-user server's are the caller's own, asked live (every page: cursors stay keyed by URI).
    const lists = await Promise.all(
      hubs.map((hub) => (hub.perUser ? liveResources(hub, asCaller(snapshot, ctx.mcpReq.signal)) : hub.resources)),
    );
    const resources: Resource[] = [];
    for (const [index, hub] of hubs.entries()) {
      for (const resource of lists[index] ?? []) {
        // A UI resource waiting for review is not offered (as a quarantined tool is not listed); reading it says why.
        if (isUiUri(resource.uri) && hub.uiPins.get(resource.uri)?.state === 'quarantined') continue;
        resources.push(
          scope.kind === 'aggregate' ? { ...resource, uri: wrapResourceUri(hub.row.id, resource.uri) } : resource,
        );
      }
    }
    const page = pageOf('resources', resources, (r) => r.uri, request.params?.cursor, deps.listPageSize);
    return { resources: page.items, ...(page.nextCursor !== undefined ? { nextCursor: page.nextCursor } : {}) };
  });

  // Templates are asked of each upstream that has resources (they are not part of the handshake).
  server.setRequestHandler('resources/templates/list', async (_request, ctx: ServerContext) => {
    const snapshot = await deps.registry.snapshot();
    const lists = await Promise.all(
      visible(snapshot).map(async (hub) => {
        if (hub.row.status !== 'connected') return [];
        try {
          // Its first page only, each template bounded (never the SDK's auto-aggregate of every page).
          const resourceTemplates = await deps.withUpstream(
            snapshot,
            hub,
            (client, signal) =>
              client.getServerCapabilities()?.resources
                ? drainList<Template>(client, 'resources/templates/list', signal, { limits: FIRST_TEMPLATES_PAGE })
                : Promise.resolve([]),
            ctx.mcpReq.signal,
            principal,
            QUIET,
          );
          return resourceTemplates.map((t) =>
            scope.kind === 'aggregate' ? { ...t, uriTemplate: wrapResourceTemplate(hub.row.id, t.uriTemplate) } : t,
          );
        } catch {
          // One failing upstream does not hide the others' templates.
          return [];
        }
      }),
    );
    // Every server's list fits the ceiling; all of them together are held to it too (later ones left out).
    const all = lists.flat();
    return boundResult({ resourceTemplates: all }, TEMPLATES_RESULT, { maxBlocks: all.length });
  });

  // Completions go to the server that owns the prompt or resource template.
  server.setRequestHandler('completion/complete', async (request, ctx: ServerContext) => {
    const snapshot = await deps.registry.snapshot();
    const { ref } = request.params;
    let owner: HubServer | undefined;
    let upstreamRef = ref;
    if (ref.type === 'ref/prompt') {
      for (const hub of visible(snapshot)) {
        for (const entry of hub.prompts.values()) {
          if ((scope.kind === 'aggregate' ? entry.exposed : entry.name) === ref.name) {
            owner = hub;
            upstreamRef = { ...ref, name: entry.name };
          }
        }
      }
    } else if (scope.kind === 'aggregate') {
      const unwrapped = unwrapResourceUri(ref.uri);
      owner = unwrapped ? snapshot.server(unwrapped.serverId, principal.groups) : undefined;
      if (unwrapped) upstreamRef = { ...ref, uri: unwrapped.uri };
    } else owner = single(snapshot);
    if (!owner) throw invalidParams(`No prompt or resource template matches ${JSON.stringify(ref)}`);
    const target = owner;
    // A prompt's arguments are checked by name, as a tool's are. A template's variables are pieces of a URI,
    // not paths its server resolves (a relative `{path}` is fine there): only `file:` URIs among them count.
    const policy = ref.type === 'ref/prompt' ? target.detail : { ...target.detail, pathArgs: [] };
    const { argument, context } = request.params;
    // An empty value is the first keystroke: nothing to check yet.
    if (argument.value !== '') assertInsideWorkspace(policy, { [argument.name]: argument.value });
    assertInsideWorkspace(policy, context?.arguments ?? {});
    try {
      const result = await deps.withUpstream(
        snapshot,
        target,
        (client, signal) => client.complete({ ...request.params, ref: upstreamRef }, { signal }),
        ctx.mcpReq.signal,
        principal,
      );
      return boundResult(result, COMPLETION_RESULT);
    } catch (error) {
      throw asProtocolError(error);
    }
  });

  /** The server that owns a resource URI the agent gave, and the URI as that server knows it. */
  const resourceOwner = (snapshot: Snapshot, given: string): { owner: HubServer; uri: string } => {
    const found = resourceOwnerIn(snapshot, scope, principal.groups, given);
    if (!found) throw invalidParams(`Resource ${given} not found`);
    return found;
  };

  server.setRequestHandler('resources/subscribe', async (request, ctx: ServerContext) => {
    const snapshot = await deps.registry.snapshot();
    const target = resourceOwner(snapshot, request.params.uri);
    assertInsideWorkspace(target.owner.detail, { uri: target.uri });
    let added: boolean;
    try {
      added = await subscribeUpstream(deps, snapshot, target, principal, server, request.params.uri, ctx.mcpReq.signal);
    } catch (error) {
      throw asProtocolError(error);
    }
    if (!added) throw invalidParams('This session holds the most resource subscriptions it may.');
    deps.subscribed(server, request.params.uri);
    return {};
  });

  server.setRequestHandler('resources/unsubscribe', async (request) => {
    const snapshot = await deps.registry.snapshot();
    resourceOwner(snapshot, request.params.uri);
    // The upstream is told when no other agent session listens to that URI there any more.
    await deps.subscriptions.remove(server, request.params.uri);
    return {};
  });

  server.setRequestHandler('resources/read', async (request, ctx: ServerContext) => {
    const snapshot = await deps.registry.snapshot();
    const { owner, uri } = resourceOwner(snapshot, request.params.uri);
    assertInsideWorkspace(owner.detail, { uri });
    try {
      // In rounds when the upstream asks for input (2026-07-28), as tool calls are.
      const answer = await requestInRounds(
        deps.stateCodec,
        { clientId: principal.id, serverId: owner.row.id },
        { method: 'resources/read', params: { uri } },
        ctx,
        agentInputCapabilities(ctx, server.getClientCapabilities()),
        (params) =>
          deps.withUpstream(
            snapshot,
            owner,
            (client, signal) =>
              client.readResource(params(client.getProtocolEra() === 'modern') as { uri: string }, {
                signal,
                allowInputRequired: true,
              }) as Promise<Record<string, unknown>>,
            ctx.mcpReq.signal,
            principal,
          ),
        agentExtensions(ctx, server.getClientCapabilities()),
      );
      if (isInputRequired(answer)) return answer as InputRequiredResult;
      // Bounded as a tool result is (a content's `text` or `blob` whole, or the read is refused), before its pin check.
      const result = boundResult(answer as ReadResourceResult, RESOURCE_RESULT);
      // An MCP Apps UI resource is served only as pinned (a changed one is quarantined, with its diff).
      if (isUiUri(uri)) await deps.uiPins.admit(owner, uri, result.contents);
      if (scope.kind === 'single') return result;
      return { ...result, contents: result.contents.map((c) => ({ ...c, uri: wrapResourceUri(owner.row.id, c.uri) })) };
    } catch (error) {
      throw asProtocolError(error);
    }
  });

  return server;
}
