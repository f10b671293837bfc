/**
 * One tool call through the hub, step by step (DESIGN.md, "How a tool call
 * flows"): resolve the name, take the verdict, apply the token's limits,
 * validate the arguments against the pinned schema, keep path arguments in
 * their sandbox, queue a gated call for approval or run an allowed one on its
 * upstream, and audit exactly one event whatever happens.
 */
import type { Client } from '@modelcontextprotocol/client';
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  type InputRequests,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { TokenPrincipal } from '../../api/token-auth.js';
import type { CallOutcome } from '../../audit/calls.js';
import { findGatehouseError, GatehouseError } from '../../errors.js';
import type { ArgumentValidator } from '../../policy/arguments.js';
import { assertPathsInside } from '../../policy/paths.js';
import type { SettingsService } from '../../settings/service.js';
import type {
  BoundedCallResult,
  Continuation,
  InteractiveCallOptions,
  InteractiveCallResult,
  UpstreamInputRequired,
  UpstreamPool,
} from '../../upstream/index.js';
import type { EndpointScope } from '../endpoint.js';
import { errorResult, isResultError, pendingApprovalResult, unknownTool } from '../results.js';
import { assertAnswerable } from './input-requests.js';
import { type HubRequestState, type HubStateCodec, stateBinding, stateMatches } from './request-state.js';
import type { HubServer, HubTool, Snapshot } from './view.js';

export type CallVerdict = 'allow' | 'gated' | 'blocked' | 'unknown_server' | 'unknown_tool' | 'quarantined';

export interface CallRecord {
  client: Pick<TokenPrincipal, 'id' | 'name'>;
  surface: 'hub';
  serverId: string | null;
  tool: string;
  verdict: CallVerdict;
  approvalId?: string;
  outcome: CallOutcome;
  latencyMs: number;
  /** Default: the sizes of `arguments` and `result` as JSON (the auditor measures them off the call's path). */
  requestBytes?: number;
  responseBytes?: number;
  arguments?: unknown;
  result?: unknown;
}

/** What the call path needs from the rest of Gatehouse (each a real module, passed in at assembly). */
export interface CallPorts {
  settings: SettingsService;
  validator: ArgumentValidator;
  poolFor(privateNetwork: boolean): UpstreamPool;
  /** Signs the hub's `requestState` when an upstream asks the agent for input. */
  stateCodec: HubStateCodec;
  /** Supervised stdio servers (src/supervisor). */
  stdio: StdioUpstream;
  limiter: { acquire(principal: TokenPrincipal, defaultPerMinute: number): () => void };
  /** Resolves once the call's audit row is committed (never rejects): await it before answering. */
  audit(record: CallRecord): Promise<void>;
  approvals: {
    create(request: {
      surface: 'hub';
      requester: TokenPrincipal;
      serverId: string;
      tool: string;
      exposedName: string;
      arguments: Record<string, unknown>;
      pinHash: string | null;
      policyVersion: number;
      detail: { title?: string; description?: string; inputCapabilities?: Record<string, unknown> };
    }): Promise<{ id: string }>;
  };
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
  const split = name.indexOf('__');
  const serverId = split > 0 ? name.slice(0, split) : null;
  const server = serverId ? snapshot.server(serverId, groups) : undefined;
  if (!server) return { missing: 'unknown_server', serverId };
  const tool = server.tools.get(name);
  return tool && tool.verdict !== 'excluded' ? { tool, server } : { missing: 'unknown_tool', serverId: server.row.id };
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

/** What an upstream answered: a tool result, or a request for the agent's input (2026-07-28). */
export type UpstreamOutcome = CallToolResult | UpstreamInputRequired;

export function needsInput(outcome: UpstreamOutcome): outcome is UpstreamInputRequired {
  return 'inputRequired' in outcome;
}

/**
 * Runs an allowed call on its upstream: through the pool (and so the egress guard) for HTTP servers.
 * `continuation` carries a later round of the multi-round-trip flow (the agent's answers and the
 * upstream's state); an upstream that asks for input answers `{inputRequired}`.
 */
export async function runUpstream(
  ports: Pick<CallPorts, 'poolFor' | 'stdio'>,
  snapshot: Snapshot,
  server: HubServer,
  toolName: string,
  args: Record<string, unknown>,
  options: {
    signal?: AbortSignal;
    onProgress?: (progress: { progress: number; total?: number; message?: string }) => void;
    continuation?: Continuation | undefined;
    inputCapabilities?: Record<string, unknown> | undefined;
  },
): Promise<UpstreamOutcome> {
  const interactive = {
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.continuation ? { continuation: options.continuation } : {}),
    ...(options.inputCapabilities ? { inputCapabilities: options.inputCapabilities } : {}),
  };
  if (server.row.transport === 'stdio') {
    // The supervisor's one long-lived client for this server (lazy start within the call's deadline).
    return asOutcome(await ports.stdio.callTool(server.row.id, toolName, args, interactive));
  }
  const upstream = snapshot.upstreamOf(server);
  if (!upstream) throw new GatehouseError('internal_error');
  return asOutcome(
    await ports.poolFor(upstream.privateNetwork).callToolInteractive(upstream.target, toolName, args, interactive),
  );
}

function asOutcome(result: InteractiveCallResult): UpstreamOutcome {
  return 'inputRequired' in result ? result : toCallToolResult(result);
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
  /** Aborted when the agent goes away (or cancels). */
  signal: AbortSignal;
  /** The hub's verified state of this round, when the agent sent one. */
  state?: HubRequestState | undefined;
  inputResponses?: Record<string, unknown> | undefined;
  progressToken?: string | number | undefined;
  /** Sends a notification to the agent, tied to this request (progress). */
  notify?:
    | ((notification: { method: 'notifications/progress'; params: Record<string, unknown> }) => Promise<void>)
    | undefined;
}

export function callContextOf(
  ctx: ServerContext,
  params: { _meta?: { progressToken?: string | number } | undefined },
): CallContext {
  return {
    signal: ctx.mcpReq.signal,
    state: verifiedState(ctx),
    inputResponses: ctx.mcpReq.inputResponses,
    progressToken: ctx.mcpReq._meta?.progressToken ?? params._meta?.progressToken,
    notify: (notification) => ctx.mcpReq.notify(notification as Parameters<ServerContext['mcpReq']['notify']>[0]),
  };
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

export class HubCalls {
  constructor(private readonly ports: CallPorts) {}

  async call(
    principal: TokenPrincipal,
    snapshot: Snapshot,
    scope: CallScope,
    params: { name: string; arguments?: Record<string, unknown> | undefined },
    ctx: CallContext,
    /** What input the agent can give an upstream that asks (see `agentInputCapabilities`). */
    inputCapabilities?: Record<string, unknown>,
  ): Promise<CallToolResult | InputRequiredResult> {
    const started = performance.now();
    const args = params.arguments ?? {};
    const record = (
      fields: Pick<CallRecord, 'serverId' | 'tool' | 'verdict' | 'outcome'> & Partial<CallRecord>,
      result?: unknown,
    ) =>
      this.ports.audit({
        client: principal,
        surface: 'hub',
        latencyMs: Math.round(performance.now() - started),
        arguments: args,
        result,
        ...fields,
      });

    const resolution = resolveTool(snapshot, principal.groups, scope, params.name);
    if ('missing' in resolution) {
      await record({
        serverId: resolution.serverId,
        tool: params.name,
        verdict: resolution.missing,
        outcome: 'unknown_tool',
      });
      throw unknownTool(params.name);
    }
    const { tool, server } = resolution;
    const audit = (verdict: CallVerdict, outcome: CallOutcome, result?: unknown, approvalId?: string) =>
      record(
        { serverId: server.row.id, tool: tool.name, verdict, outcome, ...(approvalId ? { approvalId } : {}) },
        result,
      );

    if (tool.verdict === 'blocked' || tool.verdict === 'quarantined') {
      const error =
        tool.verdict === 'blocked'
          ? new GatehouseError('tool.blocked', `The tool ${params.name} is blocked by policy.`)
          : new GatehouseError(
              'tool.quarantined',
              `The tool ${params.name} changed since it was approved (or is new) and waits for review.`,
              {
                reason: tool.pin?.reason ?? 'new',
              },
            );
      await audit(tool.verdict, error.code);
      return errorResult(error);
    }
    const verdict: CallVerdict = tool.verdict === 'gated' ? 'gated' : 'allow';
    // A later round of a multi-round-trip call: its state must be the one minted for this very call.
    const state = ctx.state;
    // Hashing the arguments is only needed when a round carries state or an upstream asks for input.
    const binding = () => stateBinding(principal.id, server.row.id, tool.name, args);
    if (state && !stateMatches(state, binding())) {
      const error = new GatehouseError('hub.request_state_mismatch');
      await audit(verdict, error.code);
      return errorResult(error);
    }

    let release: (() => void) | undefined;
    try {
      const settings = await this.ports.settings.current();
      release = this.ports.limiter.acquire(principal, settings['hub.rateLimit']);
      this.ports.validator.validate(
        tool.pin?.pinHash ?? `${server.row.id}/${tool.name}`,
        tool.definition.inputSchema,
        args,
      );
      assertPathsInside(server.detail, args);

      if (verdict === 'gated') {
        const approval = await this.ports.approvals.create({
          surface: 'hub',
          requester: principal,
          serverId: server.row.id,
          tool: tool.name,
          exposedName: params.name,
          arguments: args,
          pinHash: tool.pin?.pinHash ?? null,
          policyVersion: server.row.policy_version,
          detail: {
            ...(tool.definition.title ? { title: tool.definition.title } : {}),
            ...(tool.definition.description ? { description: tool.definition.description } : {}),
            // The approved call runs without the agent; it may ask only for input the agent can give later.
            ...(inputCapabilities ? { inputCapabilities } : {}),
          },
        });
        await audit('gated', 'pending_approval', undefined, approval.id);
        return pendingApprovalResult(
          approval.id,
          `${params.name} needs an operator's approval. Poll gatehouse__approval_status with this approval_id for the outcome.`,
        );
      }

      const { progressToken, notify } = ctx;
      const result = await runUpstream(this.ports, snapshot, server, tool.name, args, {
        signal: ctx.signal,
        continuation: continuationOf(ctx.inputResponses, state),
        inputCapabilities,
        ...(progressToken !== undefined && notify
          ? {
              onProgress: (p) =>
                void notify({ method: 'notifications/progress', params: { progressToken, ...p } }).catch(() => {}),
            }
          : {}),
      });
      if (needsInput(result)) {
        assertAnswerable(result.inputRequired.inputRequests, inputCapabilities);
        await audit('allow', 'input_required', result.inputRequired);
        const { requestState } = result.inputRequired;
        const minted = await this.ports.stateCodec.mint({
          ...binding(),
          ...(requestState !== undefined ? { u: requestState } : {}),
        });
        return inputRequiredResult(result.inputRequired.inputRequests, minted);
      }
      await audit('allow', result.isError ? 'tool_error' : 'ok', result);
      return result;
    } catch (error) {
      const known = findGatehouseError(error);
      if (!known) {
        await audit(verdict, 'internal_error');
        throw error;
      }
      await audit(verdict, known.code);
      if (isResultError(known)) return errorResult(known);
      throw error;
    } finally {
      release?.();
    }
  }
}
