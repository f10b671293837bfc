/**
 * The legacy HTTP+SSE client transport (the 2024-11-05 transport: a GET event stream that names a
 * POST endpoint), as the SDK ships it, with the bounds the SDK leaves open: opening the stream and
 * waiting for its `endpoint` event has a deadline, closing the transport fails a start still waiting
 * (the SDK's own start would stay pending forever, and a pooled connect with it), and every POST has
 * a deadline of its own. A stream that could not be opened fails the start with the fetch's own error
 * (the egress guard's typed refusal), which the SDK's event source would otherwise flatten into a message.
 *
 * The SDK sends each POST on the transport's one long-lived signal, and the egress guard's agent has no
 * header or body timer: a POST the upstream never answers would hold its socket until the connection
 * closes, however long ago the request was given up. A sane server answers a POST with 202 at once (the
 * response rides the stream), so one unanswered within `postAnswerMs` fails — and with it the connection
 * (`Connection.noteError`). The pool, meanwhile, retires a connection whose operation hit its deadline
 * with a request POST still unanswered (`awaitingPost`): closing it frees that socket at once.
 */
import {
  type FetchLike,
  isJSONRPCRequest,
  type JSONRPCMessage,
  SSEClientTransport,
  type SSEClientTransportOptions,
} from '@modelcontextprotocol/client';
import { findGatehouseError, GatehouseError } from '../errors.js';

/** How long the upstream has to answer a POST (headers and body); it answers with 202 at once, normally. */
const POST_ANSWER_MS = 10_000;

export class BoundedSseTransport extends SSEClientTransport {
  #stopStart: ((error: Error) => void) | undefined;
  /** The last typed failure of a request the transport made (the guard refusing the address, the cap, …). */
  #failure: GatehouseError | undefined;
  /** Requests sent whose POST has not been answered yet. */
  #requestPosts = 0;

  constructor(
    url: URL,
    options: SSEClientTransportOptions & { fetch: NonNullable<SSEClientTransportOptions['fetch']> },
    private readonly startTimeoutMs: number,
    private readonly postAnswerMs = POST_ANSWER_MS,
  ) {
    const { fetch } = options;
    super(url, {
      ...options,
      // The event stream (GET) stays open as long as the connection; a POST is bounded (`#post`).
      fetch: (input, init) =>
        (init?.method === 'POST' ? this.#post(fetch, input, init) : fetch(input, init)).catch((error: unknown) => {
          this.#failure = findGatehouseError(error) ?? this.#failure;
          throw error;
        }),
    });
  }

  /** Whether a request's POST is still waiting for the upstream's answer (headers and body). */
  get awaitingPost(): boolean {
    return this.#requestPosts > 0;
  }

  override async send(message: JSONRPCMessage): Promise<void> {
    if (!isJSONRPCRequest(message)) return super.send(message);
    this.#requestPosts += 1;
    try {
      await super.send(message);
    } finally {
      this.#requestPosts -= 1;
    }
  }

  override async start(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const stopped = new Promise<never>((_, reject) => {
      this.#stopStart = reject;
      timer = setTimeout(
        () =>
          reject(
            new GatehouseError('upstream_timeout', 'The upstream did not open its SSE stream in time.', {
              reason: 'sse_endpoint_timeout',
            }),
          ),
        this.startTimeoutMs,
      );
    });
    try {
      await Promise.race([super.start(), stopped]);
    } catch (error) {
      throw this.#failure ?? error;
    } finally {
      clearTimeout(timer);
      this.#stopStart = undefined;
    }
  }

  override async close(): Promise<void> {
    this.#stopStart?.(
      new GatehouseError('upstream_unreachable', 'The SSE connection was closed while it opened.', {
        reason: 'closed',
      }),
    );
    await super.close();
  }

  /**
   * One POST, answered within `postAnswerMs` or aborted. Its signal is its own, following the transport's
   * (closing aborts it) only while it runs: no composite hangs off the long-lived signal. The answer is read
   * here, within the bound (the SDK reads it to its end anyway: a 202's few bytes, or an error's text).
   */
  async #post(fetch: FetchLike, input: string | URL, init: RequestInit): Promise<Response> {
    const { signal } = init;
    const own = new AbortController();
    const follow = () => own.abort(signal?.reason);
    if (signal?.aborted) follow();
    else signal?.addEventListener('abort', follow, { once: true });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      own.abort();
    }, this.postAnswerMs);
    try {
      const response = await fetch(input, { ...init, signal: own.signal });
      // As the SDK reads it: a body that fails to arrive (but for the bound) counts as an empty one.
      const text = await response.text().catch((error: unknown) => {
        if (timedOut) throw error;
        return '';
      });
      const { status, statusText, headers } = response;
      return new Response(text === '' ? null : text, { status, statusText, headers });
    } catch (error) {
      if (!timedOut) throw error;
      throw new GatehouseError(
        'upstream_timeout',
        `The upstream did not answer a POST on its SSE connection within ${this.postAnswerMs} ms.`,
        { reason: 'sse_post_timeout', timeoutMs: this.postAnswerMs },
        { cause: error },
      );
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', follow);
    }
  }
}
