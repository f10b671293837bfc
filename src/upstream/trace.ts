/**
 * Operation tracing across the SDK's asynchronous layers, for two SDK gaps: a request whose SSE
 * response stream dies before the answer (the upstream crashed, or the egress guard cut the body at
 * its size cap) is never rejected — it waits for its timeout — and the error that killed the stream
 * reaches `onerror` only as a string.
 *
 * So each operation runs in an async scope (`ScopedStorage`); the transport gives every request a child
 * scope, the fetch wrapper records the error its response body died with, and when a request's
 * stream ends unanswered the whole operation fails at once with that error (or as unreachable).
 */
import { setMaxListeners } from 'node:events';
import type { FetchLike } from '@modelcontextprotocol/client';
import { ScopedStorage } from '../async-scope.js';
import { outgoingCarrier } from '../telemetry/tracing.js';

type RequestId = string | number;

/** One operation: a connect, or what runs on a connected client. */
export class OpTrace {
  /** Rejects when a request of this operation lost its response stream. */
  readonly failure: Promise<never>;
  private rejectFailure!: (error: unknown) => void;
  private done = false;
  private readonly cleanups: Array<() => void> = [];

  constructor() {
    this.failure = new Promise<never>((_, reject) => {
      this.rejectFailure = reject;
    });
    this.failure.catch(() => {});
  }

  fail(error: unknown): void {
    if (this.done) return;
    this.done = true;
    this.rejectFailure(error);
  }

  /** Runs `cleanup` when the operation ends (used to forget its unanswered requests). */
  onEnd(cleanup: () => void): void {
    if (this.done) cleanup();
    else this.cleanups.push(cleanup);
  }

  end(): void {
    this.done = true;
    for (const cleanup of this.cleanups.splice(0)) cleanup();
  }
}

/** The ambient scope: the operation, and inside a transport `send`, the request being sent. */
export interface Scope {
  trace: OpTrace;
  /** The JSON-RPC id of the request this scope belongs to (absent at operation level). */
  requestId?: RequestId;
  /** The error the request's response body failed with, as the fetch saw it. */
  bodyError?: unknown;
  /** The first error the SDK reported (via `onerror`) while handling this request. */
  noted?: unknown;
}

const scopes = new ScopedStorage<Scope>();

export function currentScope(): Scope | undefined {
  return scopes.getStore();
}

export function runInScope<T>(scope: Scope, fn: () => Promise<T>): Promise<T> {
  return scopes.run(scope, fn);
}

/** Runs `work` as one traced operation: it rejects as soon as a request's response stream dies unanswered. */
export async function traced<T>(work: () => Promise<T>): Promise<T> {
  const trace = new OpTrace();
  try {
    return await Promise.race([scopes.run({ trace }, work), trace.failure]);
  } finally {
    trace.end();
  }
}

const isEventStream = (response: Response) =>
  (response.headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream');

/** A body that passes chunks through and reports the error the source fails with. */
function observeBody(
  source: ReadableStream<Uint8Array>,
  onError: (error: unknown) => void,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        onError(error);
        controller.error(error);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/**
 * Wraps the injected fetch so an SSE response to a traced request records why its body failed.
 * JSON bodies need no wrapper: their read error rejects the request directly, unchanged.
 */
export function tracedFetch(base: FetchLike): FetchLike {
  return async (url, init) => {
    // A 2025-era transport hands every request its one long-lived signal; undici adds a listener per
    // request and drops it only when the Request is garbage-collected, so busy connections trip
    // Node's leak warning although nothing leaks: GC bounds the count. (Not 0 for "unlimited":
    // getMaxListeners() throws on a 0 it reads back, and undici calls it.)
    try {
      if (init?.signal) setMaxListeners(Number.POSITIVE_INFINITY, init.signal);
    } catch {
      // Not a Node EventTarget (a foreign signal): nothing to quiet.
    }
    const scope = scopes.getStore();
    // The W3C trace context of the call this request belongs to (tracing on).
    const carrier = outgoingCarrier();
    if (carrier && init) {
      const headers = new Headers(init.headers);
      for (const [key, value] of Object.entries(carrier)) headers.set(key, value);
      init = { ...init, headers };
    }
    const response = await base(url, init);
    if (scope?.requestId === undefined || !response.body || !response.ok || !isEventStream(response)) return response;
    const body = observeBody(response.body, (error) => {
      scope.bodyError ??= error;
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
