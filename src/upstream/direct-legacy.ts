/**
 * A direct `tools/call` on a 2025-era (sessionful) connection (see `direct-call.ts`), sent as the SDK
 * client sends it there: the connection's session id and negotiated protocol version as headers, no
 * `Mcp-Method`/`Mcp-Name`, and a bare JSON-RPC request (no envelope; `_meta` would only carry a
 * progress token, and calls with progress take the SDK path).
 *
 * What the SDK client would do meanwhile is done here too, as it does it:
 * - a request the upstream sends on the answer stream is answered by POSTing the JSON-RPC response,
 *   so the upstream is not left waiting: `ping` at once, an ask (`roots/list`, `elicitation/create`,
 *   `sampling/createMessage`) with the calling agent's answer when the call relays asks (`asks.ts`);
 * - a stream the upstream closes before answering is resumed (`direct-stream.ts`);
 * - when the caller gives up (or the deadline fires) before the answer, the upstream is told with
 *   `notifications/cancelled`, so it stops the tool.
 */
import type { Cancellation } from '../cancellation.js';
import { GatehouseError } from '../errors.js';
import { outgoingCarrier } from '../telemetry/tracing.js';
import { type AskRelay, askError, isAskMethod, notRelayed, relayAsk } from './asks.js';
import type { Deadline } from './deadline.js';
import { type DirectTarget, logRelay, nextRequestId, sendCall } from './direct-call.js';
import { outcomeOf } from './direct-result.js';
import { inSdkOrder, type Json } from './direct-wire.js';
import type { CallOptions, Exchange, InteractiveCallResult } from './types.js';

/** What a 2025-era connection's transport adds to every request: the session and the negotiated version. */
export interface LegacySession {
  sessionId: string | undefined;
  protocolVersion: string | undefined;
}

/** How long the cancellation notice may take (the caller does not wait for it). */
const CANCEL_WAIT_MS = 1_000;
/**
 * Upstream requests answered per call. The SDK answers any number; past this many the upstream is
 * flooding us (each answer is a POST), and the call fails instead.
 */
const MAX_SERVER_REQUESTS = 32;

export async function callLegacyDirect(
  exchange: Exchange,
  target: DirectTarget,
  session: LegacySession,
  deadline: Deadline,
  name: string,
  args: Record<string, unknown> | undefined,
  options: Pick<CallOptions, 'onLog'> & { ask?: AskRelay | undefined } = {},
): Promise<InteractiveCallResult> {
  if (deadline.aborted) throw deadline.reason;
  const id = nextRequestId();
  const headers = sessionHeaders(target, session);
  const post = (message: Json, postSignal: AbortSignal | Cancellation) =>
    exchange(target.url, {
      method: 'POST',
      headers: headers.post,
      body: JSON.stringify(message),
      signal: postSignal,
    }).then((answer) => answer.discard());
  let served = 0;
  const answerRequest = async (request: Json) => {
    served += 1;
    if (served > MAX_SERVER_REQUESTS) throw tooManyRequests();
    const reply = await replyTo(request, options.ask, deadline);
    // As on the SDK path, an answer that fails to go out does not fail the call: reading goes on.
    return post(reply, deadline).catch(() => {});
  };
  const cancel = () => {
    const notice = {
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: id, reason: String(deadline.reason) },
    };
    post(notice, AbortSignal.timeout(CANCEL_WAIT_MS)).catch(() => {});
  };
  const forgetCancel = deadline.onAbort(cancel);
  const carrier = outgoingCarrier();
  const params: Json = args === undefined ? { name } : { name, arguments: args };
  if (carrier) params._meta = carrier;
  try {
    const message = await sendCall(exchange, {
      url: target.url,
      headers: headers.post,
      // The SDK's protocol layer spreads the request first, then `jsonrpc` and `id`: same bytes.
      body: JSON.stringify({
        method: 'tools/call',
        params,
        jsonrpc: '2.0',
        id,
      }),
      id,
      signal: deadline,
      errorIn400: false,
      onRequest: answerRequest,
      resumeHeaders: headers.get,
      onNotification: logRelay(options.onLog),
    });
    return outcomeOf(message, 'legacy');
  } finally {
    forgetCancel();
  }
}

/**
 * The headers of every request on the session, as the SDK transport sends them: the target's, the
 * session id and negotiated version where there are some; a POST adds its content type and accepts
 * JSON or SSE, a GET (resuming a stream) accepts SSE.
 */
function sessionHeaders(target: DirectTarget, session: LegacySession): SessionHeaders {
  // Built once per session (a connection hands out the same session object, for the same target).
  const cached = headersOf.get(session);
  if (cached?.target === target) return cached.headers;
  const common: Record<string, string> = { ...target.headers };
  if (session.sessionId) common['mcp-session-id'] = session.sessionId;
  if (session.protocolVersion) common['mcp-protocol-version'] = session.protocolVersion;
  const headers = {
    post: inSdkOrder({ ...common, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
    get: { ...common, accept: 'text/event-stream' },
  };
  headersOf.set(session, { target, headers });
  return headers;
}

interface SessionHeaders {
  post: Record<string, string>;
  get: Record<string, string>;
}

const headersOf = new WeakMap<LegacySession, { target: DirectTarget; headers: SessionHeaders }>();

/**
 * The SDK client's answer to an upstream request: `ping` gets an empty result, an ask (`asks.ts`)
 * the agent's answer through the call's relay, anything else "method not found". Key order as the
 * SDK writes them.
 */
async function replyTo(request: Json, ask: AskRelay | undefined, deadline: Deadline): Promise<Json> {
  const { method, id } = request;
  if (method === 'ping') return { result: {}, jsonrpc: '2.0', id };
  if (!isAskMethod(method)) return { jsonrpc: '2.0', id, error: { code: -32601, message: 'Method not found' } };
  try {
    // The SDK path's handlers (`asks.ts`) answer the same, relayed or refused alike.
    if (!ask) throw notRelayed(method);
    return { result: await relayAsk(ask, method, request.params, deadline), jsonrpc: '2.0', id };
  } catch (error) {
    return { jsonrpc: '2.0', id, error: askError(error) };
  }
}

const tooManyRequests = () =>
  new GatehouseError(
    'upstream_protocol_error',
    `The upstream sent more than ${MAX_SERVER_REQUESTS} requests during one call.`,
    { reason: 'too_many_requests' },
  );
