/**
 * A direct `tools/call` on a 2026-07-28 connection (see `direct-call.ts`): the request the SDK client
 * sends there — the per-request `_meta` envelope, the protocol version, `Mcp-Method` and `Mcp-Name`
 * headers — and an answer that may be an input request.
 */
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  LOG_LEVEL_META_KEY,
  PROTOCOL_VERSION_META_KEY,
} from '@modelcontextprotocol/client';
import { outgoingCarrier } from '../telemetry/tracing.js';
import { MODERN_PROTOCOL_VERSION } from '../wire.js';
import type { Deadline } from './deadline.js';
import { type DirectTarget, logRelay, nextRequestId, sendCall } from './direct-call.js';
import { outcomeOf, TASKS_EXTENSION } from './direct-result.js';
import { inSdkOrder, type Json } from './direct-wire.js';
import { paramHeadersFor } from './param-headers.js';
import type { Exchange, InteractiveCallOptions, InteractiveCallResult } from './types.js';
import { withExtensions } from './types.js';

export async function callModernDirect(
  exchange: Exchange,
  target: DirectTarget,
  deadline: Deadline,
  name: string,
  args: Record<string, unknown> | undefined,
  options: Pick<
    InteractiveCallOptions,
    'continuation' | 'inputCapabilities' | 'extensions' | 'onLog' | 'logLevel' | 'inputSchema' | 'tasks'
  >,
): Promise<InteractiveCallResult> {
  const id = nextRequestId();
  const { continuation, inputCapabilities } = options;
  const params: Json = args === undefined ? { name } : { name, arguments: args };
  if (continuation?.inputResponses) params.inputResponses = continuation.inputResponses;
  if (continuation?.requestState !== undefined) params.requestState = continuation.requestState;
  params._meta = {
    [PROTOCOL_VERSION_META_KEY]: MODERN_PROTOCOL_VERSION,
    [CLIENT_INFO_META_KEY]: target.clientInfo,
    // What the agent can answer, for this call only (the client itself declares nothing).
    [CLIENT_CAPABILITIES_META_KEY]: withExtensions(
      inputCapabilities,
      options.tasks ? { ...options.extensions, [TASKS_EXTENSION]: {} } : options.extensions,
    ),
    // Without it a 2026-07-28 upstream sends no log messages at all; with it, those the agent asked for.
    ...(options.onLog && options.logLevel !== undefined ? { [LOG_LEVEL_META_KEY]: options.logLevel } : {}),
    ...outgoingCarrier(),
  };
  const message = await sendCall(exchange, {
    url: target.url,
    headers: withParamHeaders(callHeaders(target, name), paramHeadersFor(options.inputSchema, args)),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }),
    id,
    signal: deadline,
    errorIn400: true,
    onNotification: logRelay(options.onLog),
  });
  return outcomeOf(message, 'modern', options.tasks === true);
}

/** A call's headers in the SDK's order: sorted once per target, the tool's name filled in per call. */
function callHeaders(target: DirectTarget, name: string): Record<string, string> {
  let order = headerOrder.get(target);
  if (!order) {
    order = Object.entries(
      inSdkOrder({
        ...target.headers,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
        'mcp-method': 'tools/call',
        'mcp-name': '',
      }),
    );
    headerOrder.set(target, order);
  }
  const headers: Record<string, string> = {};
  for (const [key, value] of order) headers[key] = key === 'mcp-name' ? name : value;
  return headers;
}

/** The call's `Mcp-Param-*` headers (SEP-2243) among the others, still in the SDK's order. */
function withParamHeaders(headers: Record<string, string>, params: Record<string, string>): Record<string, string> {
  const entries = Object.entries(params);
  if (entries.length === 0) return headers;
  return inSdkOrder({ ...headers, ...Object.fromEntries(entries.map(([name, value]) => [name.toLowerCase(), value])) });
}

const headerOrder = new WeakMap<DirectTarget, Array<[string, string]>>();
