/**
 * `tools/call` on a 2026-07-28 upstream as one plain HTTP exchange: the JSON-RPC request the SDK's
 * client would send (the per-request envelope, the standard headers), through the egress guard's
 * `exchange` (the same checks, pinned connect, refused redirects and body cap as its `fetch`),
 * and its answer read and checked as the SDK reads it — a JSON or SSE response carrying the JSON-RPC
 * response to this request, a result validated against the spec's `CallToolResult` schema. What it
 * leaves out is the SDK client's per-request machinery (its protocol layer, transport, WHATWG
 * `Request`/`Response` and double validation of the message), which costs the hub more CPU than the
 * exchange itself.
 *
 * Failures are raised in the SDK's own shapes (`SdkHttpError`, `ProtocolError`, `SdkError`), so the
 * pool's retry rules and `map-error.ts` treat both paths alike. The pool uses it for modern
 * connections only, and only for calls without progress (the SDK path relays progress).
 */
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  specTypeSchemas,
} from '@modelcontextprotocol/client';
import { createParser } from 'eventsource-parser';
import type { Exchanged } from '../egress/index.js';
import { GatehouseError } from '../errors.js';
import type { Deadline } from './deadline.js';
import { interactiveOutcome } from './operations.js';
import type { Exchange, InteractiveCallOptions, InteractiveCallResult } from './types.js';

export const MODERN_PROTOCOL_VERSION = '2026-07-28';

/** Tool names sent as they are in the `Mcp-Name` header; any other name takes the SDK path. */
const HEADER_SAFE_NAME = /^[A-Za-z0-9_.\-/]{1,128}$/;

export function canCallDirectly(name: string, options: InteractiveCallOptions): boolean {
  return options.onProgress === undefined && HEADER_SAFE_NAME.test(name);
}

let nextId = 0;

type Json = Record<string, unknown>;

export interface DirectTarget {
  url: string;
  headers: Record<string, string>;
  clientInfo: { name: string; version: string };
}

export async function callModernDirect(
  exchange: Exchange,
  target: DirectTarget,
  deadline: Deadline,
  name: string,
  args: Record<string, unknown> | undefined,
  options: Pick<InteractiveCallOptions, 'continuation' | 'inputCapabilities'>,
): Promise<InteractiveCallResult> {
  nextId = (nextId + 1) % Number.MAX_SAFE_INTEGER;
  const id = nextId;
  const { continuation, inputCapabilities } = options;
  const params: Json = args === undefined ? { name } : { name, arguments: args };
  if (continuation?.inputResponses) params.inputResponses = continuation.inputResponses;
  if (continuation?.requestState !== undefined) params.requestState = continuation.requestState;
  params._meta = {
    [PROTOCOL_VERSION_META_KEY]: MODERN_PROTOCOL_VERSION,
    [CLIENT_INFO_META_KEY]: target.clientInfo,
    // What the agent can answer, for this call only (the client itself declares nothing).
    [CLIENT_CAPABILITIES_META_KEY]: inputCapabilities ?? {},
  };
  // The guard refuses redirects (none is followed, as on the SDK path) and caps the body.
  const answer = await exchange(target.url, {
    method: 'POST',
    headers: {
      ...target.headers,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
      'mcp-method': 'tools/call',
      'mcp-name': name,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }),
    signal: deadline.signal,
  });
  if (answer.status < 200 || answer.status > 299) throw await httpError(answer, id);
  const mediaType = (answer.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
  let message: Json;
  if (mediaType === 'application/json') message = answerTo(id, JSON.parse(await answer.text()));
  else if (mediaType === 'text/event-stream') message = await answerInStream(id, answer.chunks());
  else {
    answer.discard();
    throw new SdkError(SdkErrorCode.ClientHttpUnexpectedContent, `Unexpected content type: ${mediaType}`);
  }
  return outcomeOf(message);
}

/** A non-2xx answer as the SDK raises it: a JSON-RPC error to this request on a 400, else an HTTP error. */
async function httpError(answer: Exchanged, id: number): Promise<Error> {
  const text = await answer.text().catch(() => null);
  if (answer.status === 400 && typeof text === 'string') {
    try {
      const message = JSON.parse(text) as Json;
      if (message.id === id && isPlainObject(message.error)) return protocolError(message.error);
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

const isPlainObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The JSON-RPC response to request `id` in a JSON answer. */
function answerTo(id: number, message: unknown): Json {
  if (isPlainObject(message) && message.jsonrpc === '2.0' && message.id === id) return message;
  throw new GatehouseError(
    'upstream_protocol_error',
    'The upstream answered with something else than a response to the call.',
    {
      reason: 'invalid_message',
    },
  );
}

/** Reads an SSE answer until the JSON-RPC response to request `id` (notifications before it are skipped). */
async function answerInStream(id: number, chunks: AsyncGenerator<Buffer>): Promise<Json> {
  let answer: Json | undefined;
  let invalid: unknown;
  const parser = createParser({
    onEvent(event) {
      if (answer !== undefined || invalid !== undefined) return;
      if (event.event !== undefined && event.event !== 'message') return;
      try {
        const message = JSON.parse(event.data) as unknown;
        if (isPlainObject(message) && message.id === id && ('result' in message || 'error' in message))
          answer = message;
      } catch (error) {
        invalid = error;
      }
    },
  });
  const decoder = new TextDecoder();
  // Leaving the loop early ends the generator, which drops the rest of the stream.
  for await (const chunk of chunks) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (answer !== undefined || invalid !== undefined) break;
  }
  if (invalid !== undefined) throw invalid;
  if (answer) return answer;
  throw new GatehouseError('upstream_unreachable', 'The upstream closed the response stream without answering.', {
    reason: 'stream_ended',
  });
}

function protocolError(error: Json): ProtocolError {
  const code = typeof error.code === 'number' ? error.code : -32603;
  const message = typeof error.message === 'string' ? error.message : 'Unknown error';
  return new ProtocolError(code, message, error.data);
}

/** The call's outcome from its JSON-RPC response: an error, an input request, or a valid, bounded result. */
function outcomeOf(message: Json): InteractiveCallResult {
  if (isPlainObject(message.error)) throw protocolError(message.error);
  const result = message.result;
  if (!isPlainObject(result)) {
    throw new SdkError(SdkErrorCode.InvalidResult, 'Invalid result for tools/call: not an object');
  }
  const { resultType, ...rest } = result;
  if (resultType === 'input_required') return interactiveOutcome(result);
  if (resultType !== undefined && resultType !== 'complete') {
    throw new SdkError(
      SdkErrorCode.UnsupportedResultType,
      `Unsupported result type '${String(resultType)}' for tools/call`,
    );
  }
  if (isPlainTextResult(rest)) return interactiveOutcome(rest);
  const parsed = specTypeSchemas.CallToolResult['~standard'].validate(rest);
  if (parsed instanceof Promise || parsed.issues !== undefined) {
    throw new SdkError(SdkErrorCode.InvalidResult, 'Invalid result for tools/call');
  }
  return interactiveOutcome(parsed.value as Json);
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
