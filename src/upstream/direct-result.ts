/**
 * The outcome of a direct call from the JSON-RPC response to it, checked as the SDK client checks it
 * for the connection's era: an error, an input request (2026-07-28 only), or a valid, bounded result.
 */
import { SdkError, SdkErrorCode, specTypeSchemas } from '@modelcontextprotocol/client';
import { GatehouseError } from '../errors.js';
import { boundStrings } from './bounds.js';
import { isPlainObject, type Json, protocolError } from './direct-wire.js';
import { interactiveOutcome } from './operations.js';
import type { InteractiveCallResult, UpstreamTask } from './types.js';

/** Keys of other result families: a 2025 result carrying one must carry `content` too (no defaulting). */
const FOREIGN_RESULT_KEYS = ['task', 'inputRequests', 'requestState'];

/** The Tasks extension's id (SEP-2663), as declared in client and server capabilities. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** Longest upstream task id the hub passes on (the agent sends it back in `Mcp-Name` and the body). */
const MAX_TASK_ID = 256;
const TASK_STATUSES = new Set(['working', 'input_required', 'completed', 'failed', 'cancelled']);
/** A task's status message is a sentence, not a payload: longer ones are cut. */
export const MAX_STATUS_MESSAGE = 1024;
/** The longest a task stays bound to its token when its upstream gives no (or a longer) TTL: one day. */
export const MAX_TASK_TTL_MS = 24 * 60 * 60_000;

const isIsoish = (value: unknown): value is string =>
  typeof value === 'string' && value.length <= 64 && /^\d{4}-\d{2}-\d{2}T/.test(value);

/** A `CreateTaskResult` (flat) checked and reduced to the task's own fields, or a protocol error. */
export function taskOutcome(result: Json): UpstreamTask {
  const { taskId, status, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs, statusMessage } = result;
  if (
    typeof taskId !== 'string' ||
    taskId.length === 0 ||
    taskId.length > MAX_TASK_ID ||
    !/^[\x21-\x7e]+$/.test(taskId) ||
    typeof status !== 'string' ||
    !TASK_STATUSES.has(status) ||
    !isIsoish(createdAt) ||
    !isIsoish(lastUpdatedAt) ||
    (ttlMs !== null && ttlMs !== undefined && !(Number.isInteger(ttlMs) && (ttlMs as number) > 0))
  ) {
    throw new GatehouseError('upstream_protocol_error', 'The upstream answered with a task that is not valid.', {
      reason: 'invalid_task',
    });
  }
  return {
    task: {
      taskId,
      status,
      createdAt,
      lastUpdatedAt,
      ttlMs: typeof ttlMs === 'number' ? ttlMs : null,
      ...(Number.isInteger(pollIntervalMs) && (pollIntervalMs as number) > 0
        ? { pollIntervalMs: pollIntervalMs as number }
        : {}),
      ...(typeof statusMessage === 'string'
        ? { statusMessage: boundStrings(statusMessage, { maxStringChars: MAX_STATUS_MESSAGE }).value }
        : {}),
    },
  };
}

export function outcomeOf(message: Json, era: 'modern' | 'legacy', tasks = false): InteractiveCallResult {
  if (isPlainObject(message.error)) throw protocolError(message.error);
  const result = message.result;
  if (!isPlainObject(result)) {
    throw new SdkError(SdkErrorCode.InvalidResult, 'Invalid result for tools/call: not an object');
  }
  // The 2025 codec drops `resultType` whatever it says; the 2026-07-28 one acts on it.
  const { resultType, ...rest } = result;
  if (era === 'modern') {
    if (resultType === 'input_required') return interactiveOutcome(result);
    // Only when the agent declared the extension (and so did the call): a task it can poll.
    if (resultType === 'task' && tasks) return taskOutcome(result);
    if (resultType !== undefined && resultType !== 'complete') {
      throw new SdkError(
        SdkErrorCode.UnsupportedResultType,
        `Unsupported result type '${String(resultType)}' for tools/call`,
      );
    }
  } else if (!fitsLegacyWire(rest)) {
    throw new SdkError(SdkErrorCode.InvalidResult, 'Invalid result for tools/call');
  }
  if (isPlainTextResult(rest)) return interactiveOutcome(rest);
  const parsed = specTypeSchemas.CallToolResult['~standard'].validate(rest);
  if (parsed instanceof Promise || parsed.issues !== undefined) {
    throw new SdkError(SdkErrorCode.InvalidResult, 'Invalid result for tools/call');
  }
  return interactiveOutcome(parsed.value as Json);
}

/**
 * What the 2025 wire schema demands beyond the spec's `CallToolResult` schema (which both eras then
 * apply): `structuredContent` is an object, and a result of another family does not pass for an
 * empty tool result.
 */
function fitsLegacyWire(result: Json): boolean {
  const { content, structuredContent } = result;
  if (structuredContent !== undefined && !isPlainObject(structuredContent)) return false;
  return content !== undefined || !FOREIGN_RESULT_KEYS.some((key) => key in result);
}

const TEXT_BLOCK_KEYS = new Set(['type', 'text']);

/**
 * The commonest result, valid on sight: text blocks only, an optional boolean `isError`, object
 * `structuredContent` and `_meta`. Anything else is validated against the spec's schema (which also
 * fills defaults, e.g. a missing `content`).
 */
function isPlainTextResult(result: Json): boolean {
  const { content, isError, structuredContent, _meta } = result;
  if (!Array.isArray(content)) return false;
  if (isError !== undefined && typeof isError !== 'boolean') return false;
  if (structuredContent !== undefined && !isPlainObject(structuredContent)) return false;
  if (_meta !== undefined && !isPlainObject(_meta)) return false;
  for (const block of content) {
    if (!isPlainObject(block) || block.type !== 'text' || typeof block.text !== 'string') return false;
    for (const key of Object.keys(block)) if (!TEXT_BLOCK_KEYS.has(key)) return false;
  }
  return true;
}
