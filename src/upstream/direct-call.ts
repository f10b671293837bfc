/**
 * Direct calls: a `tools/call` sent to an upstream as one plain HTTP exchange through the egress
 * guard's `exchange` (the same checks, pinned connect, refused redirects and body cap as its `fetch`)
 * instead of through the SDK client, whose per-request machinery (protocol layer, transport, WHATWG
 * `Request`/`Response`, double validation of each message) costs the hub more CPU than the exchange.
 *
 * This module is the half both eras share: sending the request the era module built and reading
 * the answer as the SDK's transport reads it, a JSON body here or an SSE stream (`direct-stream.ts`)
 * carrying the JSON-RPC response to the call. `direct-modern.ts` and `direct-legacy.ts` build each
 * era's request; `direct-result.ts` checks the result. Failures are raised in the SDK's own shapes
 * (`SdkHttpError`, `ProtocolError`, `SdkError`), so the pool's retry rules and `map-error.ts` treat
 * both paths alike.
 */
import {
  extractWWWAuthenticateParams,
  InsufficientScopeError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
} from '@modelcontextprotocol/client';
import type { Cancellation } from '../cancellation.js';
import type { Exchanged } from '../egress/index.js';
import { GatehouseError } from '../errors.js';
import { outgoingCarrier } from '../telemetry/tracing.js';
import { boundStrings } from './bounds.js';
import { answerInStreams } from './direct-stream.js';
import { isPlainObject, isRequest, type Json, protocolError } from './direct-wire.js';
import type { Exchange, InteractiveCallOptions, UpstreamLogMessage } from './types.js';

export interface DirectTarget {
  url: string;
  headers: Record<string, string>;
  clientInfo: { name: string; version: string };
}

/** Tool names sent as they are in the 2026-07-28 `Mcp-Name` header; any other name takes the SDK path there. */
const HEADER_SAFE_NAME = /^[A-Za-z0-9_.\-/]{1,128}$/;

/**
 * Whether a call may go out directly. Never with progress (the SDK path relays it). On a 2025-era
 * connection no continuation: that era has no input-required vocabulary, so what to make of one is
 * left to the SDK path (its asks, `asks.ts`, are relayed on both paths).
 */
export function canCallDirectly(name: string, options: InteractiveCallOptions, era: 'modern' | 'legacy'): boolean {
  if (options.onProgress !== undefined) return false;
  if (era === 'modern') return HEADER_SAFE_NAME.test(name);
  return options.continuation === undefined;
}

let lastId = 0;

export function nextRequestId(): number {
  lastId = (lastId + 1) % Number.MAX_SAFE_INTEGER;
  return lastId;
}

export interface CallExchange {
  url: string;
  /** Every header of the POST (the era module's, `content-type` and `accept` included). */
  headers: Record<string, string>;
  body: string;
  /** The JSON-RPC id of the call, whose response ends the exchange. */
  id: number;
  /** Ends the exchange early: the call's `Deadline` (which needs no AbortSignal for it) or a signal. */
  signal: AbortSignal | Cancellation;
  /**
   * A 400 carrying the JSON-RPC error to the call is that error (the SDK reads it so for 2026-07-28
   * requests only; on 2025 it stays an HTTP error).
   */
  errorIn400: boolean;
  /** A server→client request met before the response (2025 era); the reading waits for it. */
  onRequest?: (request: Json) => Promise<void>;
  /** The headers of a GET that resumes an SSE answer (2025 era; see `direct-stream.ts`). */
  resumeHeaders?: Record<string, string>;
  /** A notification met before the response (a log message, say); the reading does not wait for it. */
  onNotification?: (notification: Json) => void;
}

/** Relays the upstream's `notifications/message` of one call to `onLog`, bounded; other notifications pass by. */
export function logRelay(onLog: ((message: UpstreamLogMessage) => void) | undefined): CallExchange['onNotification'] {
  if (!onLog) return undefined;
  return (notification) => {
    if (notification.method !== 'notifications/message' || !isPlainObject(notification.params)) return;
    const { level, logger, data } = boundStrings(notification.params).value;
    if (typeof level !== 'string') return;
    onLog({ level, ...(typeof logger === 'string' ? { logger } : {}), ...(data !== undefined ? { data } : {}) });
  };
}

/** A JSON-RPC notification: a method and no id. */
export function isNotification(message: Json): boolean {
  return message.jsonrpc === '2.0' && typeof message.method === 'string' && !('id' in message);
}

/** POSTs the call and returns the JSON-RPC response to it (a result or an error, unchecked). */
export async function sendCall(exchange: Exchange, call: CallExchange): Promise<Json> {
  // The guard refuses redirects (none is followed, as on the SDK path) and caps the body.
  const carrier = outgoingCarrier();
  const answer = await exchange(call.url, {
    method: 'POST',
    headers: carrier ? { ...call.headers, ...carrier } : call.headers,
    body: call.body,
    signal: call.signal,
  });
  if (answer.status < 200 || answer.status > 299) throw await httpError(answer, call);
  const mediaType = (answer.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
  if (mediaType === 'application/json') return answerInJson(call, JSON.parse(await answer.text()));
  if (mediaType === 'text/event-stream') return answerInStreams(exchange, call, answer);
  answer.discard();
  throw new SdkError(SdkErrorCode.ClientHttpUnexpectedContent, `Unexpected content type: ${mediaType}`);
}

/** A non-2xx answer as the SDK raises it: an HTTP error, or (`errorIn400`) the JSON-RPC error to the call. */
async function httpError(answer: Exchanged, call: CallExchange): Promise<Error> {
  const text = await answer.text().catch(() => null);
  const challenge = answer.status === 403 ? answer.header('www-authenticate') : undefined;
  if (challenge) {
    // As the SDK's transport raises it (no auth provider): the scope the upstream asks for, nothing else.
    const { error, scope, errorDescription } = extractWWWAuthenticateParams(
      new Response(null, { headers: { 'www-authenticate': challenge } }),
    );
    if (error === 'insufficient_scope') return new InsufficientScopeError({ requiredScope: scope, errorDescription });
  }
  if (call.errorIn400 && answer.status === 400 && typeof text === 'string') {
    try {
      const message = JSON.parse(text) as Json;
      if (message.id === call.id && isPlainObject(message.error)) return protocolError(message.error);
    } catch {
      // Not JSON: an HTTP error like any other.
    }
  }
  return new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing to endpoint: ${text}`, {
    status: answer.status,
    statusText: '',
    text,
  });
}

/** The response to the call in a JSON answer (one message or a batch); requests before it are handed on. */
async function answerInJson(call: CallExchange, body: unknown): Promise<Json> {
  for (const message of Array.isArray(body) ? body : [body]) {
    if (!isPlainObject(message)) break;
    if (message.jsonrpc === '2.0' && message.id === call.id) return message;
    if (call.onRequest && isRequest(message)) await call.onRequest(message);
    else if (call.onNotification && isNotification(message)) call.onNotification(message);
  }
  throw new GatehouseError(
    'upstream_protocol_error',
    'The upstream answered with something else than a response to the call.',
    { reason: 'invalid_message' },
  );
}
