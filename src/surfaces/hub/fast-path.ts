/**
 * The hub's fast path for the requests agents send most: on the stateless 2026-07-28 revision a plain
 * `tools/call` (a name, arguments and the per-request envelope) and a plain `tools/list` (the envelope
 * alone), with the standard headers naming the same method, tool and revision; inside a 2025-era
 * session a plain `tools/call` (a name and arguments, the session's protocol version).
 *
 * A call runs the very call path the SDK's server runs (`HubCalls`: resolve, verdict, limits,
 * schema, sandbox, approval or upstream, audit); a list is the same `hubToolList`. The answer is the
 * JSON-RPC response that server would send, encoded as its codec for the era encodes results (the
 * endpoint frames it: JSON; in a 2025-era session JSON too when it is ready before the first keep-alive,
 * else one SSE event after keep-alive comments, as the SDK's session transport sends it). What the fast
 * path skips is the SDK's per-request machinery around them — a web `Request`, a `Server` (or the
 * session's transport) with its handlers, zod over the message and the result, a web `Response` — which
 * costs more CPU than the call itself, and for a large aggregate list far more than the list: a list's
 * answer is serialized once per registry snapshot, scope and group set, then reused.
 *
 * Anything else goes to the SDK unchanged: other methods, a request carrying a `requestState`,
 * `inputResponses`, a progress token, a cursor or any key this module does not know, an agent that
 * declared the Tasks extension (its gated calls answer as tasks), a session whose
 * agent can answer input requests (the SDK's legacy shim asks it), and every malformed request (the
 * SDK owns those error answers). A request is taken only when it is certainly one the SDK would
 * serve, so the paths differ in speed (and a 2025 session's quick answer in its framing) only;
 * `test/hub/fast-path.test.ts` sends the same requests both ways and compares the answers.
 */
import type { IncomingHttpHeaders } from 'node:http';
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  isJsonContentType,
  isSpecType,
  LOG_LEVEL_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  ProtocolErrorCode,
  SERVER_INFO_META_KEY,
} from '@modelcontextprotocol/server';
import type { Cancellation } from '../../cancellation.js';
import type { TokenPrincipal } from '../../identity/index.js';
import { isPlainObject, type Json, MODERN_PROTOCOL_VERSION, resultText } from '../../wire.js';
import type { EndpointScope, FastResponse } from '../endpoint.js';
import { declaresTasks } from '../results.js';
import type { SessionView } from '../sessions.js';
import { type CallContext, type HubCalls, pickExtensions, pickInputCapabilities } from './calls.js';
import { sessionLogLevel } from './log-levels.js';
import { GATEHOUSE_PREFIX } from './names.js';
import { callScopeOf, hubIdentity, hubToolPage, type ListView } from './server.js';
import type { HubRegistry, Snapshot } from './view.js';

/** An eligible request, read off its headers and body. */
export type FastRequest =
  | {
      method: 'tools/call';
      /** `modern`: a stateless 2026-07-28 request; `legacy`: a request inside a 2025-era session. */
      era: 'modern' | 'legacy';
      id: string | number;
      name: string;
      arguments: Record<string, unknown> | undefined;
      /** The client capabilities the agent declared (2025 sessions on the fast path declare no input ones). */
      capabilities: Record<string, unknown>;
    }
  | { method: 'tools/list'; era: 'modern'; id: string | number };

const BODY_KEYS: ReadonlySet<string> = new Set(['jsonrpc', 'id', 'method', 'params']);
const CALL_PARAM_KEYS: ReadonlySet<string> = new Set(['name', 'arguments', '_meta']);
const LIST_PARAM_KEYS: ReadonlySet<string> = new Set(['_meta']);
const ENVELOPE_KEYS: ReadonlySet<string> = new Set([
  PROTOCOL_VERSION_META_KEY,
  CLIENT_INFO_META_KEY,
  CLIENT_CAPABILITIES_META_KEY,
]);

function hasOnlyKeys(value: Json, allowed: ReadonlySet<string>): boolean {
  for (const key of Object.keys(value)) if (!allowed.has(key)) return false;
  return true;
}

const CLIENT_INFO_KEYS: ReadonlySet<string> = new Set(['name', 'version', 'title']);

/** `{name, version}` (and a title) of strings: valid on sight; anything richer is checked against the spec's schema. */
function isClientInfo(value: unknown): boolean {
  if (isPlainObject(value) && hasOnlyKeys(value, CLIENT_INFO_KEYS)) {
    const { name, version, title } = value;
    if (typeof name === 'string' && typeof version === 'string' && (title === undefined || typeof title === 'string')) {
      return true;
    }
  }
  return isSpecType.Implementation(value);
}

/** The declared client capabilities of a valid, plain envelope, or undefined. */
function envelopeCapabilities(envelope: unknown): Json | undefined {
  if (!isPlainObject(envelope) || !hasOnlyKeys(envelope, ENVELOPE_KEYS)) return undefined;
  if (envelope[PROTOCOL_VERSION_META_KEY] !== MODERN_PROTOCOL_VERSION) return undefined;
  const capabilities = envelope[CLIENT_CAPABILITIES_META_KEY];
  if (!isPlainObject(capabilities)) return undefined;
  // Most agents declare none; declared ones are checked against the spec's schema.
  if (Object.keys(capabilities).length > 0 && !isSpecType.ClientCapabilities(capabilities)) return undefined;
  const clientInfo = envelope[CLIENT_INFO_META_KEY];
  if (clientInfo !== undefined && !isClientInfo(clientInfo)) return undefined;
  return capabilities;
}

/** A request id the SDK's schema accepts: a string or an integer. */
const isRequestId = (id: unknown): id is string | number =>
  typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));

const LEGACY_CALL_PARAM_KEYS: ReadonlySet<string> = new Set(['name', 'arguments']);
const INPUT_CAPABILITIES = ['elicitation', 'sampling', 'roots'];

/**
 * A `tools/call` inside a 2025-era session, as a fast request: the plain shape (no `_meta`, so no
 * progress token), the session's own protocol version, an agent that accepts both answer types, and a
 * session whose client declared no input capabilities — an upstream's input request would need the
 * SDK's legacy shim to turn it into requests to the agent, so such sessions stay on the SDK path.
 */
function legacyCallOf(headers: IncomingHttpHeaders, body: unknown, session: SessionView): FastRequest | undefined {
  const version = session.server.getNegotiatedProtocolVersion();
  const accept = headers.accept ?? '';
  if (
    version === undefined ||
    headers['mcp-protocol-version'] !== version ||
    !accept.includes('application/json') ||
    !accept.includes('text/event-stream') ||
    !isJsonContentType(headers['content-type'] ?? null)
  ) {
    return undefined;
  }
  if (!isPlainObject(body) || !hasOnlyKeys(body, BODY_KEYS)) return undefined;
  if (body.jsonrpc !== '2.0' || body.method !== 'tools/call' || !isRequestId(body.id)) return undefined;
  const params = body.params;
  if (!isPlainObject(params) || !hasOnlyKeys(params, LEGACY_CALL_PARAM_KEYS)) return undefined;
  const { name, arguments: args } = params;
  if (typeof name !== 'string' || name.length === 0 || name.startsWith(GATEHOUSE_PREFIX)) return undefined;
  if (args !== undefined && !isPlainObject(args)) return undefined;
  // The standard headers are 2026-07-28's; a 2025 client that sends them anyway must not contradict the body.
  if (headers['mcp-method'] !== undefined && headers['mcp-method'] !== 'tools/call') return undefined;
  if (headers['mcp-name'] !== undefined && headers['mcp-name'] !== name) return undefined;
  const capabilities = (session.server.getClientCapabilities() ?? {}) as Json;
  if (INPUT_CAPABILITIES.some((key) => capabilities[key] !== undefined)) return undefined;
  // An agent of the Tasks extension gets a gated call (or an upstream's) as a task: the SDK path answers it.
  if (declaresTasks(capabilities)) return undefined;
  // A session that set a logging level hears its calls' upstream logs: the SDK path relays them.
  if (sessionLogLevel(session.server) !== undefined) return undefined;
  // Its extensions still pass on to a 2026-07-28 upstream (MCP Apps); it has no input capabilities here.
  const extensions = capabilities.extensions === undefined ? {} : { extensions: capabilities.extensions };
  return { method: 'tools/call', era: 'legacy', id: body.id, name, arguments: args, capabilities: extensions };
}

/**
 * The request as a fast request, or undefined when the SDK must serve it (see the module comment).
 * `session` is the live 2025-era session the request names (and its token opened), if any.
 */
export function fastRequestOf(
  headers: IncomingHttpHeaders,
  body: unknown,
  session?: SessionView,
): FastRequest | undefined {
  if (session) return legacyCallOf(headers, body, session);
  const method = headers['mcp-method'];
  if (
    (method !== 'tools/call' && method !== 'tools/list') ||
    headers['mcp-protocol-version'] !== MODERN_PROTOCOL_VERSION ||
    headers['mcp-session-id'] !== undefined ||
    !isJsonContentType(headers['content-type'] ?? null)
  ) {
    return undefined;
  }
  if (!isPlainObject(body) || !hasOnlyKeys(body, BODY_KEYS)) return undefined;
  if (body.jsonrpc !== '2.0' || body.method !== method) return undefined;
  const id = body.id;
  if (!isRequestId(id)) return undefined;
  const params = body.params;
  if (!isPlainObject(params)) return undefined;
  const capabilities = envelopeCapabilities(params._meta);
  if (!capabilities) return undefined;

  if (method === 'tools/list') {
    // A cursor asks for a later page: the SDK path serves those (the first page is served here).
    if (!hasOnlyKeys(params, LIST_PARAM_KEYS) || headers['mcp-name'] !== undefined) return undefined;
    return { method, era: 'modern', id };
  }
  if (!hasOnlyKeys(params, CALL_PARAM_KEYS)) return undefined;
  // A request that asks for log messages hears its upstream's: the SDK path relays them.
  if (isPlainObject(params._meta) && params._meta[LOG_LEVEL_META_KEY] !== undefined) return undefined;
  const { name, arguments: args } = params;
  // The hub's own tools (approval status long-polls) stay on the SDK path.
  if (typeof name !== 'string' || name.length === 0 || name.startsWith(GATEHOUSE_PREFIX)) return undefined;
  if (headers['mcp-name'] !== name) return undefined;
  if (args !== undefined && !isPlainObject(args)) return undefined;
  if (declaresTasks(capabilities)) return undefined;
  return { method, era: 'modern', id, name, arguments: args, capabilities };
}

export interface FastPathDeps {
  registry: HubRegistry;
  calls: HubCalls;
  /**
   * Who Gatehouse says it is in every result (`_meta` serverInfo), as the SDK's server stamps it; on
   * `/mcp/s/{server}` the upstream's own (`hubIdentity`).
   */
  serverInfo: { name: string; version: string };
  /** Most tools in one page (a request with a cursor, for the next pages, goes to the SDK path). */
  listPageSize: number;
  /** The agent's tool view on this scope (`server.ts`): a search or toolset view lists its own tools. */
  listViewOf(principal: TokenPrincipal, scope: EndpointScope): Promise<ListView>;
}

/** Serialized list results per snapshot; a few group sets each (a snapshot lives until the registry changes). */
const listCache = new WeakMap<Snapshot, Map<string, Buffer>>();
const MAX_CACHED_LISTS = 16;

const RESULT_OPENING = Buffer.from('{"result":');

/** Serves one fast request: the JSON bytes of the JSON-RPC response the SDK's server would send. */
export async function serveFastRequest(
  deps: FastPathDeps,
  principal: TokenPrincipal,
  scope: EndpointScope,
  request: FastRequest,
  signal: Cancellation,
): Promise<FastResponse> {
  const id = JSON.stringify(request.id);
  const ok = (body: Buffer) => ({ body, status: 200 });
  try {
    const snapshot = await deps.registry.snapshot();
    const { serverInfo } = hubIdentity(snapshot, principal.groups, scope);
    if (request.method === 'tools/list') {
      const listView = await deps.listViewOf(principal, scope);
      if (listView.view.kind !== 'all') {
        // A short list (meta-tools, recent tools): encoded per request, never cached across agents.
        const page = hubToolPage(snapshot, principal.groups, scope, undefined, deps.listPageSize, listView);
        const result = { ...page, resultType: 'complete', ttlMs: 0, cacheScope: 'private' };
        return ok(
          Buffer.from(
            `{"result":${asciiJson(JSON.stringify(encodeResult(result, serverInfo)))},"jsonrpc":"2.0","id":${id}}`,
          ),
        );
      }
      // The encoded list is reused as bytes: only the id around it is new.
      const list = encodedList(deps, serverInfo, snapshot, principal.groups, scope);
      return ok(Buffer.concat([RESULT_OPENING, list, Buffer.from(`,"jsonrpc":"2.0","id":${id}}`)]));
    }
    // On `/mcp`, a toolset view calls only the toolset's tools (as the SDK path does).
    const callScope = scope.kind === 'aggregate' ? callScopeOf(scope, await deps.listViewOf(principal, scope)) : scope;
    const result = await deps.calls.call(
      principal,
      snapshot,
      callScope,
      { name: request.name, arguments: request.arguments },
      fastContext(signal, request.capabilities),
      pickInputCapabilities(request.capabilities),
    );
    // The 2025 codec sends a tools/call result as it is; the 2026-07-28 one types and stamps it.
    const encoded =
      request.era === 'legacy' ? resultText(result) : encodedResultText(result as unknown as Json, serverInfo);
    return ok(Buffer.from(`{"result":${encoded},"jsonrpc":"2.0","id":${id}}`));
  } catch (error) {
    const encoded = encodeError(error);
    // As the SDK's per-request transport answers a handler's error: in-band on 200, except the one code
    // the spec gives a status of its own wherever it comes from (-32021, missing client capability: 400).
    const status =
      request.era === 'modern' && encoded.code === ProtocolErrorCode.MissingRequiredClientCapability ? 400 : 200;
    return { body: Buffer.from(`{"jsonrpc":"2.0","id":${id},"error":${JSON.stringify(encoded)}}`), status };
  }
}

function encodedList(
  deps: FastPathDeps,
  serverInfo: FastPathDeps['serverInfo'],
  snapshot: Snapshot,
  groups: readonly string[],
  scope: EndpointScope,
) {
  const where = scope.kind === 'single' ? `s:${scope.serverId}` : scope.kind === 'toolset' ? `t:${scope.toolset}` : 'a';
  const key = `${where}|${[...groups].sort().join(',')}`;
  let lists = listCache.get(snapshot);
  if (!lists) {
    lists = new Map();
    listCache.set(snapshot, lists);
  }
  let encoded = lists.get(key);
  if (encoded === undefined) {
    // tools/list is cacheable on 2026-07-28: the codec fills ttlMs and cacheScope (nothing cached by default).
    const result = {
      ...hubToolPage(snapshot, groups, scope, undefined, deps.listPageSize),
      resultType: 'complete',
      ttlMs: 0,
      cacheScope: 'private',
    };
    encoded = Buffer.from(asciiJson(JSON.stringify(encodeResult(result, serverInfo))));
    if (lists.size >= MAX_CACHED_LISTS) lists.clear();
    lists.set(key, encoded);
  }
  return encoded;
}

const NON_ASCII = /[\u0080-\uffff]/g;

/**
 * JSON text with every non-ASCII character written as its `\u` escape: the same value, but bytes an
 * agent decodes on the ASCII fast path. One curly quote in a 3.5 MB list otherwise makes the agent's
 * runtime decode and parse the whole answer as two-byte text, several times slower.
 */
function asciiJson(text: string): string {
  return text.replace(NON_ASCII, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The SDK's 2026-07-28 result encoding: `resultType` defaults to complete; serverInfo joins `_meta`. */
function encodeResult(result: Json, serverInfo: FastPathDeps['serverInfo']): Json {
  const meta = result._meta;
  const stamped =
    meta === undefined
      ? { [SERVER_INFO_META_KEY]: serverInfo }
      : isPlainObject(meta) && meta[SERVER_INFO_META_KEY] === undefined
        ? { ...meta, [SERVER_INFO_META_KEY]: serverInfo }
        : meta;
  // One copy of the result at most (every call's answer goes through here); keys keep their places.
  if (result.resultType !== undefined) return stamped === meta ? result : { ...result, _meta: stamped };
  return { ...result, resultType: 'complete', _meta: stamped };
}

/** The JSON text `encodeResult` adds at the end of a result with neither `resultType` nor `_meta`, per serverInfo. */
const stampTexts = new WeakMap<FastPathDeps['serverInfo'], string>();

/**
 * `JSON.stringify(encodeResult(result, serverInfo))` for a call's result. The common result (neither `resultType`
 * nor `_meta`) gets the two keys appended to its own text, the place `encodeResult`'s copy gives them; copying
 * an object with a spread and two more keys costs several times its serialization.
 */
function encodedResultText(result: Json, serverInfo: FastPathDeps['serverInfo']): string {
  if (result.resultType !== undefined || result._meta !== undefined) {
    return JSON.stringify(encodeResult(result, serverInfo));
  }
  let stamp = stampTexts.get(serverInfo);
  if (stamp === undefined) {
    stamp = `"resultType":"complete","_meta":${JSON.stringify({ [SERVER_INFO_META_KEY]: serverInfo })}}`;
    stampTexts.set(serverInfo, stamp);
  }
  // The audit row has measured the result by this very text.
  const text = resultText(result);
  return text === '{}' ? `{${stamp}` : `${text.slice(0, -1)},${stamp}`;
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

/** A fast call's context: its signal, and the extensions the agent declared that pass on (MCP Apps). */
function fastContext(signal: Cancellation, capabilities: Record<string, unknown>): CallContext {
  const extensions = pickExtensions(capabilities);
  return extensions ? { signal, extensions } : { signal };
}
