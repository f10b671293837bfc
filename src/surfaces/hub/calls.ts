/**
 * One tool call through the hub: what is the hub's own in the gate's pipeline
 * (`../gate.ts`) — resolving `<server>__<tool>` to a server and its pinned
 * tool, validating the arguments against the pinned schema, keeping path
 * arguments in their sandbox, the approval card, and running an allowed call
 * on its upstream (with the multi-round-trip state of 2026-07-28).
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/client';
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  type InputRequests,
  type InputRequiredResult,
  inputRequired,
  LOG_LEVEL_META_KEY,
  ProtocolError,
  type ServerContext,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/server';
import type { AskRecord } from '../../audit/calls.js';
import type { Cancellation } from '../../cancellation.js';
import { findGatehouseError, GatehouseError } from '../../errors.js';
import type { Principal, TokenPrincipal } from '../../identity/index.js';
import { withFixedArguments } from '../../overrides/model.js';
import type { ArgumentValidator } from '../../policy/arguments.js';
import { assertPathsInside } from '../../policy/paths.js';
import type { AskRelay } from '../../upstream/asks.js';
import type {
  BoundedCallResult,
  Continuation,
  InteractiveCallOptions,
  InteractiveCallResult,
  UpstreamChannel,
  UpstreamInputRequired,
  UpstreamLogMessage,
  UpstreamPool,
  UpstreamTask,
} from '../../upstream/index.js';
import { upstreamRpcErrorOf } from '../../upstream/map-error.js';
import type { EndpointScope } from '../endpoint.js';
import { Gate, type GatePorts } from '../gate.js';
import { createTaskResult, type DetailedTask, errorResult, isResultError } from '../results.js';
import { HeldCalls, type RoundStep } from './held-calls.js';
import type { HeldRelay } from './held-relay.js';
import { askAgent, assertAnswerable } from './input-requests.js';
import { admits } from './log-levels.js';
import { UI_EXTENSION, wrapResourceUri } from './names.js';
import { type HubRequestState, type HubStateCodec, stateBinding, stateMatches } from './request-state.js';
import { type HubTasks, passedTask } from './tasks.js';
import { activeOverride, type HubServer, type HubTool, isListed, quarantineReason, type Snapshot } from './view.js';

/** What an approval card adds for an overridden tool: its aggregated and display names, the fixed arguments. */
function overrideCard(tool: HubTool): Record<string, unknown> {
  const override = activeOverride(tool);
  if (!override) return {};
  return {
    override: {
      aggregatedName: tool.autoName,
      displayName: tool.exposed,
      upstreamName: tool.name,
      fixedArguments: Object.keys(override.fixedArguments ?? {}),
    },
  };
}

/** What the call path needs from the rest of Gatehouse (each a real module, passed in at assembly). */
export interface CallPorts extends GatePorts {
  validator: ArgumentValidator;
  poolFor(privateNetwork: boolean): UpstreamPool;
  /** Signs the hub's `requestState` when an upstream asks the agent for input. */
  stateCodec: HubStateCodec;
  /** Supervised stdio servers (src/supervisor). */
  stdio: StdioUpstream;
  /** Told of every call on `/mcp` to a usable tool (search mode's recent tools). */
  onToolCalled?: ((principal: TokenPrincipal, exposed: string) => void) | undefined;
  /** Binds the upstream tasks an agent's calls create to its token (the Tasks extension). */
  tasks?: HubTasks | undefined;
  /** Relays a held call's round to the replica that holds it (PostgreSQL; `held-relay.ts`). */
  heldRelay?: HeldRelay<TaskableOutcome> | undefined;
}

/** What the hub needs of the stdio supervisor. */
export interface StdioUpstream {
  callTool(
    id: string,
    name: string,
    args: Record<string, unknown> | undefined,
    opts?: InteractiveCallOptions,
  ): Promise<InteractiveCallResult>;
  withClient<T>(
    id: string,
    deadlineMs: number,
    fn: (client: Client, signal: AbortSignal) => Promise<T>,
    opts?: { signal?: AbortSignal | undefined },
  ): Promise<T>;
  /** The server's client for a long-lived stream (2026-07-28 resource subscriptions). */
  openChannel(id: string, deadlineMs: number): Promise<UpstreamChannel>;
}

/** Where a name was looked up: the aggregate (`/mcp`) or one server unprefixed (`/mcp/s/{server}`). */
export type CallScope = EndpointScope;

type Resolution =
  | { tool: HubTool; server: HubServer }
  | { missing: 'unknown_server' | 'unknown_tool'; serverId: string | null };

export function resolveTool(snapshot: Snapshot, groups: readonly string[], scope: CallScope, name: string): Resolution {
  if (scope.kind === 'single') {
    const server = snapshot.server(scope.serverId, groups);
    if (!server) return { missing: 'unknown_server', serverId: scope.serverId };
    const tool = server.toolsByName.get(name);
    return tool && tool.verdict !== 'excluded'
      ? { tool, server }
      : { missing: 'unknown_tool', serverId: server.row.id };
  }
  if (scope.kind === 'toolset') {
    // A toolset is a window on the aggregate: the same names, only the tools it lists.
    if (!snapshot.toolsets.has(scope.toolset)) return { missing: 'unknown_server', serverId: null };
    const found = resolveTool(snapshot, groups, { kind: 'aggregate' }, name);
    return 'tool' in found && !snapshot.inToolset(scope.toolset, found.tool)
      ? { missing: 'unknown_tool', serverId: found.server.row.id }
      : found;
  }
  // An override's display name first (it need not have a `<server>__` shape).
  const renamed = snapshot.renamed.get(name);
  if (renamed) {
    const server = snapshot.server(renamed.serverId, groups);
    if (server && renamed.verdict !== 'excluded') return { tool: renamed, server };
  }
  const split = name.indexOf('__');
  const serverId = split > 0 ? name.slice(0, split) : null;
  const server = serverId ? snapshot.server(serverId, groups) : undefined;
  if (!server) return { missing: 'unknown_server', serverId };
  const tool = server.tools.get(name);
  return tool && tool.verdict !== 'excluded' && !snapshot.renamed.has(name)
    ? { tool, server }
    : { missing: 'unknown_tool', serverId: server.row.id };
}

/** `_meta` keys the protocol reserves: the upstream's (its serverInfo, …) describe it, not Gatehouse, so they stay behind. */
const RESERVED_META_PREFIX = 'io.modelcontextprotocol/';

function toCallToolResult(result: BoundedCallResult): CallToolResult {
  const { truncated, _meta, ...rest } = result;
  const meta: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(_meta ?? {})) if (!key.startsWith(RESERVED_META_PREFIX)) meta[key] = value;
  if (truncated) meta['io.gatehouse/truncated'] = true;
  return { ...(rest as CallToolResult), ...(Object.keys(meta).length > 0 ? { _meta: meta } : {}) };
}

/**
 * A result whose resource links point back through `/mcp` (`gatehouse://{server}/…`, as listed resources
 * do), so an agent of the aggregate can read them. The result is copied only when it has a link.
 */
export function withLinksThroughHub(result: CallToolResult, serverId: string): CallToolResult {
  const { content } = result;
  if (!Array.isArray(content) || !content.some((block) => block?.type === 'resource_link')) return result;
  return {
    ...result,
    content: content.map((block) =>
      block.type === 'resource_link' && typeof block.uri === 'string'
        ? { ...block, uri: wrapResourceUri(serverId, block.uri) }
        : block,
    ),
  };
}

/** `relay`, noting each ask and whether the agent answered it in `asks`. */
function recordingAsks(relay: AskRelay, asks: AskRecord[]): AskRelay {
  return async (ask, limits) => {
    const record = { method: ask.method, answered: false };
    asks.push(record);
    const answer = await relay(ask, limits);
    record.answered = true;
    return answer;
  };
}

/** What an upstream answered: a tool result, or a request for the agent's input (2026-07-28). */
export type UpstreamOutcome = CallToolResult | UpstreamInputRequired;

export function needsInput(outcome: UpstreamOutcome): outcome is UpstreamInputRequired {
  return 'inputRequired' in outcome;
}

/** What an upstream answered an agent that declared the Tasks extension: also, a task. */
export type TaskableOutcome = UpstreamOutcome | UpstreamTask;

export function isUpstreamTask(outcome: TaskableOutcome): outcome is UpstreamTask {
  return 'task' in outcome && !('content' in outcome);
}

/** `runTaskable` for a call that declared no Tasks extension (an upstream task is then a protocol error). */
export async function runUpstream(...args: Parameters<typeof runTaskable>): Promise<UpstreamOutcome> {
  const outcome = await runTaskable(...args);
  if (isUpstreamTask(outcome)) {
    throw new GatehouseError('upstream_protocol_error', 'The upstream answered with a task nobody asked for.', {
      reason: 'unexpected_task',
    });
  }
  return outcome;
}

/**
 * Runs an allowed call on its upstream: through the pool (and so the egress guard) for HTTP servers.
 * `continuation` carries a later round of the multi-round-trip flow (the agent's answers and the
 * upstream's state); an upstream that asks for input answers `{inputRequired}`.
 */
export async function runTaskable(
  ports: Pick<CallPorts, 'poolFor' | 'stdio'>,
  snapshot: Snapshot,
  server: HubServer,
  toolName: string,
  args: Record<string, unknown>,
  options: {
    signal?: AbortSignal | Cancellation;
    onProgress?: (progress: { progress: number; total?: number; message?: string }) => void;
    onLog?: ((message: UpstreamLogMessage) => void) | undefined;
    logLevel?: string | undefined;
    continuation?: Continuation | undefined;
    inputCapabilities?: Record<string, unknown> | undefined;
    /** Extensions the agent declared that pass on to a 2026-07-28 upstream (MCP Apps). */
    extensions?: Record<string, unknown> | undefined;
    /** Whose OAuth grant the call uses on a server with `auth: oauth` (its user, or the shared grant). */
    principal?: Principal | undefined;
    /** Relays a 2025-era upstream's asks to the agent (a 2025-era agent that can be asked). */
    ask?: AskRelay | undefined;
    /** The agent declared the Tasks extension (declared to a 2026-07-28 upstream in turn). */
    tasks?: boolean | undefined;
    /** `ask` relays to a 2026-07-28 agent in rounds (`held-calls.ts`): a dual-era upstream stays at 2026-07-28. */
    asksInRounds?: boolean | undefined;
  },
): Promise<TaskableOutcome> {
  const interactive = {
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.onLog ? { onLog: options.onLog } : {}),
    ...(options.logLevel !== undefined ? { logLevel: options.logLevel } : {}),
    ...(options.continuation ? { continuation: options.continuation } : {}),
    ...(options.inputCapabilities ? { inputCapabilities: options.inputCapabilities } : {}),
    ...(options.extensions ? { extensions: options.extensions } : {}),
    ...(options.ask ? { ask: options.ask } : {}),
    ...(options.tasks ? { tasks: true } : {}),
    ...(options.asksInRounds ? { asksInRounds: true } : {}),
  };
  if (server.row.transport === 'stdio') {
    // The supervisor's one long-lived client for this server (lazy start within the call's deadline).
    return asOutcome(await ports.stdio.callTool(server.row.id, toolName, args, interactive));
  }
  const upstream = await snapshot.upstreamFor(server, options.principal);
  if (!upstream) throw new GatehouseError('internal_error');
  // Its `x-mcp-header` arguments go out as `Mcp-Param-*` headers to a 2026-07-28 upstream (SEP-2243).
  const inputSchema = server.toolsByName.get(toolName)?.definition.inputSchema;
  try {
    return asOutcome(
      await ports
        .poolFor(upstream.privateNetwork)
        .callToolInteractive(
          upstream.target,
          toolName,
          args,
          inputSchema ? { ...interactive, inputSchema } : interactive,
        ),
    );
  } catch (error) {
    const known = findGatehouseError(error);
    // A 403 insufficient_scope to a grant's token: consent to the wider scope is needed (never retried here).
    if (known?.details?.reason === 'insufficient_scope' && snapshot.carriesGrant(server, upstream)) {
      throw (await snapshot.scopeInsufficient(server, options.principal, String(known.details.scope ?? ''))) ?? error;
    }
    // A 401 to a grant's token: the credentials were refused (revoked, expired early), not missing.
    if (known?.code === 'auth_required' && snapshot.carriesGrant(server, upstream)) {
      snapshot.tokenRejected(server, options.principal, upstream);
      throw new GatehouseError(
        'auth_failed',
        'The upstream refused the OAuth token Gatehouse sent; retry, or reconnect the server if it persists.',
        { reason: 'token_rejected' },
      );
    }
    throw error;
  }
}

function asOutcome(result: InteractiveCallResult): TaskableOutcome {
  if ('inputRequired' in result || isUpstreamTask(result as TaskableOutcome)) return result as TaskableOutcome;
  return toCallToolResult(result as BoundedCallResult);
}

/** The MCP `input_required` result that hands an upstream's input requests to the agent, with the hub's state. */
export function inputRequiredResult(inputRequests: Record<string, unknown>, requestState: string): InputRequiredResult {
  return { resultType: 'input_required', inputRequests: inputRequests as InputRequests, requestState };
}

/** The continuation a retried round carries: the agent's answers and the upstream state from the hub's state. */
export function continuationOf(
  inputResponses: Record<string, unknown> | undefined,
  state: HubRequestState | undefined,
): Continuation | undefined {
  if (!inputResponses && state?.u === undefined) return undefined;
  return { inputResponses, requestState: state?.u };
}

/**
 * What one call knows of the request that carries it, however it arrived: through the SDK's server
 * (`callContextOf`) or through the fast path (`fast-path.ts`), which never carries a state, answers
 * or a progress token.
 */
export interface CallContext {
  /** Aborted when the agent goes away (or cancels): the SDK's signal, or the fast path's `Canceller`. */
  signal: AbortSignal | Cancellation;
  /** The hub's verified state of this round, when the agent sent one. */
  state?: HubRequestState | undefined;
  inputResponses?: Record<string, unknown> | undefined;
  progressToken?: string | number | undefined;
  /** Sends a notification to the agent, tied to this request (progress). */
  notify?:
    | ((notification: { method: 'notifications/progress'; params: Record<string, unknown> }) => Promise<void>)
    | undefined;
  /**
   * Relays an upstream log message to the agent, filtered by the level the agent set: its 2025 session's
   * (`logging/setLevel`) or its request's `_meta` logLevel (2026-07-28; none set, none sent).
   */
  log?: ((message: UpstreamLogMessage) => Promise<void>) | undefined;
  /** The agent's own `_meta` logLevel on this request (2026-07-28), asked of a 2026-07-28 upstream in turn. */
  logLevel?: string | undefined;
  /** Relays a 2025-era upstream's asks to the agent: a 2025-era session that declared input capabilities. */
  ask?: AskRelay | undefined;
  /** The extensions the agent declared that pass on to a 2026-07-28 upstream (`agentExtensions`). */
  extensions?: Record<string, unknown> | undefined;
  /**
   * The agent declared the Tasks extension (its request's `_meta` capabilities, or its 2025 session's): a
   * gated call answers as a task, and an upstream may answer with one.
   */
  tasks?: boolean | undefined;
}

export function callContextOf(
  ctx: ServerContext,
  params: { _meta?: { progressToken?: string | number } | undefined },
  /** The level the agent's 2025 session set (`log-levels.ts`); without one (or a `_meta` level) no logs relay. */
  sessionLevel?: string,
  /** The input capabilities of a 2025-era session's agent, which can be asked during the call. */
  askable?: Record<string, unknown>,
  /** What the agent's 2025 session declared at `initialize` (a 2026-07-28 request declares in its envelope). */
  sessionCapabilities?: ClientCapabilities,
): CallContext {
  const logLevel = logLevelOf(ctx) ?? sessionLevel;
  const extensions = agentExtensions(ctx, sessionCapabilities);
  return {
    ...(askable ? { ask: askAgent(ctx, askable) } : {}),
    ...(extensions ? { extensions } : {}),
    signal: ctx.mcpReq.signal,
    state: verifiedState(ctx),
    inputResponses: ctx.mcpReq.inputResponses,
    progressToken: ctx.mcpReq._meta?.progressToken ?? params._meta?.progressToken,
    notify: (notification) => ctx.mcpReq.notify(notification as Parameters<ServerContext['mcpReq']['notify']>[0]),
    ...(logLevel !== undefined
      ? {
          log: (message: UpstreamLogMessage) =>
            admits(message.level, logLevel)
              ? ctx.mcpReq.notify({ method: 'notifications/message', params: { ...message } } as Parameters<
                  ServerContext['mcpReq']['notify']
                >[0])
              : Promise.resolve(),
          logLevel,
        }
      : {}),
  };
}

/** The `_meta` logLevel of a 2026-07-28 request, when it carries one. */
function logLevelOf(ctx: ServerContext): string | undefined {
  const level = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[LOG_LEVEL_META_KEY];
  return typeof level === 'string' ? level : undefined;
}

const INPUT_CAPABILITIES = ['elicitation', 'sampling', 'roots'] as const;

/**
 * What input the agent can give (elicitation, sampling, roots), from its per-request envelope
 * (2026-07-28) or its session (2025): an upstream is told exactly that, and no more.
 */
export function agentInputCapabilities(
  ctx: ServerContext,
  sessionCapabilities: ClientCapabilities | undefined,
): Record<string, unknown> | undefined {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return pickInputCapabilities(envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? sessionCapabilities);
}

/** The extensions an agent's declaration passes on to upstreams (Tasks are the hub's own business). */
const PASSED_EXTENSIONS = [UI_EXTENSION] as const;

/**
 * The extensions among the capabilities an agent declared that Gatehouse passes on to a 2026-07-28 upstream
 * (MCP Apps: an upstream then answers with its UI, as it would to that agent directly).
 */
export function pickExtensions(capabilities: unknown): Record<string, unknown> | undefined {
  const declared = (capabilities as { extensions?: unknown } | undefined)?.extensions;
  if (!declared || typeof declared !== 'object' || Array.isArray(declared)) return undefined;
  const picked = PASSED_EXTENSIONS.filter((id) => (declared as Record<string, unknown>)[id] !== undefined).map((id) => [
    id,
    (declared as Record<string, unknown>)[id],
  ]);
  return picked.length > 0 ? Object.fromEntries(picked) : undefined;
}

/** The passed-on extensions an agent declared: in its request's envelope (2026-07-28) or its session (2025). */
export function agentExtensions(
  ctx: ServerContext,
  sessionCapabilities: ClientCapabilities | undefined,
): Record<string, unknown> | undefined {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return pickExtensions(envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? sessionCapabilities);
}

/** The input capabilities (elicitation, sampling, roots) among the capabilities an agent declared. */
export function pickInputCapabilities(capabilities: unknown): Record<string, unknown> | undefined {
  const declared = capabilities as Record<string, unknown> | undefined;
  if (!declared || typeof declared !== 'object') return undefined;
  const picked = INPUT_CAPABILITIES.filter((key) => declared[key] !== undefined).map((key) => [key, declared[key]]);
  return picked.length > 0 ? Object.fromEntries(picked) : undefined;
}

/** The hub's verified state of this round (the codec ran at the SDK seam), if the agent sent one. */
export function verifiedState(ctx: ServerContext): HubRequestState | undefined {
  const state = ctx.mcpReq.requestState<HubRequestState>();
  return state !== null && typeof state === 'object' ? state : undefined;
}

/** The key of the hub's own input request that sends a person to connect their upstream account. */
export const CONNECT_INPUT_KEY = 'gatehouse_connect';

/** Whether the agent declared it can take URL-mode elicitations (a person sent to a page to sign in). */
function takesUrlElicitation(declared: Record<string, unknown> | undefined): boolean {
  const elicitation = declared?.elicitation;
  return (
    typeof elicitation === 'object' && elicitation !== null && (elicitation as { url?: unknown }).url !== undefined
  );
}

/**
 * The hub's refusals: the gate's, except that an upstream's own JSON-RPC error to the call reaches the
 * agent as that protocol error (code, message, data; bounded in `map-error.ts`), as a direct client sees it,
 * and that a 2025-era agent that takes URL elicitations gets `auth.connect_required` as the spec's
 * URL-elicitation-required error (-32042) carrying the sign-in link.
 */
function hubRefusal(error: GatehouseError): CallToolResult | undefined {
  const upstream = upstreamRpcErrorOf(error);
  if (upstream) throw new ProtocolError(upstream.code, upstream.message, upstream.data);
  const { connectUrl, elicitationId } = error.details ?? {};
  if (error.code === 'auth.connect_required' && typeof connectUrl === 'string' && typeof elicitationId === 'string') {
    throw new UrlElicitationRequiredError(
      [{ mode: 'url', elicitationId, url: connectUrl, message: error.message }],
      error.message,
    );
  }
  return isResultError(error) ? errorResult(error) : undefined;
}

export class HubCalls {
  private readonly gate: Gate;
  /** Upstream calls held while a 2026-07-28 agent answers a 2025-era upstream's asks (`held-calls.ts`). */
  readonly held = new HeldCalls<TaskableOutcome>();

  constructor(private readonly ports: CallPorts) {
    this.gate = new Gate(ports, { surface: 'hub', upstream: true, refusal: hubRefusal });
    ports.heldRelay?.serveFrom(this.held);
  }

  /** Drops every held call (the hub is closing). */
  close(): void {
    this.ports.heldRelay?.close();
    this.held.close();
  }

  /** `gatehouse__approval_status` on the hub, answered through `read` (the approved rounds). */
  approvalStatus(
    principal: TokenPrincipal,
    rawArgs: unknown,
    read: (approvalId: string, waitS: number) => Promise<CallToolResult | InputRequiredResult>,
  ): Promise<CallToolResult | InputRequiredResult> {
    return this.gate.approvalStatus(principal, rawArgs, read);
  }

  /** A gated call's task for the token that asked it (`tasks/get`), or undefined when it is not one. */
  approvalTask(principal: TokenPrincipal, taskId: string): Promise<DetailedTask | undefined> {
    return this.gate.task(principal, taskId);
  }

  /** `tasks/cancel` of a gated call's task; false when it is not this token's. */
  cancelApprovalTask(principal: TokenPrincipal, taskId: string): Promise<boolean> {
    return this.gate.cancelTask(principal, taskId);
  }

  call(
    principal: TokenPrincipal,
    snapshot: Snapshot,
    scope: CallScope,
    params: { name: string; arguments?: Record<string, unknown> | undefined },
    ctx: CallContext,
    /** What input the agent can give an upstream that asks (see `agentInputCapabilities`). */
    inputCapabilities?: Record<string, unknown>,
    /** The meta-tool that carried the call (`gatehouse__call_tool`), marked on its card and audit row. */
    via?: string,
  ): Promise<CallToolResult | InputRequiredResult> {
    const given = params.arguments ?? {};
    // What really goes upstream: the agent's arguments with an override's fixed values (set by `check`).
    let args = given;
    let resolved: { tool: HubTool; server: HubServer } | undefined;
    // Hashing the arguments is only needed when a round carries state or an upstream asks for input.
    const binding = () => {
      const { tool, server } = resolved as { tool: HubTool; server: HubServer };
      return stateBinding(principal.id, server.row.id, tool.name, args);
    };
    // The asks relayed (or refused) during the call, for its audit row.
    const asks: AskRecord[] = [];
    const ask = ctx.ask && recordingAsks(ctx.ask, asks);
    return this.gate.call({
      principal,
      name: params.name,
      asks,
      // Audited as sent: once checked, the real arguments (fixed values included).
      get arguments() {
        return args;
      },
      via,
      asTask: ctx.tasks === true,
      resolve: () => {
        const resolution = resolveTool(snapshot, principal.groups, scope, params.name);
        if ('missing' in resolution) return { verdict: resolution.missing, serverId: resolution.serverId };
        resolved = resolution;
        const { tool, server } = resolution;
        if (scope.kind === 'aggregate' && isListed(tool)) this.ports.onToolCalled?.(principal, tool.exposed);
        // resolveTool answers an excluded tool as missing, so only usable, blocked or quarantined tools get here.
        const verdict = tool.verdict as Exclude<typeof tool.verdict, 'excluded'>;
        return { verdict, serverId: server.row.id, tool: tool.name, reason: quarantineReason(tool) };
      },
      check: () => {
        const { tool, server } = resolved as { tool: HubTool; server: HubServer };
        args = withFixedArguments(activeOverride(tool), given);
        // A later round of a multi-round-trip call: its state must be the one minted for this very call.
        if (ctx.state && !stateMatches(ctx.state, binding())) throw new GatehouseError('hub.request_state_mismatch');
        this.ports.validator.validate(
          tool.pin?.pinHash ?? `${server.row.id}/${tool.name}`,
          tool.definition.inputSchema,
          args,
        );
        assertPathsInside(server.detail, args);
      },
      approval: () => {
        const { tool, server } = resolved as { tool: HubTool; server: HubServer };
        return {
          arguments: args,
          pinHash: tool.pin?.pinHash ?? null,
          policyVersion: server.row.policy_version,
          detail: {
            ...(tool.definition.title ? { title: tool.definition.title } : {}),
            ...(tool.definition.description ? { description: tool.definition.description } : {}),
            // Both names and what the override fixed: the card never hides what is really sent.
            ...overrideCard(tool),
            // The approved call runs without the agent; it may ask only for input the agent can give later
            // (in approval_status rounds, or as the task's `input_required` answered with `tasks/update`).
            ...(inputCapabilities ? { inputCapabilities } : {}),
          },
        };
      },
      run: async () => {
        const { tool, server } = resolved as { tool: HubTool; server: HubServer };
        const { progressToken, notify, log } = ctx;
        // The retry of a round the hub started to connect the person's account: its answer is the hub's
        // (never passed upstream); declined, the call is not elicited again (the agent gets the link instead).
        const connectRound = ctx.state?.g === 1;
        const declined =
          connectRound &&
          (ctx.inputResponses?.[CONNECT_INPUT_KEY] as { action?: unknown } | undefined)?.action !== 'accept';
        const taskable = ctx.tasks === true && this.ports.tasks !== undefined;
        const upstreamOptions = (signal: AbortSignal | Cancellation, relay: AskRelay | undefined) => ({
          principal,
          tasks: taskable,
          signal,
          ask: relay,
          ...(log
            ? { onLog: (message: UpstreamLogMessage) => void log(message).catch(() => {}), logLevel: ctx.logLevel }
            : {}),
          continuation: connectRound ? undefined : continuationOf(ctx.inputResponses, ctx.state),
          inputCapabilities,
          extensions: ctx.extensions,
          ...(progressToken !== undefined && notify
            ? {
                onProgress: (p: { progress: number; total?: number; message?: string }) =>
                  void notify({ method: 'notifications/progress', params: { progressToken, ...p } }).catch(() => {}),
              }
            : {}),
        });
        let result: TaskableOutcome;
        try {
          // What the upstream sends while a round waits goes to that round's request.
          const sink = () => {
            const { onLog, onProgress } = upstreamOptions(ctx.signal, undefined);
            return { onLog, onProgress };
          };
          let step: RoundStep<TaskableOutcome> | undefined;
          if (ctx.state?.p !== undefined) {
            // A later round of a held call (a 2025-era upstream asked this 2026-07-28 agent): its answers go to
            // the waiting upstream, which goes on, here or on the replica that holds it.
            const { p } = ctx.state;
            step = await (this.held.continueHere(p, principal.id, ctx.inputResponses, asks, ctx.signal, sink()) ??
              this.ports.heldRelay?.continueElsewhere(p, principal.id, ctx.inputResponses, asks, ctx.signal, sink()));
            if (!step) throw new GatehouseError('hub.round_expired');
          } else if (!ctx.ask && inputCapabilities) {
            // A 2026-07-28 agent that can be asked (it declared input capabilities; a 2025 session's agent is asked
            // directly, `ctx.ask`): a 2025-era upstream's asks are held for its rounds.
            const call = this.held.create(principal.id, inputCapabilities);
            if (call) {
              call.start((signal, relay) => {
                const { onLog: _roundLog, onProgress, ...options } = upstreamOptions(signal, relay);
                return runTaskable(this.ports, snapshot, server, tool.name, args, {
                  ...options,
                  // Log messages and progress go to whichever round waits on the call when they arrive (a later
                  // round may ask for logs the first did not).
                  onLog: (message: UpstreamLogMessage) => call.round?.onLog?.(message),
                  ...(onProgress
                    ? {
                        onProgress: (p: { progress: number; total?: number; message?: string }) =>
                          call.round?.onProgress?.(p),
                      }
                    : {}),
                  asksInRounds: true,
                });
              });
              step = await this.held.round(call, principal.id, ctx.signal, sink());
            }
          }
          if (step && !step.done) {
            const inputRequests: Record<string, unknown> = {};
            for (const { key, ask: asked } of step.asks) {
              inputRequests[key] = { method: asked.method, ...(asked.params ? { params: asked.params } : {}) };
            }
            const minted = await this.ports.stateCodec.mint({ ...binding(), p: step.heldId });
            return {
              answer: inputRequiredResult(inputRequests, minted),
              outcome: 'input_required',
              audited: { inputRequests },
            };
          }
          result = step
            ? await step.outcome
            : await runTaskable(this.ports, snapshot, server, tool.name, args, upstreamOptions(ctx.signal, ask));
        } catch (error) {
          const known = findGatehouseError(error);
          const connectUrl = known?.code === 'auth.connect_required' ? known.details?.connectUrl : undefined;
          if (typeof connectUrl !== 'string' || declined || !takesUrlElicitation(inputCapabilities)) throw error;
          const message = `Sign in to "${server.row.id}" with your own account, so Gatehouse can call it for you.`;
          // A 2025-era agent (it can be asked during its call): the URL-elicitation-required error (hubRefusal).
          if (ctx.ask) {
            throw new GatehouseError('auth.connect_required', message, {
              ...known?.details,
              elicitationId: randomUUID(),
            });
          }
          // 2026-07-28: a URL-mode elicitation in an input_required round; the retry runs the call again.
          const minted = await this.ports.stateCodec.mint({ ...binding(), g: 1 });
          return {
            answer: inputRequiredResult(
              { [CONNECT_INPUT_KEY]: inputRequired.elicitUrl({ message, url: connectUrl }) },
              minted,
            ),
            outcome: 'input_required',
            // The link is the person's own (its state binds them): it stays out of the audit trail.
            audited: { inputRequests: { [CONNECT_INPUT_KEY]: { method: 'elicitation/create', mode: 'url' } } },
          };
        }
        if (isUpstreamTask(result)) {
          // Bound to this token before the agent hears of it: its tasks/get resolves at once, on any replica.
          await this.ports.tasks?.bind(principal, server.row.id, result);
          return { answer: createTaskResult(passedTask(scope, server.row.id, result)), outcome: 'ok', audited: result };
        }
        if (!needsInput(result)) {
          const answer = scope.kind !== 'single' ? withLinksThroughHub(result, server.row.id) : result;
          return { answer, outcome: result.isError ? 'tool_error' : 'ok' };
        }
        assertAnswerable(result.inputRequired.inputRequests, inputCapabilities);
        const { requestState } = result.inputRequired;
        const minted = await this.ports.stateCodec.mint({
          ...binding(),
          ...(requestState !== undefined ? { u: requestState } : {}),
        });
        return {
          answer: inputRequiredResult(result.inputRequired.inputRequests, minted),
          outcome: 'input_required',
          audited: result.inputRequired,
        };
      },
    });
  }
}
