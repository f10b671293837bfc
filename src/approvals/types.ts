/** The approval record as the API and the executors see it (camelCase), and how a stored row becomes one. */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { parseJson } from '../store/json.js';
import type { ApprovalTable } from '../store/schema.js';

export type ApprovalSurface = 'hub' | 'admin' | 'memory';
export const APPROVAL_SURFACES: readonly ApprovalSurface[] = ['hub', 'admin', 'memory'];

/**
 * pending → approved → executing → executed | failed; or rejected, expired, out_of_scope; or cancelled
 * (the requester was revoked before the call ran).
 */
export type ApprovalStatus =
  | 'pending'
  | 'approved'
  | 'executing'
  | 'executed'
  | 'failed'
  | 'rejected'
  | 'expired'
  | 'out_of_scope'
  | 'cancelled';

export const APPROVAL_STATUSES: readonly ApprovalStatus[] = [
  'pending',
  'approved',
  'executing',
  'executed',
  'failed',
  'rejected',
  'expired',
  'out_of_scope',
  'cancelled',
];

export const FINAL_STATUSES: ReadonlySet<ApprovalStatus> = new Set([
  'executed',
  'failed',
  'rejected',
  'expired',
  'out_of_scope',
  'cancelled',
]);

/** What the approval card shows besides the call itself; surfaces may add their own facts. */
export interface ApprovalDetail {
  title?: string | undefined;
  description?: string | undefined;
  [fact: string]: unknown;
}

export interface ApprovalError {
  code: string;
  message: string;
}

export interface ApprovalView {
  id: string;
  surface: ApprovalSurface;
  status: ApprovalStatus;
  /** The agent that asked, and the person it acts for (when known). */
  requester: { id: string; name: string; user?: { id: string; name: string | null } };
  serverId: string | null;
  /** The upstream tool (hub) or the admin tool name. */
  tool: string;
  /** The name the agent called. */
  exposedName: string;
  /** Exactly what will be sent. */
  arguments: Record<string, unknown>;
  /** SHA-256 (hex) of the RFC 8785 canonical arguments. */
  argsHash: string;
  pinHash: string | null;
  policyVersion: number | null;
  detail: ApprovalDetail;
  createdAt: string;
  expiresAt: string;
  decidedAt: string | null;
  /** The deciding token (its name from the token table, null if it no longer exists); null for expiry. */
  decidedBy: { id: string; name: string | null; userId?: string } | null;
  /** The operator's reason, or why the system ended it (expired, out_of_scope, cancelled). */
  reason: string | null;
  /** When the call finished (executed or failed). */
  executedAt: string | null;
  hasResult: boolean;
  /**
   * The OpenTelemetry trace id of the call that asked (tracing on), which its approved execution
   * continues: the audit rows of both carry it. Null when the call was not traced.
   */
  traceId: string | null;
  /** The stored result; present on single reads (`get`), left out of lists. */
  result?: unknown;
  error: ApprovalError | null;
}

/**
 * Another requester's approval as an agent with the approvals read scope sees it: which tool, when,
 * and its state — nothing that carries the call's arguments (no arguments or their hash, no detail,
 * reason, result or error, no requester).
 */
export interface ApprovalSummary {
  id: string;
  surface: ApprovalSurface;
  status: ApprovalStatus;
  serverId: string | null;
  tool: string;
  exposedName: string;
  createdAt: string;
  expiresAt: string;
  decidedAt: string | null;
  executedAt: string | null;
  /** Always true: this is a summary; the requester and the operators see the whole card. */
  summarised: true;
}

export function summariseApproval(view: ApprovalView): ApprovalSummary {
  return {
    id: view.id,
    surface: view.surface,
    status: view.status,
    serverId: view.serverId,
    tool: view.tool,
    exposedName: view.exposedName,
    createdAt: view.createdAt,
    expiresAt: view.expiresAt,
    decidedAt: view.decidedAt,
    executedAt: view.executedAt,
    summarised: true,
  };
}

/** The agent-facing outcome (`gatehouse__approval_status`); snake_case where the references fix it. */
export interface ApprovalStatusAnswer {
  /** `approved` and `executing` read as `pending`: the call has not finished yet. */
  status: 'pending' | 'rejected' | 'expired' | 'out_of_scope' | 'cancelled' | 'executed' | 'failed';
  approval_id: string;
  reason?: string;
  result?: unknown;
  error?: ApprovalError;
}

/** SHA-256 hex of the RFC 8785 canonical JSON of the arguments. */
export function argumentsHash(args: unknown): string {
  const canonical = canonicalize(args ?? {}) ?? '';
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}/;

/** The trace id a stored W3C `traceparent` names (none for an all-zero or malformed one). */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  const id = traceparent ? TRACEPARENT.exec(traceparent)?.[1] : undefined;
  return id && !/^0+$/.test(id) ? id : null;
}

export type ApprovalRow = ApprovalTable & { decided_by_name?: string | null; decided_by_user_name?: string | null };

export function toApprovalView(row: ApprovalRow, withResult: boolean): ApprovalView {
  const status = row.status as ApprovalStatus;
  const view: ApprovalView = {
    id: row.id,
    surface: row.surface as ApprovalSurface,
    status,
    requester: {
      id: row.requester_id,
      name: row.requester_name,
      ...(row.requester_user_id ? { user: { id: row.requester_user_id, name: row.requester_user_name ?? null } } : {}),
    },
    serverId: row.server_id,
    tool: row.tool,
    exposedName: row.exposed_name,
    arguments: parseJson<Record<string, unknown>>(row.arguments, {}),
    argsHash: row.args_hash,
    pinHash: row.pin_hash,
    policyVersion: row.policy_version === null ? null : Number(row.policy_version),
    detail: parseJson<ApprovalDetail>(row.detail, {}),
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    decidedAt: row.decided_at,
    decidedBy: row.decided_by
      ? {
          id: row.decided_by,
          name: row.decided_by_name ?? row.decided_by_user_name ?? null,
          ...(row.decided_by_user_id ? { userId: row.decided_by_user_id } : {}),
        }
      : null,
    reason: row.reason,
    // While executing, the column holds the execution lease (heartbeat), not a finish time.
    executedAt: status === 'executed' || status === 'failed' ? row.executed_at : null,
    hasResult: row.result !== null,
    traceId: traceIdOf(row.trace_parent),
    error: parseJson<ApprovalError | null>(row.error, null),
  };
  if (withResult) view.result = parseJson<unknown>(row.result, null);
  return view;
}
