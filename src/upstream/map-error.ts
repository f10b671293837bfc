/**
 * Every failure out of this module is a catalogue error. What the SDK, undici and the egress guard
 * throw is mapped here, and nothing an upstream said (bodies, error messages) is put in a message:
 * the original is kept as `cause` for logs only.
 *
 * - a GatehouseError anywhere in the cause chain (the egress guard's) is returned as is;
 * - refused, reset, DNS, TLS, closed mid-response → `upstream_unreachable`;
 * - timeouts → `upstream_timeout`;
 * - HTTP 401 → `auth_required`; HTTP 403 with `error="insufficient_scope"` → `auth_failed` with reason
 *   `insufficient_scope` and the scope the upstream asked for (the OAuth client asks consent for it);
 * - anything the upstream said that is not usable MCP → `upstream_protocol_error` with a `reason`
 *   (and `status` / `rpcCode` where there is one). A JSON-RPC error answering the request keeps the
 *   upstream's own error as its cause, which the hub alone passes on to the agent, bounded, as that
 *   protocol error (`upstreamRpcErrorOf`).
 */
import {
  InsufficientScopeError,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
} from '@modelcontextprotocol/client';
import { type ErrorDetails, findGatehouseError, GatehouseError } from '../errors.js';

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/;

/** JSON-RPC codes that mean "this request does not fit this server's protocol era" (as a ProtocolError). */
const ERA_RPC_CODES = new Set([-32022, -32600]);

function chain(error: unknown): unknown[] {
  const out: unknown[] = [];
  let current = error;
  while (current !== null && current !== undefined && out.length < 16 && !out.includes(current)) {
    out.push(current);
    current = (current as { cause?: unknown }).cause;
  }
  return out;
}

const codeOf = (error: unknown): unknown => (error as { code?: unknown } | null)?.code;
const nameOf = (error: unknown): string => (error instanceof Error ? error.name : '');
const messageOf = (error: unknown): string => (error instanceof Error ? error.message : '');

/** The JSON-RPC error an HTTP error body carries, if it is one (`answered`: it names a request id). */
function rpcErrorInBody(
  error: SdkHttpError,
): { code: number; message: unknown; data: unknown; answered: boolean } | undefined {
  const text = error.data?.text;
  if (typeof text !== 'string' || text.length > 65_536) return undefined;
  try {
    const body = JSON.parse(text) as {
      id?: unknown;
      error?: { code?: unknown; message?: unknown; data?: unknown };
    } | null;
    const code = body?.error?.code;
    return typeof code === 'number'
      ? {
          code,
          message: body?.error?.message,
          data: body?.error?.data,
          answered: body?.id !== null && body?.id !== undefined,
        }
      : undefined;
  } catch {
    return undefined;
  }
}

/** How much of an upstream's JSON-RPC error is passed on to the agent. */
const UPSTREAM_MESSAGE_MAX = 1_024;
const UPSTREAM_DATA_MAX_BYTES = 8_192;

/**
 * The JSON-RPC error an upstream answered with, bounded, as the hub passes it on to the agent: its code,
 * its message (cut to 1 KB) and its data (dropped when its JSON is over 8 KB).
 */
export interface UpstreamRpcError {
  code: number;
  message: string;
  data?: unknown;
}

function boundedRpcError(code: number, message: unknown, data: unknown): UpstreamRpcError {
  const text = typeof message === 'string' ? message : 'Unknown error';
  const bounded: UpstreamRpcError = {
    code,
    message: text.length > UPSTREAM_MESSAGE_MAX ? `${text.slice(0, UPSTREAM_MESSAGE_MAX)}…` : text,
  };
  if (data !== undefined) {
    let json: string | undefined;
    try {
      json = JSON.stringify(data);
    } catch {
      json = undefined;
    }
    if (json !== undefined && Buffer.byteLength(json, 'utf8') <= UPSTREAM_DATA_MAX_BYTES)
      bounded.data = JSON.parse(json);
  }
  return bounded;
}

/**
 * The upstream's own JSON-RPC error behind an `rpc_error` (read from the error's cause, so catalogue
 * bodies, logs and REST answers never carry it), bounded, for the hub to pass on to the agent as that
 * protocol error. Undefined for any other failure (an era's `-32022` included: it concerns Gatehouse's
 * exchange with the upstream, not the agent's).
 */
export function upstreamRpcErrorOf(error: GatehouseError): UpstreamRpcError | undefined {
  if (error.code !== 'upstream_protocol_error' || error.details?.reason !== 'rpc_error') return undefined;
  for (const link of chain(error.cause)) {
    if (link instanceof ProtocolError) return boundedRpcError(link.code, link.message, link.data);
    if (link instanceof SdkHttpError) {
      const rpc = rpcErrorInBody(link);
      if (rpc?.answered) return boundedRpcError(rpc.code, rpc.message, rpc.data);
    }
  }
  return undefined;
}

/**
 * The JSON-RPC error code an upstream answered a request with: a ProtocolError, or (2026-07-28
 * servers pair some errors with an HTTP status, e.g. 404 for an unknown method) an HTTP error whose
 * body is the JSON-RPC error response to our request.
 */
export function rpcCodeOf(error: unknown): number | undefined {
  if (error instanceof ProtocolError) return error.code;
  if (error instanceof SdkHttpError) {
    const rpc = rpcErrorInBody(error);
    if (rpc?.answered) return rpc.code;
  }
  return undefined;
}

const protocolError = (message: string, details: ErrorDetails, cause: unknown) =>
  new GatehouseError('upstream_protocol_error', message, details, { cause });

function fromHttpStatus(error: SdkHttpError): GatehouseError {
  const status = error.status;
  if (status === 401) return authRequired(error);
  if (status >= 300 && status < 400) {
    const details = { reason: 'redirect_refused', status };
    return protocolError('The upstream answered with a redirect, which is not followed.', details, error);
  }
  const rpc = rpcErrorInBody(error);
  if (rpc?.answered) return fromRpcError(rpc.code, error, status);
  const details = { reason: 'http_status', status, ...(rpc && { rpcCode: rpc.code }) };
  return protocolError(`The upstream answered HTTP ${status}.`, details, error);
}

/** The upstream answered the request with a JSON-RPC error (its own words stay in the cause: `upstreamRpcErrorOf`). */
function fromRpcError(rpcCode: number, cause: unknown, status?: number): GatehouseError {
  const reason = rpcCode === -32022 ? 'unsupported_protocol_version' : 'rpc_error';
  const details = { reason, rpcCode, ...(status !== undefined && { status }) };
  return protocolError('The upstream answered with a JSON-RPC error.', details, cause);
}

/** An upstream HTTP 401: it wants credentials Gatehouse did not send (or not those). */
function authRequired(cause: unknown): GatehouseError {
  return new GatehouseError(
    'auth_required',
    'The upstream requires authorization (HTTP 401).',
    { reason: 'http_status', status: 401 },
    { cause },
  );
}

/** OAuth scope tokens (RFC 6749 §3.3), bounded: what a hostile upstream puts in the header goes no further. */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/;

/** An upstream HTTP 403 `insufficient_scope`: the grant lacks a scope it needs (`scope`: the ones named). */
function insufficientScope(error: InsufficientScopeError): GatehouseError {
  const scope = (error.requiredScope ?? '')
    .split(' ')
    .filter((s) => SCOPE_TOKEN.test(s))
    .slice(0, 32);
  return new GatehouseError(
    'auth_failed',
    'The upstream needs a wider OAuth scope than the grant holds (HTTP 403 insufficient_scope).',
    { reason: 'insufficient_scope', scope: scope.join(' ') },
    { cause: error },
  );
}

/** Maps any failure to the catalogue (see the module comment). */
export function toUpstreamError(error: unknown): GatehouseError {
  const found = findGatehouseError(error);
  if (found) return found;
  const links = chain(error);

  for (const link of links) {
    const code = codeOf(link);
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) {
      return new GatehouseError('upstream_timeout', undefined, { reason: 'network_timeout' }, { cause: error });
    }
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || TLS_CODE.test(code))) {
      const reason = TLS_CODE.test(code) ? 'tls' : 'network';
      return new GatehouseError('upstream_unreachable', undefined, { reason }, { cause: error });
    }
  }
  // undici's generic failures ("fetch failed" before a response, "terminated" mid-body).
  if (links.some((l) => nameOf(l) === 'TypeError' && /^(fetch failed|terminated)$/.test(messageOf(l)))) {
    return new GatehouseError('upstream_unreachable', undefined, { reason: 'network' }, { cause: error });
  }

  if (error instanceof SdkHttpError) return fromHttpStatus(error);
  if (error instanceof ProtocolError) return fromRpcError(error.code, error);
  const scopeError = links.find((l) => l instanceof InsufficientScopeError);
  if (scopeError) return insufficientScope(scopeError as InsufficientScopeError);
  if (error instanceof SdkError) {
    switch (error.code) {
      case SdkErrorCode.RequestTimeout:
        return new GatehouseError('upstream_timeout', undefined, undefined, { cause: error });
      case SdkErrorCode.ConnectionClosed:
      case SdkErrorCode.NotConnected:
      case SdkErrorCode.SendFailed:
        return new GatehouseError('upstream_unreachable', undefined, { reason: 'connection_closed' }, { cause: error });
      case SdkErrorCode.ClientHttpUnexpectedContent:
        return protocolError(
          'The upstream answered with a content type MCP does not use.',
          { reason: 'unexpected_content_type' },
          error,
        );
      case SdkErrorCode.InvalidResult:
        return protocolError(
          'The upstream answered with a result of the wrong shape.',
          { reason: 'invalid_result' },
          error,
        );
      case SdkErrorCode.UnsupportedResultType:
      case SdkErrorCode.InputRequiredRoundsExceeded:
        return protocolError(
          'The upstream asked for client input, which Gatehouse does not provide.',
          { reason: 'input_required' },
          error,
        );
      case SdkErrorCode.EraNegotiationFailed:
        // The probe wraps what really happened (a refused connection, garbage, a 5xx) as its cause.
        if (error.cause !== undefined) return toUpstreamError(error.cause);
        return protocolError(
          'No protocol version could be agreed with the upstream.',
          { reason: 'era_negotiation_failed' },
          error,
        );
      default:
        break;
    }
  }
  if (nameOf(error) === 'UnauthorizedError') return authRequired(error);
  if (error instanceof SyntaxError) {
    return protocolError('The upstream answered with something that is not JSON.', { reason: 'invalid_json' }, error);
  }
  if (nameOf(error) === 'ZodError' || nameOf(error) === '$ZodError') {
    return protocolError(
      'The upstream answered with something that is not a JSON-RPC message.',
      { reason: 'invalid_message' },
      error,
    );
  }
  return protocolError('The upstream exchange failed in an unexpected way.', { reason: 'unexpected' }, error);
}

/** A 2025-era upstream no longer knows the session the request carried (it restarted, or expired it). */
export function isSessionLost(error: unknown, sessionId: string | undefined): boolean {
  return sessionId !== undefined && error instanceof SdkHttpError && error.status === 404;
}

/**
 * The failure an era verdict produces when the server changed era: a modern request to a 2025-era
 * server (refused at HTTP level: 400/404/405/406/415 without a JSON-RPC answer to it), an
 * `initialize` to a modern-only one (-32022), or no modern version left in common.
 */
export function isEraMismatch(error: unknown): boolean {
  if (findGatehouseError(error)) return false;
  if (error instanceof SdkHttpError) {
    const rpc = rpcErrorInBody(error);
    if (rpc?.code === -32022) return true;
    return !rpc?.answered && [400, 404, 405, 406, 415].includes(error.status);
  }
  if (error instanceof ProtocolError) return ERA_RPC_CODES.has(error.code);
  return error instanceof SdkError && error.code === SdkErrorCode.EraNegotiationFailed && error.cause === undefined;
}

/**
 * Whether a connection survives this failure. A JSON-RPC error, a result the SDK rejected, or our own
 * pagination verdict leave the connection sound; anything at transport level (or garbage on the wire,
 * or a response the egress guard cut) retires it.
 */
export function keepsConnection(error: unknown): boolean {
  if (rpcCodeOf(error) !== undefined) return true;
  if (error instanceof SdkError) {
    return [
      SdkErrorCode.InvalidResult,
      SdkErrorCode.UnsupportedResultType,
      SdkErrorCode.InputRequiredRoundsExceeded,
    ].includes(error.code);
  }
  return findGatehouseError(error)?.details?.reason === 'repeated_cursor';
}

/** Errors the SDK reports out of band (`onerror`) that say the connection itself is failing. */
export function isTransportFailure(error: unknown): boolean {
  if (rpcCodeOf(error) !== undefined) return false;
  if (findGatehouseError(error) || error instanceof SdkHttpError || error instanceof SyntaxError) return true;
  if (error instanceof SdkError) {
    return (
      error.code === SdkErrorCode.ClientHttpUnexpectedContent ||
      error.code === SdkErrorCode.ClientHttpFailedToOpenStream
    );
  }
  const name = nameOf(error);
  return (
    name === 'TypeError' ||
    name === 'ZodError' ||
    /^(SSE stream disconnected|Failed to reconnect SSE stream|Maximum reconnection attempts)/.test(messageOf(error))
  );
}
