/**
 * The MCP-facing result shapes every Gatehouse surface shares (hal0's
 * contract): a refusal the agent should read is a tool result with
 * `isError: true` and `{"status": "error", "error": {code, message}}`; a gated
 * call answers `{"status": "pending_approval", "approval_id", "detail"}`.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { ERROR_CATALOGUE, type GatehouseError } from '../errors.js';

function jsonResult(body: Record<string, unknown>, isError: boolean): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(body) }],
    structuredContent: body,
    ...(isError ? { isError } : {}),
  };
}

/** Details an agent may read: reasons and hints, never internals. */
const AGENT_DETAILS = ['reason', 'retryAfterS', 'issues', 'path', 'limit', 'connectUrl'];

export function errorResult(error: GatehouseError): CallToolResult {
  const details = Object.fromEntries(
    Object.entries(error.details ?? {}).filter(([key]) => AGENT_DETAILS.includes(key)),
  );
  return jsonResult({ status: 'error', error: { code: error.code, message: error.message, ...details } }, true);
}

export function pendingApprovalResult(approvalId: string, detail: string): CallToolResult {
  return jsonResult({ status: 'pending_approval', approval_id: approvalId, detail }, false);
}

export function jsonToolResult(body: Record<string, unknown>): CallToolResult {
  return jsonResult(body, false);
}

/** What a caller gets for a tool it may not see: exactly what a tool that does not exist gets. */
export function unknownTool(name: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${name} not found`);
}

/** Whether a catalogue error is reported as a tool result (else it is a protocol error). */
export function isResultError(error: GatehouseError): boolean {
  return ERROR_CATALOGUE[error.code].mcp === 'result';
}

/**
 * The Tasks extension (SEP-2663): an agent that declares it (in its request's `_meta` client
 * capabilities on 2026-07-28, in its initialize capabilities on 2025) gets a long-running call as a
 * task it polls with `tasks/get`, rather than a result.
 */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** How often a client should poll a task (the hub's own: an approval waits minutes, not milliseconds). */
export const TASK_POLL_INTERVAL_MS = 2_000;

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** The fields of a task, on the wire (SEP-2663: flat, `ttlMs` and `pollIntervalMs` in integer milliseconds). */
export interface TaskFields {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  /** How long the task stays readable from its creation (null: as long as its record is kept). */
  ttlMs: number | null;
  pollIntervalMs?: number;
}

/** What a failed task carries: a JSON-RPC error object. */
export interface TaskError {
  code: number;
  message: string;
  data?: unknown;
}

/** `tasks/get`'s answer: the task, with the result inlined once completed, the error once failed. */
export type DetailedTask = TaskFields & {
  result?: CallToolResult;
  error?: TaskError;
  inputRequests?: Record<string, unknown>;
};

/** Whether declared client capabilities (an envelope's or a session's) include the Tasks extension. */
export function declaresTasks(capabilities: unknown): boolean {
  if (capabilities === null || typeof capabilities !== 'object') return false;
  const extensions = (capabilities as { extensions?: unknown }).extensions;
  return extensions !== null && typeof extensions === 'object' && TASKS_EXTENSION in extensions;
}

/** A `tools/call` answered as a task (SEP-2663 `CreateTaskResult`: `resultType: "task"` and the task, flat). */
export function createTaskResult(task: TaskFields): CallToolResult {
  return { resultType: 'task', ...task } as unknown as CallToolResult;
}

/** The JSON-RPC error the task methods answer for a task this caller does not have (SEP-2663: -32602). */
export function taskNotFound(taskId: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, `Task ${taskId} not found`);
}

/** The JSON-RPC error for a task method from an agent that did not declare the extension (SEP-2575: -32021). */
export function tasksNotDeclared(method: string): ProtocolError {
  return new MissingRequiredClientCapabilityError(
    { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    `${method} needs the ${TASKS_EXTENSION} extension`,
  );
}
