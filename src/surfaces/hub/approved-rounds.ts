/**
 * `gatehouse__approval_status`, and the later rounds of an approved call. An approved call runs
 * in the background; when its upstream asks for input (2026-07-28 `input_required`), that request
 * is the stored result, and the agent reading it gets it as an `input_required` result of
 * approval_status itself. The agent's client answers by retrying approval_status with its
 * answers, and the round is relayed to the upstream under the approval already given: no new
 * approval, but the same re-check (tool pin, policy) an approved call gets before it runs.
 * 2025-era agents get the same through the SDK's legacy shim (real server-to-client requests).
 */
import type { CallToolResult, InputRequiredResult, ServerContext } from '@modelcontextprotocol/server';
import type { ApprovalQueue, RecheckOutcome } from '../../approvals/queue.js';
import type { ApprovalView } from '../../approvals/types.js';
import type { CallEvent } from '../../audit/calls.js';
import { GatehouseError } from '../../errors.js';
import type { TokenPrincipal } from '../../identity/index.js';
import { activeTraceId, inResumedSpan, tracingEnabled } from '../../telemetry/tracing.js';
import type { Continuation } from '../../upstream/index.js';
import { jsonToolResult } from '../results.js';
import { continuationOf, inputRequiredResult, needsInput, type UpstreamOutcome, verifiedState } from './calls.js';
import { type HubStateCodec, stateBinding, stateMatches } from './request-state.js';

/** How an approved call that asked for input is stored: the MCP wire shape, readable in the approval record. */
interface StoredInputRequired {
  resultType: 'input_required';
  inputRequests: Record<string, unknown>;
  requestState?: string;
}

export function storedOutcome(outcome: UpstreamOutcome): unknown {
  if (!needsInput(outcome)) return outcome;
  const { inputRequests, requestState } = outcome.inputRequired;
  return {
    resultType: 'input_required',
    inputRequests,
    ...(requestState !== undefined ? { requestState } : {}),
  } satisfies StoredInputRequired;
}

/**
 * Runs one round of an approved call on its upstream and writes that round's call event (verdict
 * `gated`, the approval's id, the outcome): the first round, run in the background once an operator
 * approved, and each later one carrying the agent's answers (whose request is those answers, not
 * the arguments: `requestBytes` says so).
 */
export async function runAuditedRound(
  audit: (record: CallEvent) => Promise<void>,
  approval: ApprovalView,
  client: CallEvent['client'],
  run: () => Promise<UpstreamOutcome>,
  sizes: { requestBytes?: number } = {},
): Promise<UpstreamOutcome> {
  const started = performance.now();
  // The approved execution's span (tracing on) is in the trace of the call that waited: both rows lead to it.
  const traceId = activeTraceId();
  const record = (outcome: CallEvent['outcome'], result?: unknown) =>
    audit({
      client,
      surface: 'hub',
      serverId: approval.serverId,
      tool: approval.tool,
      verdict: 'gated',
      approvalId: approval.id,
      outcome,
      latencyMs: Math.round(performance.now() - started),
      ...sizes,
      arguments: approval.arguments,
      result,
      ...(traceId ? { traceId } : {}),
    });
  let outcome: UpstreamOutcome;
  try {
    outcome = await run();
  } catch (error) {
    await record(error instanceof GatehouseError ? error.code : 'internal_error');
    throw error;
  }
  if (needsInput(outcome)) await record('input_required', storedOutcome(outcome));
  else await record(outcome.isError ? 'tool_error' : 'ok', outcome);
  return outcome;
}

function isStoredInputRequired(value: unknown): value is StoredInputRequired {
  return (
    value !== null &&
    typeof value === 'object' &&
    (value as { resultType?: unknown }).resultType === 'input_required' &&
    typeof (value as { inputRequests?: unknown }).inputRequests === 'object'
  );
}

export interface ApprovedRoundsDeps {
  approvals: Pick<ApprovalQueue, 'status' | 'get' | 'recordRound' | 'traceParent'>;
  stateCodec: HubStateCodec;
  /** The same re-check an approved call gets before it runs. */
  recheck(approval: ApprovalView): Promise<RecheckOutcome>;
  /** Runs one round of the approved call on its upstream. */
  run(
    approval: ApprovalView,
    continuation: Continuation | undefined,
    inputCapabilities: Record<string, unknown> | undefined,
    signal: AbortSignal,
  ): Promise<UpstreamOutcome>;
  /** Resolves once the round's audit row is committed: awaited before the round's answer leaves. */
  audit(record: CallEvent): Promise<void>;
}

export class ApprovedRounds {
  constructor(private readonly deps: ApprovedRoundsDeps) {}

  /** The outcome for the token that asked; a stored input request becomes an `input_required` result. */
  async status(
    principal: TokenPrincipal,
    approvalId: string,
    waitS: number,
    ctx: ServerContext,
    inputCapabilities?: Record<string, unknown>,
  ): Promise<CallToolResult | InputRequiredResult> {
    const state = verifiedState(ctx);
    if (state) return this.nextRound(principal, approvalId, ctx, inputCapabilities);
    const answer = await this.deps.approvals.status(approvalId, principal, waitS);
    if (answer.status === 'executed' && isStoredInputRequired(answer.result)) {
      const approval = await this.deps.approvals.get(approvalId);
      return this.askAgent(principal, approval, answer.result);
    }
    return jsonToolResult({ ...answer });
  }

  /**
   * `tasks/update` of a gated call's task whose approved call asked for input: the agent's answers go to the
   * upstream as the next round (the same re-check first, the round audited), and its outcome is stored for
   * the next `tasks/get`. A task that asks nothing (any more) ignores answers, as the extension says.
   */
  async taskRound(
    principal: TokenPrincipal,
    approvalId: string,
    inputResponses: unknown,
    inputCapabilities: Record<string, unknown> | undefined,
    signal: AbortSignal,
  ): Promise<void> {
    const approval = await this.deps.approvals.get(approvalId);
    if (approval.requester.id !== principal.id) {
      throw new GatehouseError('approval.not_found', `No approval ${approvalId} (for this token).`, { id: approvalId });
    }
    const stored = approval.result;
    if (approval.status !== 'executed' || !isStoredInputRequired(stored)) return;
    if (inputResponses === null || typeof inputResponses !== 'object' || Array.isArray(inputResponses)) {
      throw new GatehouseError('tool.invalid_arguments', 'inputResponses must be an object.');
    }
    const check = await this.deps.recheck(approval);
    if (!check.ok) throw new GatehouseError('approval.out_of_scope', check.reason, { reason: check.reason });
    const outcome = await runAuditedRound(
      this.deps.audit,
      approval,
      principal,
      () =>
        this.deps.run(
          approval,
          { inputResponses: inputResponses as Record<string, unknown>, requestState: stored.requestState },
          inputCapabilities,
          signal,
        ),
      { requestBytes: 0 },
    );
    await this.deps.approvals.recordRound(approval.id, stored, storedOutcome(outcome));
  }

  private async askAgent(
    principal: TokenPrincipal,
    approval: ApprovalView,
    stored: StoredInputRequired,
  ): Promise<InputRequiredResult> {
    const minted = await this.deps.stateCodec.mint({
      ...stateBinding(principal.id, approval.serverId ?? '', approval.tool, approval.arguments),
      a: approval.id,
      ...(stored.requestState !== undefined ? { u: stored.requestState } : {}),
    });
    return inputRequiredResult(stored.inputRequests, minted);
  }

  private async nextRound(
    principal: TokenPrincipal,
    approvalId: string,
    ctx: ServerContext,
    inputCapabilities: Record<string, unknown> | undefined,
  ): Promise<CallToolResult | InputRequiredResult> {
    const state = verifiedState(ctx);
    const approval = await this.deps.approvals.get(approvalId).catch(() => undefined);
    // Another token's approval reads exactly like a missing one.
    if (!approval || approval.requester.id !== principal.id) {
      throw new GatehouseError('approval.not_found', `No approval ${approvalId} (for this token).`, { id: approvalId });
    }
    const binding = stateBinding(principal.id, approval.serverId ?? '', approval.tool, approval.arguments);
    if (!state || approval.status !== 'executed' || !stateMatches(state, binding, approval.id)) {
      throw new GatehouseError('hub.request_state_mismatch');
    }
    const check = await this.deps.recheck(approval);
    if (!check.ok) throw new GatehouseError('approval.out_of_scope', check.reason, { reason: check.reason });

    // Tracing on: a later round runs in the trace of the call that asked too (linked to the status call that
    // carried the answers), so its audit row has that call's trace id, like the first round's.
    const parent = tracingEnabled() ? await this.deps.approvals.traceParent(approval.id) : null;
    const outcome = await inResumedSpan(
      'gatehouse.approval.round',
      { 'gen_ai.tool.name': approval.exposedName, 'gatehouse.approval.id': approval.id, 'gatehouse.surface': 'hub' },
      parent,
      () =>
        runAuditedRound(
          this.deps.audit,
          approval,
          principal,
          () =>
            this.deps.run(
              approval,
              continuationOf(ctx.mcpReq.inputResponses, state),
              inputCapabilities,
              ctx.mcpReq.signal,
            ),
          { requestBytes: 0 },
        ),
    );
    const stored = storedOutcome(outcome);
    // Asking again returns the latest round's outcome, never a new upstream call.
    await this.deps.approvals.recordRound(approval.id, approval.result, stored);
    if (needsInput(outcome)) return this.askAgent(principal, approval, stored as StoredInputRequired);
    return jsonToolResult({ status: 'executed', approval_id: approval.id, result: outcome });
  }
}
