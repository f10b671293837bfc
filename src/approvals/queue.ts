/**
 * The approval queue: a gated call becomes a record, an operator decides, and an
 * approved call runs at most once, in the background, on whichever process wins.
 *
 * Every state change is one conditional `UPDATE … WHERE status = <expected>` whose
 * row count decides the winner, so racing decisions (in one process or across
 * replicas) have exactly one winner, and an approved call is claimed
 * (`approved → executing`) by exactly one process. A claimed call holds a lease
 * (`executed_at`, refreshed while it runs); a claim whose lease lapsed belongs to a
 * dead process and ends `failed` — never re-run.
 */
import { randomBytes } from 'node:crypto';
import type { AuditLog } from '../audit/log.js';
import type { EventHub, StreamEvent } from '../audit/stream.js';
import { GatehouseError, isGatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import type { Logger } from '../logging.js';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';
import type { Store } from '../store/db.js';
import { parseJson } from '../store/json.js';
import type { ApprovalTable } from '../store/schema.js';
import { activeTraceparent, inResumedSpan } from '../telemetry/tracing.js';
import { grantPersonToken, principalActive } from './principals.js';
import {
  type ApprovalDetail,
  type ApprovalError,
  type ApprovalRow,
  type ApprovalStatus,
  type ApprovalStatusAnswer,
  type ApprovalSurface,
  type ApprovalView,
  argumentsHash,
  FINAL_STATUSES,
  toApprovalView,
} from './types.js';

export type RecheckOutcome = { ok: true } | { ok: false; reason: string };

/** How one surface runs its approved calls. Registered once per process, for every process that serves it. */
export interface ApprovalExecutor {
  /** Checks again, right before running, that the call is still what was approved (tool, pin, policy, arguments). */
  recheck(approval: ApprovalView): Promise<RecheckOutcome>;
  /** Runs the call; what it returns is stored and handed to the agent (JSON). Throw a GatehouseError to fail it. */
  execute(approval: ApprovalView, signal: AbortSignal): Promise<unknown>;
}

export interface NewApproval {
  surface: ApprovalSurface;
  requester: Principal;
  serverId: string | null;
  tool: string;
  exposedName: string;
  /** Exactly what will be sent; must be a JSON object. */
  arguments: Record<string, unknown>;
  /**
   * When the arguments carry secrets (an admin call installing a server with its bearer token): what every
   * reader sees instead, secret values masked. The literal arguments are then kept sealed and opened only to
   * run the approved call.
   */
  shownArguments?: Record<string, unknown> | undefined;
  pinHash: string | null;
  policyVersion: number | null;
  detail: ApprovalDetail;
  ttlMs?: number | undefined;
}

export interface ApprovalQueueOptions {
  store: Store;
  /** Seals the literal arguments of an approval that shows them masked (`shownArguments`). */
  sealKey?: SealKey | undefined;
  audit: AuditLog;
  events: EventHub;
  logger?: Logger | undefined;
  /** How long an approval waits for a decision (default 15 minutes). */
  defaultTtlMs?: number;
  /** How often `start()`'s sweep runs (default 2 s). */
  sweepMs?: number;
  /** A running call refreshes its claim this often …  */
  heartbeatMs?: number;
  /** … and a claim not refreshed for this long belongs to a dead process (default 30 s). */
  leaseMs?: number;
  /** An `approved` row nobody claimed for this long is picked up by the sweep (default 10 s). */
  orphanGraceMs?: number;
  /** The status long-poll re-reads the store this often besides waking on events (default 250 ms). */
  pollMs?: number;
  /** `close()` lets running calls finish this long before aborting them (default 5 s). */
  closeGraceMs?: number;
}

export const DEFAULT_APPROVAL_TTL_MS = 15 * 60_000;
export const MAX_APPROVAL_TTL_MS = 7 * 24 * 60 * 60_000;
export const MAX_WAIT_S = 30;
const MAX_DESCRIPTION = 8000;

const DECIDERS: ReadonlySet<string> = new Set(['admin', 'operator']);

const INTERRUPTED: ApprovalError = {
  code: 'internal_error',
  message:
    'Gatehouse stopped while this approved call was running; it may or may not have reached the tool, and it is never run again.',
};

const REQUESTER_INACTIVE = 'The token that asked for this call was revoked before it ran.';

/** Binds sealed arguments to their approval: a sealed value copied onto another row does not open. */
const sealedArgumentsAad = (id: string) => aadFor(['approval-arguments', id]);

const newApprovalId = (): string => `apr_${randomBytes(12).toString('base64url')}`;
const iso = (ms: number): string => new Date(ms).toISOString();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

interface Running {
  controller: AbortController;
  promise: Promise<void>;
}

export class ApprovalQueue {
  private readonly store: Store;
  private readonly sealKey: SealKey | undefined;
  private readonly audit: AuditLog;
  private readonly events: EventHub;
  private readonly logger: Logger | undefined;
  private readonly defaultTtlMs: number;
  private readonly sweepMs: number;
  private readonly heartbeatMs: number;
  private readonly leaseMs: number;
  private readonly orphanGraceMs: number;
  private readonly pollMs: number;
  private readonly closeGraceMs: number;

  private readonly executors = new Map<ApprovalSurface, ApprovalExecutor>();
  private readonly running = new Map<string, Running>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly unsubscribe: () => void;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** False once draining: no new claims. */
  private claiming = true;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private closed = false;

  constructor(options: ApprovalQueueOptions) {
    this.store = options.store;
    this.sealKey = options.sealKey;
    this.audit = options.audit;
    this.events = options.events;
    this.logger = options.logger;
    this.defaultTtlMs = options.defaultTtlMs ?? DEFAULT_APPROVAL_TTL_MS;
    this.sweepMs = options.sweepMs ?? 2000;
    this.leaseMs = options.leaseMs ?? 30_000;
    this.heartbeatMs = options.heartbeatMs ?? Math.max(10, Math.floor(this.leaseMs / 3));
    this.orphanGraceMs = options.orphanGraceMs ?? 10_000;
    this.pollMs = options.pollMs ?? 250;
    this.closeGraceMs = options.closeGraceMs ?? 5000;
    // Decisions and outcomes from any process wake the long-polls waiting here.
    this.unsubscribe = this.events.subscribe((event: StreamEvent) => {
      if (event.type.startsWith('approval.') && typeof event.data.id === 'string') this.wake(event.data.id);
    });
  }

  registerExecutor(surface: ApprovalSurface, executor: ApprovalExecutor): void {
    this.executors.set(surface, executor);
  }

  /** Picks up what a previous run left behind, then sweeps every few seconds until `close()`. */
  async start(): Promise<{ resumed: number; failed: number; expired: number }> {
    const outcome = await this.resume();
    this.sweepTimer ??= setInterval(() => void this.sweep(), this.sweepMs);
    this.sweepTimer.unref();
    return outcome;
  }

  /**
   * After a restart: claims lapsed on `executing` rows end `failed` (at most once: never re-run),
   * due `pending` rows expire, and `approved` rows nobody is running are executed now.
   */
  async resume(): Promise<{ resumed: number; failed: number; expired: number }> {
    const failed = await this.failLapsedClaims();
    const expired = (await this.expireDue()).length;
    const approved = await this.store.db
      .selectFrom('approvals')
      .select('id')
      .where('status', '=', 'approved')
      .orderBy('decided_at')
      .execute();
    let resumed = 0;
    for (const { id } of approved) if (this.launch(id)) resumed++;
    return { resumed, failed, expired };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
    this.unsubscribe();
    for (const id of [...this.waiters.keys()]) this.wake(id);
    await this.sweeping;
    const runs = [...this.running.values()];
    if (runs.length > 0) {
      const settled = Promise.allSettled(runs.map((r) => r.promise));
      const graceOver = await Promise.race([settled.then(() => false), sleep(this.closeGraceMs).then(() => true)]);
      if (graceOver) for (const run of runs) run.controller.abort(new Error('Gatehouse is shutting down.'));
      await settled;
    }
    this.stopHeartbeat();
  }

  /** Resolves when every call this process started has finished (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()].map((r) => r.promise));
  }

  async create(input: NewApproval): Promise<ApprovalView> {
    const ttlMs = input.ttlMs ?? this.defaultTtlMs;
    if (!Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_APPROVAL_TTL_MS) {
      throw new GatehouseError('validation_error', `ttlMs must be an integer from 1 to ${MAX_APPROVAL_TTL_MS}.`);
    }
    const args = input.arguments;
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      throw new GatehouseError('validation_error', 'The arguments of an approval must be a JSON object.');
    }
    const text = JSON.stringify(args);
    const shown = input.shownArguments;
    if (shown && !this.sealKey) {
      throw new GatehouseError('internal_error', 'Approvals carrying secrets need the sealing key.');
    }
    const id = newApprovalId();
    const now = Date.now();
    const detail: ApprovalDetail = { ...input.detail };
    if (typeof detail.description === 'string' && detail.description.length > MAX_DESCRIPTION) {
      detail.description = `${detail.description.slice(0, MAX_DESCRIPTION)}…`;
    }
    const row: ApprovalTable = {
      id,
      surface: input.surface,
      status: 'pending',
      requester_id: input.requester.id,
      requester_name: input.requester.name,
      requester_user_id: input.requester.user?.id ?? null,
      requester_user_name: input.requester.user?.name ?? null,
      decided_by_user_id: null,
      server_id: input.serverId,
      tool: input.tool,
      exposed_name: input.exposedName,
      // Stored as parsed back: what the operator sees is byte for byte what runs (secret values aside, which
      // are shown masked and kept sealed, bound to this approval).
      arguments: shown ? JSON.stringify(shown) : text,
      sealed_arguments: shown && this.sealKey ? seal(this.sealKey, text, sealedArgumentsAad(id)) : null,
      args_hash: argumentsHash(JSON.parse(text)),
      pin_hash: input.pinHash,
      policy_version: input.policyVersion,
      detail: JSON.stringify(detail),
      created_at: iso(now),
      expires_at: iso(now + ttlMs),
      decided_at: null,
      decided_by: null,
      reason: null,
      executed_at: null,
      result: null,
      error: null,
      // Tracing on: the approved execution, whichever replica runs it, continues this call's trace.
      trace_parent: activeTraceparent() ?? null,
    };
    await this.store.db.transaction().execute(async (trx) => {
      await trx.insertInto('approvals').values(row).execute();
      await this.audit.recordAdmin(
        {
          action: 'approval.create',
          actor: input.requester,
          serverId: input.serverId ?? undefined,
          tool: input.tool,
          data: { approvalId: row.id, surface: row.surface },
        },
        trx,
      );
    });
    await this.events.publish('approval.created', {
      id: row.id,
      surface: row.surface,
      server: row.server_id,
      tool: row.tool,
      exposedName: row.exposed_name,
      requester: { id: row.requester_id, name: row.requester_name },
      expiresAt: row.expires_at,
    });
    return toApprovalView(row, true);
  }

  async get(id: string): Promise<ApprovalView> {
    const row = await this.readRow(id);
    if (!row) throw notFound(id);
    return toApprovalView(row, true);
  }

  async list(query: {
    status?: ApprovalStatus | undefined;
    limit: number;
    offset: number;
  }): Promise<{ approvals: ApprovalView[]; total: number }> {
    let rows = this.store.db
      .selectFrom('approvals')
      .leftJoin('tokens', 'tokens.id', 'approvals.decided_by')
      .leftJoin('users', 'users.id', 'approvals.decided_by')
      .selectAll('approvals')
      .select(['tokens.name as decided_by_name', 'users.name as decided_by_user_name']);
    let count = this.store.db.selectFrom('approvals').select((eb) => eb.fn.countAll<number>().as('total'));
    if (query.status) {
      rows = rows.where('approvals.status', '=', query.status);
      count = count.where('status', '=', query.status);
    }
    const found = await rows
      .orderBy('approvals.created_at', 'desc')
      .orderBy('approvals.id', 'desc')
      .limit(query.limit)
      .offset(query.offset)
      .execute();
    const { total } = await count.executeTakeFirstOrThrow();
    return { approvals: found.map((r) => toApprovalView(r, false)), total: Number(total) };
  }

  /**
   * An operator's decision. Agents never decide; the requester never decides its own; an expired approval
   * becomes `expired` (and the answer says so). One conditional update decides among racing deciders.
   * An approval starts running in the background right after the answer.
   */
  async decide(
    id: string,
    decision: 'approve' | 'reject',
    decider: Principal,
    reason?: string | undefined,
  ): Promise<ApprovalView> {
    if (!DECIDERS.has(decider.role)) {
      throw new GatehouseError('forbidden', 'Only admin and operator tokens can decide approvals.');
    }
    const row = await this.readRow(id);
    if (!row) throw notFound(id);
    if (row.requester_id === decider.id) {
      throw new GatehouseError('approval.self_approval', 'The token that asked for this call cannot decide it.', {
        id,
      });
    }
    // Per person too: a user cannot approve what their own agent (any token they own) asked for.
    const deciderUser = decider.user?.id;
    if (deciderUser !== undefined && (row.requester_user_id === deciderUser || row.requester_id === deciderUser)) {
      throw new GatehouseError('approval.self_approval', 'A call made by your own agent cannot be decided by you.', {
        id,
      });
    }
    // An OAuth grant consented by a token nobody owns has that token as its person (no user to compare): the
    // token, by bearer or by a dashboard session opened with it (both principals carry its id), is the requester.
    if ((await grantPersonToken(this.store.db, row.requester_id)) === decider.id) {
      throw new GatehouseError('approval.self_approval', 'A call made by your own agent cannot be decided by you.', {
        id,
      });
    }
    const now = Date.now();
    if (row.status === 'pending' && row.expires_at <= iso(now)) {
      await this.expire([id]);
      throw expiredError(id, row.expires_at);
    }
    if (row.status !== 'pending') throw notPending(id, row.status as ApprovalStatus);

    const status: ApprovalStatus = decision === 'approve' ? 'approved' : 'rejected';
    const decidedAt = iso(now);
    // The decision and its audit row commit together (or neither does).
    const won = await this.store.db.transaction().execute(async (trx) => {
      const result = await trx
        .updateTable('approvals')
        .set({
          status,
          decided_at: decidedAt,
          decided_by: decider.id,
          decided_by_user_id: decider.user?.id ?? null,
          reason: reason ?? null,
        })
        .where('id', '=', id)
        .where('status', '=', 'pending')
        .where('expires_at', '>', decidedAt)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) !== 1) return false;
      await this.audit.recordAdmin(
        {
          action: decision === 'approve' ? 'approval.approve' : 'approval.reject',
          actor: decider,
          serverId: row.server_id ?? undefined,
          tool: row.tool,
          // The operator's reason is kept here too: a later system outcome (out_of_scope, expired) replaces it on the row.
          data: { approvalId: id, surface: row.surface, requesterId: row.requester_id, ...(reason ? { reason } : {}) },
        },
        trx,
      );
      return true;
    });
    if (!won) {
      // Lost the race, or it expired in between: say which.
      const now2 = await this.readRow(id);
      if (now2?.status === 'pending' && now2.expires_at <= iso(Date.now())) {
        await this.expire([id]);
        throw expiredError(id, now2.expires_at);
      }
      throw notPending(id, (now2?.status ?? 'pending') as ApprovalStatus);
    }

    const decided: ApprovalRow = {
      ...row,
      status,
      decided_at: decidedAt,
      decided_by: decider.id,
      decided_by_user_id: decider.user?.id ?? null,
      decided_by_name: decider.name,
      reason: reason ?? null,
    };
    await this.announce(decided, { decidedBy: decider.name, ...(reason ? { reason } : {}) });
    if (status === 'approved') this.launch(id);
    return toApprovalView(decided, false);
  }

  /**
   * The outcome for the token that asked (any other token: `approval.not_found`, so nothing leaks),
   * waiting up to `waitS` (≤ 30) seconds while it is not final. Reading never runs anything.
   */
  async status(id: string, requester: Principal, waitS = 0): Promise<ApprovalStatusAnswer> {
    const wait = Math.min(Math.max(Number.isFinite(waitS) ? waitS : 0, 0), MAX_WAIT_S);
    const deadline = Date.now() + wait * 1000;
    for (;;) {
      let row = await this.readRow(id);
      if (!row || row.requester_id !== requester.id) throw notFound(id);
      if (row.status === 'pending' && row.expires_at <= iso(Date.now())) {
        await this.expire([id]);
        row = (await this.readRow(id)) ?? row;
      }
      const remaining = deadline - Date.now();
      if (FINAL_STATUSES.has(row.status as ApprovalStatus) || remaining <= 0 || this.closed) return answerOf(row);
      // Wake early on an event for this approval (any process on PostgreSQL), or poll the store.
      const untilExpiry = row.status === 'pending' ? Date.parse(row.expires_at) - Date.now() + 5 : remaining;
      await this.waitForChange(id, Math.max(0, Math.min(remaining, this.pollMs, untilExpiry)));
    }
  }

  /** The stored `traceparent` of the call that asked (tracing on), which its later rounds continue too. */
  async traceParent(id: string): Promise<string | null> {
    const row = await this.store.db
      .selectFrom('approvals')
      .select('trace_parent')
      .where('id', '=', id)
      .executeTakeFirst();
    return row?.trace_parent ?? null;
  }

  /**
   * Stores the outcome of a later round of an executed call (its upstream asked the agent for input
   * and the agent answered), so asking again returns the latest. Only over the outcome the round
   * continued from: a stale round never overwrites a newer one.
   */
  async recordRound(id: string, previous: unknown, result: unknown): Promise<boolean> {
    const update = await this.store.db
      .updateTable('approvals')
      .set({ result: JSON.stringify(result ?? null) })
      .where('id', '=', id)
      .where('status', '=', 'executed')
      .where('result', '=', JSON.stringify(previous ?? null))
      .executeTakeFirst();
    return Number(update.numUpdatedRows) === 1;
  }

  /**
   * What a principal's revocation does to its approvals (called only through `revokePrincipal`): every
   * approval it asked for that has not started running — pending, or approved and not yet claimed —
   * ends `cancelled` with `reason`, each change committed with its `approval.cancel` audit row.
   * Returns the ids it cancelled.
   */
  async cancelForRequester(requesterId: string, actor: Principal | undefined, reason: string): Promise<string[]> {
    const open = await this.store.db
      .selectFrom('approvals')
      .select(['id', 'status', 'server_id', 'tool', 'surface'])
      // A user's revocation reaches what any of their agents asked for; a token's, what the OAuth grants it
      // consented as their person (subject `token:<id>`) asked for.
      .where((eb) =>
        eb.or([
          eb('requester_id', '=', requesterId),
          eb('requester_user_id', '=', requesterId),
          eb(
            'requester_id',
            'in',
            eb
              .selectFrom('oauth_grants')
              .select('oauth_grants.id')
              .where('oauth_grants.subject', '=', `token:${requesterId}`),
          ),
        ]),
      )
      .where('status', 'in', ['pending', 'approved'])
      .execute();
    const cancelled: string[] = [];
    for (const candidate of open) {
      if (await this.cancelRow(candidate, actor, reason, { requesterId })) cancelled.push(candidate.id);
    }
    return cancelled;
  }

  /**
   * The requester withdraws its own call (a gated task's `tasks/cancel`): pending, or approved and not yet
   * claimed, it ends `cancelled`, with its audit row; one that already runs or ended is left as it is.
   * Another token's approval is `approval.not_found`. Returns whether this call moved it.
   */
  async withdraw(id: string, requester: Principal, reason: string): Promise<boolean> {
    const row = await this.readRow(id);
    if (!row || row.requester_id !== requester.id) throw notFound(id);
    if (row.status !== 'pending' && row.status !== 'approved') return false;
    return this.cancelRow(row, requester, reason, { requesterId: requester.id, withdrawn: true });
  }

  /** One open approval → cancelled (if it is still in the status read), committed with its audit row. */
  private async cancelRow(
    candidate: { id: string; status: string; server_id: string | null; tool: string; surface: string },
    actor: Principal | undefined,
    reason: string,
    data: Record<string, unknown>,
  ): Promise<boolean> {
    const at = iso(Date.now());
    const moved = await this.store.db.transaction().execute(async (trx) => {
      const result = await trx
        .updateTable('approvals')
        .set({ status: 'cancelled', decided_at: at, reason })
        .where('id', '=', candidate.id)
        .where('status', '=', candidate.status)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) !== 1) return false;
      await this.audit.recordAdmin(
        {
          action: 'approval.cancel',
          actor,
          serverId: candidate.server_id ?? undefined,
          tool: candidate.tool,
          data: { approvalId: candidate.id, surface: candidate.surface, ...data, from: candidate.status, reason },
        },
        trx,
      );
      return true;
    });
    if (!moved) return false;
    const row = await this.readRow(candidate.id);
    if (row) await this.announce(row, { reason });
    return true;
  }

  /** Expires every pending approval past its `expiresAt`; returns their ids. */
  async expireDue(): Promise<string[]> {
    const due = await this.store.db
      .selectFrom('approvals')
      .select('id')
      .where('status', '=', 'pending')
      .where('expires_at', '<=', iso(Date.now()))
      .limit(500)
      .execute();
    return this.expire(due.map((r) => r.id));
  }

  // --- internals -------------------------------------------------------------------------------------------

  private async readRow(id: string): Promise<ApprovalRow | undefined> {
    return this.store.db
      .selectFrom('approvals')
      .leftJoin('tokens', 'tokens.id', 'approvals.decided_by')
      .leftJoin('users', 'users.id', 'approvals.decided_by')
      .selectAll('approvals')
      .select(['tokens.name as decided_by_name', 'users.name as decided_by_user_name'])
      .where('approvals.id', '=', id)
      .executeTakeFirst();
  }

  /** pending → expired for each id still pending and due; announces the ones this call moved. */
  private async expire(ids: string[]): Promise<string[]> {
    const moved: string[] = [];
    for (const id of ids) {
      const at = iso(Date.now());
      const expired = await this.store.db.transaction().execute(async (trx) => {
        const result = await trx
          .updateTable('approvals')
          .set({ status: 'expired', decided_at: at, reason: 'No operator decided before the approval expired.' })
          .where('id', '=', id)
          .where('status', '=', 'pending')
          .where('expires_at', '<=', at)
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) !== 1) return false;
        const row = await trx
          .selectFrom('approvals')
          .select(['server_id', 'tool'])
          .where('id', '=', id)
          .executeTakeFirst();
        await this.audit.recordAdmin(
          {
            action: 'approval.expire',
            actor: undefined,
            serverId: row?.server_id ?? undefined,
            tool: row?.tool,
            data: { approvalId: id },
          },
          trx,
        );
        return true;
      });
      if (!expired) continue;
      moved.push(id);
      const row = await this.readRow(id);
      if (row) await this.announce(row, {});
    }
    return moved;
  }

  /**
   * Draining for a shutdown: claims no new approved call (another replica's sweep picks it up);
   * the calls already running here go on, holding their claims.
   */
  stopClaiming(): void {
    this.claiming = false;
  }

  /** Starts running an approved call in the background unless this process already runs it. */
  private launch(id: string): boolean {
    if (this.closed || !this.claiming || this.running.has(id)) return false;
    const controller = new AbortController();
    const promise = this.run(id, controller.signal)
      .catch((error) => this.logger?.error({ err: error, approvalId: id }, 'approved call bookkeeping failed'))
      .finally(() => {
        this.running.delete(id);
        if (this.running.size === 0) this.stopHeartbeat();
      });
    this.running.set(id, { controller, promise });
    this.startHeartbeat();
    return true;
  }

  /** approved → executing (one winner), recheck, execute, store the outcome. */
  private async run(id: string, signal: AbortSignal): Promise<void> {
    const pending = await this.readRow(id);
    if (pending?.status !== 'approved') return;
    const executor = this.executors.get(pending.surface as ApprovalSurface);
    if (!executor) {
      // Another process serving this surface will claim it; this one must not take it and strand it.
      this.logger?.warn({ approvalId: id, surface: pending.surface }, 'no executor for this approval surface');
      return;
    }
    const claimedAt = iso(Date.now());
    const claim = await this.store.db
      .updateTable('approvals')
      .set({ status: 'executing', executed_at: claimedAt })
      .where('id', '=', id)
      .where('status', '=', 'approved')
      .executeTakeFirst();
    if (Number(claim.numUpdatedRows) !== 1) return; // someone else runs it
    const row: ApprovalRow = { ...pending, status: 'executing', executed_at: claimedAt };
    // In the trace of the call that waited (its agent → gate → approval → this → upstream), linked to the
    // decision's span when the decision was traced here.
    return inResumedSpan(
      'gatehouse.approval.execute',
      { 'gen_ai.tool.name': row.exposed_name, 'gatehouse.approval.id': id, 'gatehouse.surface': row.surface },
      row.trace_parent,
      () => this.runClaimed(row, claimedAt, executor, signal),
    );
  }

  /** The view an executor runs: the literal arguments, opened from their seal when the card shows them masked. */
  private withLiteralArguments(view: ApprovalView, row: ApprovalRow): ApprovalView {
    if (!row.sealed_arguments) return view;
    if (!this.sealKey) throw new GatehouseError('internal_error', 'This approval holds sealed arguments and no key.');
    const literal = parseJson<Record<string, unknown>>(
      unseal(this.sealKey, row.sealed_arguments, sealedArgumentsAad(row.id)),
      {},
    );
    return { ...view, arguments: literal };
  }

  /** A claimed call: recheck, execute, store the outcome. */
  private async runClaimed(
    row: ApprovalRow,
    claimedAt: string,
    executor: ApprovalExecutor,
    signal: AbortSignal,
  ): Promise<void> {
    const id = row.id;
    let approval: ApprovalView;
    try {
      approval = this.withLiteralArguments(toApprovalView(row, false), row);
    } catch (error) {
      return this.finish(row, 'failed', { error: errorOf(error, this.logger, id) });
    }
    if (row.expires_at <= claimedAt) {
      return this.finish(row, 'expired', { reason: 'The approval expired before the call could run.' });
    }
    if (argumentsHash(approval.arguments) !== row.args_hash) {
      return this.finish(row, 'out_of_scope', { reason: 'The stored arguments no longer match what was approved.' });
    }
    let check: RecheckOutcome;
    try {
      check = await executor.recheck(approval);
    } catch (error) {
      return this.finish(row, 'failed', { error: errorOf(error, this.logger, id) });
    }
    if (!check.ok) return this.finish(row, 'out_of_scope', { reason: check.reason });
    // Right before it runs: a requester revoked since it asked (even after an operator approved) never runs.
    if (!(await principalActive(this.store.db, row.requester_id, row.requester_user_id))) {
      return this.finish(row, 'cancelled', { reason: REQUESTER_INACTIVE });
    }
    if (Date.parse(row.expires_at) <= Date.now()) {
      return this.finish(row, 'expired', { reason: 'The approval expired before the call could run.' });
    }

    let result: unknown;
    try {
      result = await executor.execute(approval, signal);
    } catch (error) {
      const failure = signal.aborted
        ? {
            code: 'internal_error',
            message: 'Gatehouse shut down while this approved call was running; it is never run again.',
          }
        : errorOf(error, this.logger, id);
      return this.finish(row, 'failed', { error: failure });
    }
    let stored: string;
    try {
      stored = JSON.stringify(result ?? null);
    } catch {
      return this.finish(row, 'failed', {
        error: { code: 'internal_error', message: 'The call ran but its result could not be stored as JSON.' },
      });
    }
    return this.finish(row, 'executed', { result: stored });
  }

  /** executing → a final status (only if this process still holds the claim), then audit and announce. */
  private async finish(
    row: ApprovalRow,
    status: 'executed' | 'failed' | 'expired' | 'out_of_scope' | 'cancelled',
    outcome: { result?: string; error?: ApprovalError; reason?: string },
  ): Promise<void> {
    const at = iso(Date.now());
    // The outcome and its `approval.execute` row commit together: never one on disk without the other.
    const held = await this.store.db.transaction().execute(async (trx) => {
      const update = await trx
        .updateTable('approvals')
        .set({
          status,
          executed_at: status === 'executed' || status === 'failed' ? at : null,
          result: outcome.result ?? null,
          error: outcome.error ? JSON.stringify(outcome.error) : null,
          ...(outcome.reason !== undefined ? { reason: outcome.reason } : {}),
        })
        .where('id', '=', row.id)
        .where('status', '=', 'executing')
        .executeTakeFirst();
      if (Number(update.numUpdatedRows) !== 1) return false;
      await this.audit.recordAdmin(
        {
          action: 'approval.execute',
          actor: undefined,
          serverId: row.server_id ?? undefined,
          tool: row.tool,
          data: { approvalId: row.id, status, ...(outcome.error ? { code: outcome.error.code } : {}) },
        },
        trx,
      );
      return true;
    });
    if (!held) {
      this.logger?.warn({ approvalId: row.id, status }, 'approved call finished after its claim was taken away');
      return;
    }
    await this.announce(
      { ...row, status },
      {
        ...(outcome.reason !== undefined ? { reason: outcome.reason } : {}),
        ...(outcome.error ? { code: outcome.error.code } : {}),
      },
    );
  }

  /** Rows whose claim lapsed (their process died) end `failed`; they are never run again. */
  private async failLapsedClaims(): Promise<number> {
    const lapsed = await this.store.db
      .selectFrom('approvals')
      .selectAll()
      .where('status', '=', 'executing')
      .where((eb) => eb.or([eb('executed_at', '<', iso(Date.now() - this.leaseMs)), eb('executed_at', 'is', null)]))
      .limit(500)
      .execute();
    let failed = 0;
    for (const row of lapsed) {
      if (this.running.has(row.id)) continue;
      const moved = await this.store.db.transaction().execute(async (trx) => {
        const result = await trx
          .updateTable('approvals')
          .set({ status: 'failed', error: JSON.stringify(INTERRUPTED), executed_at: iso(Date.now()) })
          .where('id', '=', row.id)
          .where('status', '=', 'executing')
          .where('executed_at', row.executed_at === null ? 'is' : '=', row.executed_at)
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) !== 1) return false;
        await this.audit.recordAdmin(
          {
            action: 'approval.execute',
            actor: undefined,
            serverId: row.server_id ?? undefined,
            tool: row.tool,
            data: { approvalId: row.id, status: 'failed', code: INTERRUPTED.code, interrupted: true },
          },
          trx,
        );
        return true;
      });
      if (!moved) continue;
      failed++;
      await this.announce({ ...row, status: 'failed' }, { code: INTERRUPTED.code });
    }
    return failed;
  }

  private sweep(): Promise<void> {
    this.sweeping ??= (async () => {
      try {
        await this.expireDue();
        await this.failLapsedClaims();
        const orphans = await this.store.db
          .selectFrom('approvals')
          .select('id')
          .where('status', '=', 'approved')
          .where('decided_at', '<', iso(Date.now() - this.orphanGraceMs))
          .limit(100)
          .execute();
        for (const { id } of orphans) this.launch(id);
      } catch (error) {
        this.logger?.warn({ err: error }, 'approval sweep failed');
      }
    })().finally(() => {
      this.sweeping = undefined;
    });
    return this.sweeping;
  }

  private startHeartbeat(): void {
    if (this.heartbeatTimer) return;
    this.heartbeatTimer = setInterval(() => {
      const ids = [...this.running.keys()];
      if (ids.length === 0) return;
      this.store.db
        .updateTable('approvals')
        .set({ executed_at: iso(Date.now()) })
        .where('id', 'in', ids)
        .where('status', '=', 'executing')
        .execute()
        .catch((error) => this.logger?.warn({ err: error }, 'approval lease refresh failed'));
    }, this.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  private stopHeartbeat(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }

  /** `approval.decided` for every change of status after creation; data holds ids and names, never values. */
  private async announce(row: ApprovalRow, extra: Record<string, unknown>): Promise<void> {
    this.wake(row.id);
    try {
      await this.events.publish('approval.decided', {
        id: row.id,
        surface: row.surface,
        status: row.status,
        server: row.server_id,
        tool: row.tool,
        ...extra,
      });
    } catch (error) {
      // The record is committed; a lost stream event only delays watchers until their next poll.
      this.logger?.warn({ err: error, approvalId: row.id }, 'approval event not published');
    }
  }

  private wake(id: string): void {
    const set = this.waiters.get(id);
    if (!set) return;
    this.waiters.delete(id);
    for (const resolve of set) resolve();
  }

  private waitForChange(id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(id);
      if (!set) {
        set = new Set();
        this.waiters.set(id, set);
      }
      const done = () => {
        clearTimeout(timer);
        this.waiters.get(id)?.delete(done);
        if (this.waiters.get(id)?.size === 0) this.waiters.delete(id);
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      set.add(done);
    });
  }
}

function notFound(id: string): GatehouseError {
  return new GatehouseError('approval.not_found', `No approval ${id} (for this token).`, { id });
}

function notPending(id: string, status: ApprovalStatus): GatehouseError {
  return new GatehouseError('approval.not_pending', `Approval ${id} is already ${status}.`, { id, status });
}

function expiredError(id: string, expiresAt: string): GatehouseError {
  return new GatehouseError('approval.not_pending', `Approval ${id} expired at ${expiresAt}; nothing was decided.`, {
    id,
    status: 'expired',
  });
}

/** A failure as stored: a catalogue code and message; anything else is an internal error (details only logged). */
function errorOf(error: unknown, logger: Logger | undefined, id: string): ApprovalError {
  if (isGatehouseError(error)) return { code: error.code, message: error.message };
  logger?.error({ err: error, approvalId: id }, 'approved call failed unexpectedly');
  return { code: 'internal_error', message: 'The approved call failed unexpectedly.' };
}

function answerOf(row: ApprovalRow): ApprovalStatusAnswer {
  const status = row.status as ApprovalStatus;
  const base = { approval_id: row.id };
  switch (status) {
    case 'pending':
    case 'approved':
    case 'executing':
      return { status: 'pending', ...base };
    case 'rejected':
      return { status, ...base, ...(row.reason ? { reason: row.reason } : {}) };
    case 'expired':
    case 'out_of_scope':
    case 'cancelled':
      return { status, ...base, reason: row.reason ?? status };
    case 'executed':
      return { status, ...base, result: parseJson<unknown>(row.result, null) };
    case 'failed':
      return {
        status,
        ...base,
        error: parseJson<ApprovalError>(row.error, { code: 'internal_error', message: 'The approved call failed.' }),
      };
  }
}
