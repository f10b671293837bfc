/**
 * The gate: one pipeline for a tool call on every MCP surface (hub, admin,
 * memory, and any later one). A surface says what a name resolves to and how
 * to run it; the gate does the rest, in one order, the same everywhere:
 *
 *   resolve → verdict (unknown: the protocol's "not found"; blocked or
 *   quarantined: a refusal) → the token's limits → argument checks →
 *   gated: an approval and `pending_approval` | allowed: run → one audit event
 *
 * It owns the answers an agent reads (the pending, refusal and result shapes)
 * and the one `gatehouse__approval_status` tool. Adding a verdict or a
 * surface touches this module once.
 */
import type { CallToolResult, InputRequiredResult, Tool } from '@modelcontextprotocol/server';
import type { ApprovalQueue, NewApproval } from '../approvals/queue.js';
import type { ApprovalSurface, ApprovalView } from '../approvals/types.js';
import { ArgumentFacts, type AskRecord, type CallEvent, type CallOutcome } from '../audit/calls.js';
import { findGatehouseError, GatehouseError } from '../errors.js';
import type { Principal, TokenPrincipal } from '../identity/index.js';
import type { CallVerdict } from '../policy/verdicts.js';
import type { Settings } from '../settings/keys.js';
import type { SettingsService } from '../settings/service.js';
import { activeTraceId, inSpan } from '../telemetry/tracing.js';
import { GATEHOUSE_PREFIX } from './hub/names.js';
import {
  createTaskResult,
  type DetailedTask,
  errorResult,
  isResultError,
  jsonToolResult,
  pendingApprovalResult,
  TASK_POLL_INTERVAL_MS,
  type TaskFields,
  unknownTool,
} from './results.js';

export type SurfaceName = ApprovalSurface;

export type GateAnswer = CallToolResult | InputRequiredResult;

/** What a surface made of the name it was called with. */
export type Resolution =
  | { verdict: 'unknown_server' | 'unknown_tool'; serverId: string | null }
  | {
      verdict: 'allow' | 'gated' | 'blocked' | 'quarantined';
      serverId: string | null;
      /** The tool as audited: the upstream's own name, or the surface's tool. */
      tool: string;
      /** Why a quarantined tool waits (`new`, `changed`, …). */
      reason?: string | undefined;
    };

/** What an approval card shows of a gated call, besides who asked and what the gate already knows. */
export type ApprovalCard = Pick<
  NewApproval,
  'arguments' | 'shownArguments' | 'pinHash' | 'policyVersion' | 'detail'
> & {
  /** The name the agent called (default: the call's name). */
  exposedName?: string;
};

/** How an allowed call ended: the agent's answer, or a finding that it needs an approval after all. */
export type RunOutcome = AnsweredRun | ApprovalNeeded;

export interface AnsweredRun {
  answer: GateAnswer;
  outcome: CallOutcome;
  /** What the audit keeps as the result (default: the answer). */
  audited?: unknown;
}

export interface ApprovalNeeded {
  approval: ApprovalCard;
  /** The sentence the agent reads before "Poll …". */
  message: string;
}

export interface SurfaceCall {
  principal: TokenPrincipal | Principal;
  /** The name the agent called. */
  name: string;
  /** The arguments as the agent sent them (audited; the digest is taken in every mode). */
  arguments: unknown;
  /**
   * What the audit keeps of them instead, when they carry secrets (an admin call installing a server with its
   * token): the approval card's masked form, digest included, so no row (nor a digest of a short secret) holds one.
   */
  auditedArguments?: unknown;
  resolve(settings: Settings): Resolution;
  /** Checks before anything is queued or run (schema, path sandbox, a round's state); throw a GatehouseError. */
  check?(): void | Promise<void>;
  /** The approval card of a call whose verdict is `gated`. */
  approval?(): ApprovalCard | Promise<ApprovalCard>;
  /** Runs an allowed call. */
  run(): Promise<RunOutcome>;
  /**
   * The meta-tool that carried the call (`gatehouse__call_tool` in search mode): the one mark that sets
   * its approval card and audit row apart from a direct call's.
   */
  via?: string | undefined;
  /** What the upstream asked the agent during the call, filled while it runs (audited: `CallEvent.asks`). */
  asks?: readonly AskRecord[] | undefined;
  /**
   * The agent declared the Tasks extension: a gated call answers as a task (`working` while it waits,
   * then `completed`, `failed` or `cancelled`, read with `tasks/get`) instead of `pending_approval`.
   */
  asTask?: boolean | undefined;
}

/** What every surface shares: settings, the approval queue, the audit trail, the per-token limits. */
export interface GatePorts {
  settings: SettingsService;
  approvals: Pick<ApprovalQueue, 'create' | 'status' | 'get' | 'withdraw'>;
  /** Resolves once the call's audit row is committed (never rejects): awaited before the answer leaves. */
  audit(event: CallEvent): Promise<void>;
  /** The per-token call limits (`rateLimit`, `maxConcurrent`, default `hub.rateLimit`): one budget per token. */
  limiter?:
    | { acquire(principal: TokenPrincipal, defaultPerMinute: number): (() => void) | Promise<() => void> }
    | undefined;
}

/** What is a surface's own in how the gate answers. */
export interface SurfaceProfile {
  surface: SurfaceName;
  /** The refusal an agent reads; `undefined` leaves the error to the protocol layer. Default: `errorResult` for result errors. */
  refusal?(error: GatehouseError): CallToolResult | undefined;
  /** Whether `gatehouse__approval_status` takes `{"args": {...}}` (the admin surface's contract, like every admin tool). */
  wrappedArgs?: boolean;
  /** Whether allowed calls reach an upstream server (their duration is observed per server). */
  upstream?: boolean;
}

export const APPROVAL_STATUS_TOOL = `${GATEHOUSE_PREFIX}approval_status`;

/**
 * An approved call's execution on a surface whose calls do not reach an upstream (admin, memory; the hub
 * has its own rounds, `runAuditedRound`): runs it and writes its call event — verdict `gated`, the
 * approval's id, the outcome — before the result is stored. It runs inside the approval queue's
 * `gatehouse.approval.execute` span, which continues the trace of the call that waited (tracing on), so
 * the row carries that call's trace id: the call that asked and its execution are found by one trace id.
 */
export async function auditedExecution<T>(
  audit: GatePorts['audit'],
  surface: SurfaceName,
  approval: ApprovalView,
  run: () => Promise<T>,
): Promise<T> {
  const started = performance.now();
  const traceId = activeTraceId();
  const record = (outcome: CallOutcome, result?: unknown) =>
    audit({
      client: approval.requester,
      surface,
      serverId: approval.serverId,
      tool: approval.tool,
      verdict: 'gated',
      approvalId: approval.id,
      outcome,
      latencyMs: Math.round(performance.now() - started),
      arguments: approval.arguments,
      upstream: false,
      ...(result !== undefined ? { result } : {}),
      ...(traceId ? { traceId } : {}),
    });
  let value: T;
  try {
    value = await run();
  } catch (error) {
    await record(findGatehouseError(error)?.code ?? 'internal_error');
    throw error;
  }
  await record('ok', value);
  return value;
}

const APPROVAL_STATUS_ARGS = {
  type: 'object',
  properties: {
    approval_id: { type: 'string', description: 'The approval_id a pending_approval result gave.' },
    wait_s: { type: 'number', minimum: 0, maximum: 30, description: 'Seconds to wait for a decision (default 0).' },
  },
  required: ['approval_id'],
  additionalProperties: false,
};

/** `gatehouse__approval_status` as a surface lists it: plain arguments, or wrapped in `{"args": {...}}`. */
export function approvalStatusTool(wrapped = false): Tool {
  return {
    name: APPROVAL_STATUS_TOOL,
    title: 'Approval status',
    description:
      'The outcome of a call that needed an operator’s approval: pending, rejected (with reason), expired, ' +
      'out_of_scope, or the stored result. Pass wait_s (up to 30) to wait for a decision.' +
      (wrapped ? ' Arguments go in {"args": {...}}, like every admin tool.' : ''),
    inputSchema: (wrapped
      ? { type: 'object', properties: { args: APPROVAL_STATUS_ARGS }, required: ['args'], additionalProperties: false }
      : APPROVAL_STATUS_ARGS) as Tool['inputSchema'],
    annotations: { readOnlyHint: true, openWorldHint: false },
  };
}

/** The refusal an agent reads when a tool's verdict stops the call. */
function verdictRefusal(name: string, verdict: 'blocked' | 'quarantined', reason: string | undefined): GatehouseError {
  return verdict === 'blocked'
    ? new GatehouseError('tool.blocked', `The tool ${name} is blocked by policy.`)
    : new GatehouseError(
        'tool.quarantined',
        `The tool ${name} changed since it was approved (or is new) and waits for review.`,
        { reason: reason ?? 'new' },
      );
}

function pendingAnswer(approvalId: string, message: string): CallToolResult {
  return pendingApprovalResult(
    approvalId,
    `${message} Poll ${APPROVAL_STATUS_TOOL} with this approval_id for the outcome.`,
  );
}

/** The task id of a gated call: its approval's, marked as Gatehouse's own (`gatehouse` is no server's id). */
export function approvalTaskId(approvalId: string): string {
  return `${GATEHOUSE_PREFIX}${approvalId}`;
}

/** The approval behind a task id the hub minted, or undefined for any other id. */
export function approvalIdOfTask(taskId: string): string | undefined {
  return taskId.startsWith(GATEHOUSE_PREFIX) ? taskId.slice(GATEHOUSE_PREFIX.length) : undefined;
}

/** The JSON-RPC error code of a gated task that ended without running (implementation-defined server error). */
const APPROVAL_REFUSED_CODE = -32000;

/** A gated call as a task (SEP-2663), from its approval as its requester reads it. */
export function approvalTask(view: ApprovalView): DetailedTask {
  const task: TaskFields = {
    taskId: approvalTaskId(view.id),
    status: 'working',
    createdAt: view.createdAt,
    lastUpdatedAt: view.executedAt ?? view.decidedAt ?? view.createdAt,
    // The approval record is kept: the task stays readable as long as it is.
    ttlMs: null,
    pollIntervalMs: TASK_POLL_INTERVAL_MS,
  };
  const refused = (what: string): DetailedTask => ({
    ...task,
    status: 'failed',
    statusMessage: what,
    error: {
      code: APPROVAL_REFUSED_CODE,
      message: what,
      data: { status: view.status, approval_id: view.id, ...(view.reason ? { reason: view.reason } : {}) },
    },
  });
  switch (view.status) {
    case 'pending':
      return { ...task, statusMessage: `Waiting for an operator's approval (approval ${view.id}).` };
    case 'approved':
    case 'executing':
      return { ...task, statusMessage: 'Approved; the call is running.' };
    case 'executed': {
      const stored = view.result as Record<string, unknown> | null | undefined;
      // The approved call asked for the agent's input: the task waits for it (`tasks/update` answers it).
      if (stored?.resultType === 'input_required' && stored.inputRequests && typeof stored.inputRequests === 'object') {
        return {
          ...task,
          status: 'input_required',
          statusMessage: 'The approved call asks for your input.',
          inputRequests: stored.inputRequests as Record<string, unknown>,
        };
      }
      if (!stored || typeof stored !== 'object' || !Array.isArray(stored.content)) {
        return refused('The approved call ended without a tool result.');
      }
      return { ...task, status: 'completed', result: stored as CallToolResult };
    }
    case 'failed':
      return {
        ...task,
        status: 'failed',
        statusMessage: view.error?.message ?? 'The approved call failed.',
        error: {
          code: -32603,
          message: view.error?.message ?? 'The approved call failed.',
          data: { status: 'failed', approval_id: view.id, ...(view.error ? { code: view.error.code } : {}) },
        },
      };
    case 'rejected':
      return refused(`An operator rejected the call${view.reason ? `: ${view.reason}` : '.'}`);
    case 'expired':
      return refused(`No operator decided in time: the approval expired at ${view.expiresAt}.`);
    case 'out_of_scope':
      return refused(`The call no longer matches what was approved${view.reason ? `: ${view.reason}` : '.'}`);
    case 'cancelled':
      return { ...task, status: 'cancelled', ...(view.reason ? { statusMessage: view.reason } : {}) };
  }
}

export class Gate {
  private readonly surface: SurfaceName;
  private readonly refuse: (error: GatehouseError) => CallToolResult | undefined;
  readonly statusTool: Tool;

  constructor(
    private readonly ports: GatePorts,
    private readonly profile: SurfaceProfile,
  ) {
    this.surface = profile.surface;
    this.refuse = profile.refusal ?? ((error) => (isResultError(error) ? errorResult(error) : undefined));
    this.statusTool = approvalStatusTool(profile.wrappedArgs);
  }

  /** One call, start to end; exactly one audit event whatever happens. Traced as one span (tracing on). */
  call(call: SurfaceCall): Promise<GateAnswer> {
    return inSpan(
      `tools/call ${call.name}`,
      'server',
      {
        'mcp.method.name': 'tools/call',
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': call.name,
        'gatehouse.surface': this.surface,
        'gatehouse.client.id': call.principal.id,
      },
      (span) =>
        this.callTraced(call, (verdict, outcome) => {
          span?.setAttribute('gatehouse.verdict', verdict);
          span?.setAttribute('gatehouse.outcome', outcome);
        }),
    );
  }

  private async callTraced(
    call: SurfaceCall,
    traceOutcome: (verdict: CallVerdict, outcome: CallOutcome) => void,
  ): Promise<GateAnswer> {
    const started = performance.now();
    const settings = await this.ports.settings.current();
    const resolution = call.resolve(settings);
    const traceId = activeTraceId();
    let argumentFacts: ArgumentFacts | undefined;
    const audit = (
      verdict: CallVerdict,
      outcome: CallOutcome,
      extra: { result?: unknown; approvalId?: string } = {},
    ) => {
      traceOutcome(verdict, outcome);
      return this.ports.audit({
        client: call.principal,
        surface: this.surface,
        serverId: resolution.serverId,
        tool: 'tool' in resolution ? resolution.tool : call.name,
        verdict,
        outcome,
        latencyMs: Math.round(performance.now() - started),
        arguments: call.auditedArguments ?? call.arguments,
        argumentFacts,
        upstream: verdict === 'allow' && this.profile.upstream === true,
        ...(extra.result !== undefined ? { result: extra.result } : {}),
        ...(extra.approvalId ? { approvalId: extra.approvalId } : {}),
        ...(call.via ? { via: call.via } : {}),
        ...(call.asks?.length ? { asks: [...call.asks] } : {}),
        ...(traceId ? { traceId } : {}),
        payloads: settings['audit.payloads'],
      });
    };

    if (!('tool' in resolution)) {
      await audit(resolution.verdict, 'unknown_tool');
      throw unknownTool(call.name);
    }
    const { verdict } = resolution;
    if (verdict === 'blocked' || verdict === 'quarantined') {
      const error = verdictRefusal(call.name, verdict, resolution.reason);
      await audit(verdict, error.code);
      return this.refusal(error);
    }

    let release: (() => void) | undefined;
    try {
      if (this.ports.limiter) {
        // Local budgets answer at once; a fleet budget may first lease quota from the store.
        const acquired = this.ports.limiter.acquire(call.principal as TokenPrincipal, settings['hub.rateLimit']);
        release = typeof acquired === 'function' ? acquired : await acquired;
      }
      await call.check?.();
      if (verdict === 'gated') {
        const card = await call.approval?.();
        if (!card) throw new GatehouseError('internal_error', `${call.name} is gated but has no approval card.`);
        return await this.queue(call, resolution, card, `${call.name} needs an operator's approval.`, audit);
      }
      if (this.profile.upstream) {
        // The row's facts about the arguments are computed while the upstream works on the call (at low load
        // that time is idle): the answer then waits only for the row's append.
        argumentFacts = new ArgumentFacts(call.auditedArguments ?? call.arguments);
        argumentFacts.warmSoon();
      }
      const ran = await call.run();
      if ('approval' in ran) return await this.queue(call, resolution, ran.approval, ran.message, audit);
      await audit('allow', ran.outcome, { result: ran.audited ?? ran.answer });
      return ran.answer;
    } catch (error) {
      const known = findGatehouseError(error);
      if (!known) {
        await audit(verdict, 'internal_error');
        throw error;
      }
      await audit(verdict, known.code);
      const refusal = this.refuse(known);
      if (refusal) return refusal;
      throw error;
    } finally {
      release?.();
    }
  }

  /** `gatehouse__approval_status`: the outcome for the token that asked, read by `read` (default: the queue's answer). */
  async approvalStatus(
    principal: Principal,
    rawArgs: unknown,
    read?: (approvalId: string, waitS: number) => Promise<GateAnswer>,
  ): Promise<GateAnswer> {
    try {
      const { approvalId, waitS } = this.statusArgs(rawArgs);
      if (read) return await read(approvalId, waitS);
      return jsonToolResult({ ...(await this.ports.approvals.status(approvalId, principal, waitS)) });
    } catch (error) {
      const known = findGatehouseError(error);
      // Reading an approval is always answered as a result the agent reads, never a protocol error.
      if (known) return this.refuse(known) ?? errorResult(known);
      throw error;
    }
  }

  /**
   * A gated call's task (`tasks/get`) for the token that asked it, or undefined when the id is not one
   * of the gate's or the approval is not this token's (which reads exactly like a task that does not exist).
   */
  async task(principal: Principal, taskId: string): Promise<DetailedTask | undefined> {
    const approvalId = approvalIdOfTask(taskId);
    if (!approvalId) return undefined;
    try {
      // The requester check (and a pending approval past its expiry ends `expired`), then the record.
      await this.ports.approvals.status(approvalId, principal, 0);
      return approvalTask(await this.ports.approvals.get(approvalId));
    } catch (error) {
      if (findGatehouseError(error)?.code === 'approval.not_found') return undefined;
      throw error;
    }
  }

  /**
   * `tasks/cancel` of a gated call's task: a call still waiting for (or not yet started after) its approval
   * is withdrawn and its task ends `cancelled`; one that runs or ended stays as it is (the ack is the same).
   * False when the task is not this token's.
   */
  async cancelTask(principal: Principal, taskId: string): Promise<boolean> {
    const approvalId = approvalIdOfTask(taskId);
    if (!approvalId) return false;
    try {
      await this.ports.approvals.withdraw(approvalId, principal, 'Withdrawn by the requester (tasks/cancel).');
      return true;
    } catch (error) {
      if (findGatehouseError(error)?.code === 'approval.not_found') return false;
      throw error;
    }
  }

  /** A refusal in this surface's shape; errors the surface leaves to the protocol are thrown. */
  refusal(error: GatehouseError): CallToolResult {
    const answer = this.refuse(error);
    if (!answer) throw error;
    return answer;
  }

  private statusArgs(rawArgs: unknown): { approvalId: string; waitS: number } {
    const outer = (rawArgs ?? {}) as Record<string, unknown>;
    const args = (this.profile.wrappedArgs ? outer.args : outer) as
      | { approval_id?: unknown; wait_s?: unknown }
      | undefined;
    if (!args || typeof args !== 'object' || Array.isArray(args)) {
      throw new GatehouseError('tool.invalid_arguments', `${APPROVAL_STATUS_TOOL} takes {"args": {"approval_id": …}}.`);
    }
    const id = args.approval_id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 128) {
      throw new GatehouseError('tool.invalid_arguments', 'approval_id must be a string.');
    }
    const wait = args.wait_s;
    const waitS = typeof wait === 'number' && Number.isFinite(wait) ? Math.min(Math.max(wait, 0), 30) : 0;
    return { approvalId: id, waitS };
  }

  private async queue(
    call: SurfaceCall,
    resolution: Extract<Resolution, { tool: string }>,
    card: ApprovalCard,
    message: string,
    audit: (verdict: CallVerdict, outcome: CallOutcome, extra?: { approvalId?: string }) => Promise<void>,
  ): Promise<CallToolResult> {
    const approval = await inSpan('gatehouse.approval.create', 'internal', { 'gen_ai.tool.name': call.name }, () =>
      this.ports.approvals.create({
        surface: this.surface,
        requester: call.principal,
        serverId: resolution.serverId,
        tool: resolution.tool,
        exposedName: card.exposedName ?? call.name,
        arguments: card.arguments,
        shownArguments: card.shownArguments,
        pinHash: card.pinHash,
        policyVersion: card.policyVersion,
        detail: call.via ? { ...card.detail, via: call.via } : card.detail,
      }),
    );
    await audit('gated', 'pending_approval', { approvalId: approval.id });
    if (call.asTask) {
      const { result: _none, error: _neither, ...task } = approvalTask(approval);
      return createTaskResult({ ...task, statusMessage: `${message} Waiting for an operator's decision.` });
    }
    return pendingAnswer(approval.id, message);
  }
}
