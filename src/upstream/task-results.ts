/**
 * Upstream tasks on the SDK client's path (the Tasks extension, SEP-2663). A `tools/call` that declared the
 * extension may be answered `resultType: "task"`, which the SDK client's 2026-07-28 codec refuses (it knows no
 * tasks): the direct path (`direct-result.ts`) reads it itself, and here the transport does it for the SDK path
 * (a call with progress, a name no header may carry, a stdio upstream).
 *
 * The call runs in an async scope (`withTaskAnswers`); the transport notes the id of every `tools/call` sent in
 * it, and when the answer to one is a task it keeps the task for the call and hands the SDK an empty error result
 * in its place (which no schema or output check refuses). The call then answers with the task, checked and bounded.
 */
import {
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
} from '@modelcontextprotocol/client';
import { ScopedStorage } from '../async-scope.js';

type RequestId = string | number;

/** One call that declared the extension: the task it was answered with, if any. */
interface TaskScope {
  task?: Record<string, unknown>;
  /** Undoes what the transports noted for this call (an unanswered call leaves nothing behind). */
  readonly forget: Array<() => void>;
}

const scopes = new ScopedStorage<TaskScope>();

/** Runs `call` (one `tools/call` on an SDK client) so that a task it is answered with is kept for it. */
export async function withTaskAnswers<T>(
  call: () => Promise<T>,
): Promise<{ value: T; task?: Record<string, unknown> }> {
  const scope: TaskScope = { forget: [] };
  try {
    const value = await scopes.run(scope, call);
    return scope.task ? { value, task: scope.task } : { value };
  } finally {
    for (const forget of scope.forget) forget();
  }
}

/** The stand-in the SDK gets for a task answer: an empty error result (no output schema is checked against it). */
const standIn = (id: RequestId): JSONRPCMessage => ({
  jsonrpc: '2.0',
  id,
  result: { resultType: 'complete', content: [], isError: true },
});

/** One transport's side: its calls in flight that declared the extension (request ids are per transport). */
export class TaskAnswers {
  private readonly waiting = new Map<RequestId, TaskScope>();

  /** An outgoing message: a `tools/call` sent inside `withTaskAnswers` is noted. */
  sent(message: JSONRPCMessage | JSONRPCMessage[]): void {
    const scope = scopes.getStore();
    if (!scope || Array.isArray(message) || !isJSONRPCRequest(message) || message.method !== 'tools/call') return;
    const { id } = message;
    this.waiting.set(id, scope);
    scope.forget.push(() => {
      if (this.waiting.get(id) === scope) this.waiting.delete(id);
    });
  }

  /** An incoming message, or its stand-in when it is a task answering a noted call. */
  received(message: JSONRPCMessage): JSONRPCMessage {
    if (this.waiting.size === 0) return message;
    if (!isJSONRPCResultResponse(message)) {
      if (isJSONRPCErrorResponse(message) && message.id != null) this.waiting.delete(message.id);
      return message;
    }
    const scope = this.waiting.get(message.id);
    if (!scope) return message;
    this.waiting.delete(message.id);
    const result = message.result as Record<string, unknown>;
    if (result.resultType !== 'task') return message;
    scope.task = result;
    return standIn(message.id);
  }
}
