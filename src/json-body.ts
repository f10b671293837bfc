/**
 * The JSON body parser of every route, and how an MCP endpoint refuses a body it cannot take.
 *
 * Keys that poison prototypes (`__proto__`, or `constructor` holding `prototype`) are refused anywhere in
 * a body, as Fastify's own parser refuses them; but that parser then says the body "is not valid JSON",
 * which is false and sends an agent looking for a syntax error. Here each refusal says what it is.
 */
import type { FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { GatehouseError } from './errors.js';

const POISON_CHECKS = { protoAction: 'error', constructorAction: 'error' } as const;

/**
 * Deepest nesting of arrays and objects a body may have. Far past any real request, and far short of the
 * depth (a few thousand) at which the recursive code every body meets later — JSON.stringify, schema
 * validation — overflows the stack: such a body is refused here, in words, instead of failing there.
 */
export const MAX_BODY_DEPTH = 512;

export type BodyRefusalReason = 'empty_body' | 'invalid_json' | 'forbidden_key' | 'too_deep';

function bodyError(reason: BodyRefusalReason, message: string): GatehouseError {
  return new GatehouseError('validation_error', message, { issues: [{ path: 'body', message }], reason });
}

/** A Fastify content-type parser (`parseAs: 'string'`) for `application/json`. */
export function parseJsonBody(
  _request: FastifyRequest,
  body: string | Buffer,
  done: (error: Error | null, value?: unknown) => void,
): void {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.length === 0) {
    done(bodyError('empty_body', 'The body is empty.'));
    return;
  }
  if (text.length > MAX_BODY_DEPTH && nestingDepth(text) > MAX_BODY_DEPTH) {
    done(bodyError('too_deep', `The body nests arrays and objects deeper than ${MAX_BODY_DEPTH} levels.`));
    return;
  }
  let value: unknown;
  try {
    value = secureJson.parse(text, undefined, POISON_CHECKS);
  } catch {
    // Off the common path: bad JSON, or good JSON with a poisoning key.
    done(isJson(text) ? forbiddenKey() : bodyError('invalid_json', 'The body is not valid JSON.'));
    return;
  }
  done(null, value);
}

/** The deepest nesting of `{` and `[` outside strings (a text shorter than the limit cannot pass it: not scanned). */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      // A backslash escapes the next character.
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return deepest;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    return true;
  } catch {
    return false;
  }
}

function forbiddenKey(): GatehouseError {
  return bodyError(
    'forbidden_key',
    'The body has a key named "__proto__", or a "constructor" key holding "prototype": Gatehouse refuses both ' +
      'anywhere in a request (they poison prototypes).',
  );
}

/** A JSON-RPC error answer with no id (the body was never read as a request). */
export interface McpBodyRefusal {
  jsonrpc: '2.0';
  error: { code: number; message: string; data: { code: string; reason?: string } };
  id: null;
}

/**
 * How an MCP endpoint answers a body it refused before reading it as JSON-RPC (unparsable, poisoning, too
 * large, not JSON): with the HTTP status of the refusal and a JSON-RPC error, the codes and words the SDK's
 * transport uses (-32700 parse error, -32000 for the transport's own refusals); undefined for any other error.
 */
export function mcpBodyRefusal(error: GatehouseError): McpBodyRefusal | undefined {
  const reason = typeof error.details?.reason === 'string' ? error.details.reason : undefined;
  const answer = (code: number, message: string): McpBodyRefusal => ({
    jsonrpc: '2.0',
    error: { code, message, data: { code: error.code, ...(reason ? { reason } : {}) } },
    id: null,
  });
  if (error.code === 'validation_error') {
    if (reason === 'empty_body' || reason === 'invalid_json') {
      return answer(-32700, 'Parse error: the request body is not valid JSON');
    }
    if (reason === 'forbidden_key' || reason === 'too_deep') return answer(-32600, `Invalid Request: ${error.message}`);
    return undefined;
  }
  if (error.code === 'unsupported_media_type') {
    return answer(-32000, 'Unsupported Media Type: Content-Type must be application/json');
  }
  if (error.code === 'payload_too_large') return answer(-32000, `Payload too large: ${error.message}`);
  return undefined;
}
