/**
 * `gatehouse__approval_status`, and the later rounds of an approved call. An approved call runs
 * in the background; when its upstream asks for input (2026-07-28 `input_required`), that request
 * is the stored result, and the agent reading it gets it as an `input_required` result of
 * approval_status itself. The agent's client answers by retrying approval_status with its
 * answers, and the round is relayed to the upstream under the approval already given: no new
 * approval, but the same re-check (tool pin, policy) an approved call gets before it runs.
 * 2025-era agents get the same through the SDK's legacy shim (real server-to-client requests).
 *
 * Each round is answered once. The state an agent gets names the stored round it answers (`r`), and the
 * round is claimed before its upstream call: a conditional update of the approval's stored result from that
 * very round to a "running" marker (`claimRound`), which one request wins across concurrent requests and
 * replicas. Another request with the same state, then or later, finds the round gone and is refused
 * (`hub.request_state_mismatch`); a `tasks/update` that loses is ignored, as answers to a task that asks
 * nothing are. Without it a 2026-07-28 upstream, which runs the tool again on every round it is sent, ran the
 * approved call once per replay of a state.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { CallToolResult, InputRequiredResult, ServerContext } from '@modelcontextprotocol/server';
import type { ApprovalQueue, RecheckOutcome } from '../../approvals/queue.js';
import type { ApprovalView } from '../../approvals/types.js';
import type { CallEvent } from '../../audit/calls.js';
import { findGatehouseError, GatehouseError } from '../../errors.js';
import type { TokenPrincipal } from '../../identity/index.js';
import { activeTraceId, inResumedSpan, tracingEnabled } from '../../telemetry/tracing.js';
import type { Continuation } from '../../upstream/index.js';
import { approvalIdOfTask } from '../gate.js';
import { type DetailedTask, jsonToolResult } from '../results.js';
import { continuationOf, inputRequiredResult, needsInput, type UpstreamOutcome, verifiedState } from './calls.js';
import { type HubStateCodec, stateBinding, stateMatches } from './request-state.js';

/** How an approved call that asked for input is stored: the MCP wire shape, readable in the approval record. */
interface StoredInputRequired {
  resultType: 'input_required';
  inputRequests: Record<string, unknown>;
  requestState?: string;
  /** This round's own id: two rounds that ask the same thing are still two rounds (a state answers one). */
  round?: string;
}

/** An outcome in the MCP wire shape (an input request as `resultType: input_required`), as audited. */
function wireOutcome(outcome: UpstreamOutcome): unknown {
  if (!needsInput(outcome)) return outcome;
  const { inputRequests, requestState } = outcome.inputRequired;
  return {
    resultType: 'input_required',
    inputRequests,
    ...(requestState !== undefined ? { requestState } : {}),
  } satisfies StoredInputRequired;
}

/** An outcome as the approval stores it: an input request gets a round id of its own. */
export function storedOutcome(outcome: UpstreamOutcome): unknown {
  const wire = wireOutcome(outcome);
  return needsInput(outcome) ? { ...(wire as StoredInputRequired), round: randomUUID() } : wire;
}

/**
 * A later round while its upstream call runs: stored in place of the input round it answers (the claim), so
 * no other request answers that round again. Readable in the approval record; the agent reads it as `pending`
 * (approval_status) or `working` (its task).
 */
interface StoredRoundRunning {
  gatehouse: 'round_running';
  /** This claim's own id: only the request that claimed the round records its outcome over it. */
  claim: string;
  startedAt: string;
}

function isRoundRunning(value: unknown): value is StoredRoundRunning {
  return (
    value !== null && typeof value === 'object' && (value as { gatehouse?: unknown }).gatehouse === 'round_running'
  );
}

/** The round a state answers: a hash of the stored input round, exactly as stored (its round id included). */
function roundOf(stored: StoredInputRequired): string {
  return createHash('sha256').update(JSON.stringify(stored), 'utf8').digest('base64url');
}

/**
 * What a round whose upstream call failed after its claim leaves as the approved call's outcome: the error,
 * as a tool error result, and not the input round again. The upstream may have acted on the answers before
 * the call failed (a timeout, a dropped connection, the agent cancelling), and offering the round again
 * would let the same answers (or others) run the approved call a second time: the approval covers one run,
 * so a failed round ends it and a new call (and approval) is the way on.
 */
function failedRound(error: unknown): CallToolResult {
  const known = findGatehouseError(error);
  const what = known ? `${known.code}: ${known.message}` : 'internal_error: The round failed unexpectedly.';
  return {
    content: [
      {
        type: 'text',
        text:
          `The approved call's round failed (${what}). Whether the upstream acted on the answers is unknown, ` +
          'so the round is not offered again: call the tool again (a new approval) to retry.',
      },
    ],
    isError: true,
  };
}

/**
 * How long past its upstream call's deadline a round may still read as running. Its replica records an outcome
 * well before then (the call ends at its deadline); a marker older than that was left by a replica that stopped
 * mid-round, and ends the call as failed. Generous: the marker's time is another replica's clock.
 */
const ROUND_LAPSE_GRACE_MS = 60_000;

/** The failure a lapsed round's marker is replaced with (never run again: whether it reached the tool is unknown). */
const ROUND_INTERRUPTED = new GatehouseError(
  'internal_error',
  'Gatehouse stopped while it ran this round of the approved call.',
);

/** How long approval_status waits between reads while a round runs (wait_s given). */
const ROUND_POLL_MS = 200;
/** The longest wait_s (as the queue's own). */
const MAX_WAIT_S = 30;

/** The refusal of a state whose round was answered already (or is not the approval's current one). */
function roundAnswered(): GatehouseError {
  return new GatehouseError(
    'hub.request_state_mismatch',
    'This requestState answers a round of the approved call that was already answered (or is no longer asked): ' +
      'call approval_status without requestState for its outcome.',
  );
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
  if (needsInput(outcome)) await record('input_required', wireOutcome(outcome));
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
  /** The deadline of a round's upstream call (the call timeout): a round running far past it has lapsed. */
  roundDeadlineMs: number;
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
    const until = Date.now() + Math.min(Math.max(Number.isFinite(waitS) ? waitS : 0, 0), MAX_WAIT_S) * 1000;
    let answer = await this.deps.approvals.status(approvalId, principal, waitS);
    if (answer.status === 'executed' && (await this.endLapsed(approvalId, answer.result))) {
      answer = await this.deps.approvals.status(approvalId, principal, 0);
    }
    // A round with the agent's answers runs (another request took it): waited for like a decision.
    while (
      answer.status === 'executed' &&
      isRoundRunning(answer.result) &&
      Date.now() < until &&
      !ctx.mcpReq.signal.aborted
    ) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(ROUND_POLL_MS, until - Date.now())));
      answer = await this.deps.approvals.status(approvalId, principal, 0);
    }
    if (answer.status === 'executed' && isRoundRunning(answer.result)) {
      return jsonToolResult({
        status: 'pending',
        approval_id: approvalId,
        detail: 'The approved call is running a round with your answers: ask again for its outcome.',
      });
    }
    if (answer.status === 'executed' && isStoredInputRequired(answer.result)) {
      const approval = await this.deps.approvals.get(approvalId);
      return this.askAgent(principal, approval, answer.result);
    }
    return jsonToolResult({ ...answer });
  }

  /**
   * `tasks/get` of a gated call's task (the gate's answer): `working` while a round with the agent's answers
   * runs, where the gate, which knows no rounds, reads the claimed round as a call that ended without a result.
   */
  async task(task: DetailedTask | undefined): Promise<DetailedTask | undefined> {
    if (task?.status !== 'failed' || (task.error?.data as { status?: unknown } | undefined)?.status !== 'executed') {
      return task;
    }
    const approvalId = approvalIdOfTask(task.taskId);
    const approval = approvalId ? await this.deps.approvals.get(approvalId) : undefined;
    if (approval?.status !== 'executed' || !isRoundRunning(approval.result)) return task;
    // Its replica stopped mid-round: the task failed, as the gate read it.
    if (await this.endLapsed(approval.id, approval.result)) return task;
    const { error: _error, ...fields } = task;
    return { ...fields, status: 'working', statusMessage: 'The approved call is running a round with your answers.' };
  }

  /**
   * `tasks/update` of a gated call's task whose approved call asked for input: the agent's answers go to the
   * upstream as the next round (the same re-check first, the round audited), and its outcome is stored for
   * the next `tasks/get`. A task that asks nothing (any more) ignores answers, as the extension says: so does
   * one whose round another `tasks/update` claimed first.
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
    const claim = await this.claimRound(approval.id, stored);
    if (!claim) return;
    let outcome: UpstreamOutcome;
    try {
      outcome = await runAuditedRound(
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
    } catch (error) {
      await this.failRound(approval.id, claim, error);
      throw error;
    }
    await this.deps.approvals.recordRound(approval.id, claim, storedOutcome(outcome));
  }

  private async askAgent(
    principal: TokenPrincipal,
    approval: ApprovalView,
    stored: StoredInputRequired,
  ): Promise<InputRequiredResult> {
    const minted = await this.deps.stateCodec.mint({
      ...stateBinding(principal.id, approval.serverId ?? '', approval.tool, approval.arguments),
      a: approval.id,
      r: roundOf(stored),
      ...(stored.requestState !== undefined ? { u: stored.requestState } : {}),
    });
    return inputRequiredResult(stored.inputRequests, minted);
  }

  /**
   * Claims the stored input round `stored` for one request: the approval's result goes from that round to a
   * running marker, in one conditional update (`recordRound`: only over the very value read), so of the
   * requests (on any replica) answering the same round exactly one wins. The marker, or undefined when the
   * round was already claimed (or answered).
   */
  private async claimRound(id: string, stored: StoredInputRequired): Promise<StoredRoundRunning | undefined> {
    const claim: StoredRoundRunning = {
      gatehouse: 'round_running',
      claim: randomUUID(),
      startedAt: new Date().toISOString(),
    };
    return (await this.deps.approvals.recordRound(id, stored, claim)) ? claim : undefined;
  }

  /**
   * Ends a round whose running marker outlived its upstream call's deadline by the grace (its replica stopped
   * mid-round): the call's outcome becomes the interruption, as a failed round's. True when `stored` was such a
   * marker and is no longer stored (this request or another ended it).
   */
  private async endLapsed(id: string, stored: unknown): Promise<boolean> {
    if (!isRoundRunning(stored)) return false;
    const started = Date.parse(stored.startedAt);
    if (!(Date.now() - started > this.deps.roundDeadlineMs + ROUND_LAPSE_GRACE_MS)) return false;
    await this.failRound(id, stored, ROUND_INTERRUPTED);
    return true;
  }

  /** A claimed round whose upstream call failed: its outcome is the error (`failedRound` says why not the round). */
  private async failRound(id: string, claim: StoredRoundRunning, error: unknown): Promise<void> {
    // The agent gets the round's own error either way; a store that fails here leaves the marker (pending).
    await this.deps.approvals.recordRound(id, claim, failedRound(error)).catch(() => false);
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
    // The state answers the round it was minted for, and only while that round is the one stored: not a round
    // that ran (or runs), nor an earlier one of the same call.
    const stored = approval.result;
    if (!isStoredInputRequired(stored) || state.r !== roundOf(stored) || state.u !== stored.requestState) {
      throw roundAnswered();
    }
    const check = await this.deps.recheck(approval);
    if (!check.ok) throw new GatehouseError('approval.out_of_scope', check.reason, { reason: check.reason });
    // One request runs the round; any other with the same state (concurrent, or later) is refused.
    const claim = await this.claimRound(approval.id, stored);
    if (!claim) throw roundAnswered();

    // Tracing on: a later round runs in the trace of the call that asked too (linked to the status call that
    // carried the answers), so its audit row has that call's trace id, like the first round's.
    const parent = tracingEnabled() ? await this.deps.approvals.traceParent(approval.id) : null;
    let outcome: UpstreamOutcome;
    try {
      outcome = await inResumedSpan(
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
    } catch (error) {
      await this.failRound(approval.id, claim, error);
      throw error;
    }
    const next = storedOutcome(outcome);
    // Asking again returns the latest round's outcome, never a new upstream call.
    await this.deps.approvals.recordRound(approval.id, claim, next);
    if (needsInput(outcome)) return this.askAgent(principal, approval, next as StoredInputRequired);
    return jsonToolResult({ status: 'executed', approval_id: approval.id, result: outcome });
  }
}
