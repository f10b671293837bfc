/**
 * The hub's fast path for the request agents send most: a 2026-07-28 `tools/call` carrying only a
 * name, arguments and the per-request envelope, with the standard headers naming the same method,
 * tool and revision. It runs the very call path the SDK's server runs (`HubCalls`: resolve, verdict,
 * limits, schema, sandbox, approval or upstream, audit) and answers the JSON-RPC response that server
 * would send, byte for byte in meaning; what it skips is the SDK's per-request machinery around that
 * call — a web `Request`, a `Server` with its handlers, a per-request transport, zod over the message,
 * a web `Response` — which costs more CPU than the rest of the call together.
 *
 * Anything else goes to the SDK unchanged: other methods, 2025-era traffic, a request that carries a
 * `requestState`, `inputResponses`, a progress token or any key this module does not know, and every
 * malformed request (the SDK owns those error answers). A request is taken only when it is certainly
 * one the SDK would serve, so the two paths can differ in speed only; `test/hub/fast-call.test.ts`
 * sends the same requests both ways and compares the answers.
 */
import type { IncomingHttpHeaders } from 'node:http';
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  isJsonContentType,
  isSpecType,
  PROTOCOL_VERSION_META_KEY,
  ProtocolErrorCode,
  SERVER_INFO_META_KEY,
} from '@modelcontextprotocol/server';
import type { TokenPrincipal } from '../../api/token-auth.js';
import type { EndpointScope } from '../endpoint.js';
import { type HubCalls, pickInputCapabilities } from './calls.js';
import { GATEHOUSE_PREFIX } from './names.js';
import type { HubRegistry } from './view.js';

/** The stateless revision; the fast path serves no other. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

/** An eligible request, read off its headers and body. */
export interface FastCall {
  id: string | number;
  name: string;
  arguments: Record<string, unknown> | undefined;
  /** The client capabilities its envelope declared. */
  capabilities: Record<string, unknown>;
}

type Json = Record<string, unknown>;

const isPlainObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

const BODY_KEYS: ReadonlySet<string> = new Set(['jsonrpc', 'id', 'method', 'params']);
const PARAM_KEYS: ReadonlySet<string> = new Set(['name', 'arguments', '_meta']);
const ENVELOPE_KEYS: ReadonlySet<string> = new Set([
  PROTOCOL_VERSION_META_KEY,
  CLIENT_INFO_META_KEY,
  CLIENT_CAPABILITIES_META_KEY,
]);

function hasOnlyKeys(value: Json, allowed: ReadonlySet<string>): boolean {
  for (const key of Object.keys(value)) if (!allowed.has(key)) return false;
  return true;
}

/** The request as a fast call, or undefined when the SDK must serve it (see the module comment). */
export function fastCallOf(headers: IncomingHttpHeaders, body: unknown): FastCall | undefined {
  if (
    headers['mcp-protocol-version'] !== MODERN_PROTOCOL_VERSION ||
    headers['mcp-method'] !== 'tools/call' ||
    headers['mcp-session-id'] !== undefined ||
    !isJsonContentType(headers['content-type'] ?? null)
  ) {
    return undefined;
  }
  if (!isPlainObject(body) || !hasOnlyKeys(body, BODY_KEYS)) return undefined;
  if (body.jsonrpc !== '2.0' || body.method !== 'tools/call') return undefined;
  const id = body.id;
  if (typeof id !== 'string' && !(typeof id === 'number' && Number.isSafeInteger(id))) return undefined;
  const params = body.params;
  if (!isPlainObject(params) || !hasOnlyKeys(params, PARAM_KEYS)) return undefined;
  const { name, arguments: args, _meta: envelope } = params;
  // The hub's own tools (approval status long-polls) stay on the SDK path.
  if (typeof name !== 'string' || name.length === 0 || name.startsWith(GATEHOUSE_PREFIX)) return undefined;
  if (headers['mcp-name'] !== name) return undefined;
  if (args !== undefined && !isPlainObject(args)) return undefined;
  if (!isPlainObject(envelope) || !hasOnlyKeys(envelope, ENVELOPE_KEYS)) return undefined;
  if (envelope[PROTOCOL_VERSION_META_KEY] !== MODERN_PROTOCOL_VERSION) return undefined;
  const capabilities = envelope[CLIENT_CAPABILITIES_META_KEY];
  if (!isPlainObject(capabilities) || !isSpecType.ClientCapabilities(capabilities)) return undefined;
  const clientInfo = envelope[CLIENT_INFO_META_KEY];
  if (clientInfo !== undefined && !isSpecType.Implementation(clientInfo)) return undefined;
  return { id, name, arguments: args, capabilities };
}

export interface FastCallDeps {
  registry: HubRegistry;
  calls: HubCalls;
  /** Who Gatehouse says it is in every result (`_meta` serverInfo), as the SDK's server stamps it. */
  serverInfo: { name: string; version: string };
}

/**
 * Serves one fast call: the JSON-RPC response the SDK's server would send for it (a result stamped
 * like the SDK's encoder does, or the error it would derive from a thrown one).
 */
export async function serveFastCall(
  deps: FastCallDeps,
  principal: TokenPrincipal,
  scope: EndpointScope,
  call: FastCall,
  signal: AbortSignal,
): Promise<Json> {
  try {
    const snapshot = await deps.registry.snapshot();
    const result = await deps.calls.call(
      principal,
      snapshot,
      scope,
      { name: call.name, arguments: call.arguments },
      { signal },
      pickInputCapabilities(call.capabilities),
    );
    return { result: encodeResult(result as unknown as Json, deps.serverInfo), jsonrpc: '2.0', id: call.id };
  } catch (error) {
    return { jsonrpc: '2.0', id: call.id, error: encodeError(error) };
  }
}

/** The SDK's 2026-07-28 result encoding for `tools/call`: `resultType` defaults to complete; serverInfo joins `_meta`. */
function encodeResult(result: Json, serverInfo: FastCallDeps['serverInfo']): Json {
  const typed = result.resultType === undefined ? { ...result, resultType: 'complete' } : result;
  const meta = typed._meta;
  if (meta === undefined) return { ...typed, _meta: { [SERVER_INFO_META_KEY]: serverInfo } };
  if (!isPlainObject(meta) || meta[SERVER_INFO_META_KEY] !== undefined) return typed;
  return { ...typed, _meta: { ...meta, [SERVER_INFO_META_KEY]: serverInfo } };
}

/** A thrown error as the SDK's protocol layer answers it: its numeric code (else internal error), message and data. */
function encodeError(error: unknown): Json {
  const thrown = (error ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
  let code = Number.isSafeInteger(thrown.code) ? (thrown.code as number) : ProtocolErrorCode.InternalError;
  // The 2026-07-28 codec folds the retired resource-not-found code into invalid params.
  if (code === -32002) code = ProtocolErrorCode.InvalidParams;
  return {
    code,
    message: typeof thrown.message === 'string' ? thrown.message : 'Internal error',
    ...(thrown.data !== undefined ? { data: thrown.data } : {}),
  };
}
