/**
 * `Mcp-Param-{Name}` headers (SEP-2243, 2026-07-28 Streamable HTTP): a tool's `inputSchema` may mark a
 * primitive argument with `"x-mcp-header": "Name"`, and a client then mirrors that argument's value into
 * an `Mcp-Param-Name` header of the `tools/call` POST, so a gateway or load balancer can route on it
 * without reading the body. A server checks that each such header agrees with the body.
 *
 * Gatehouse is on both sides: it checks the headers agents send to the hub (a mismatch is HTTP 400 with
 * JSON-RPC `-32020` HeaderMismatch, as the SDK's server answers it) and sends them on the calls it makes
 * to 2026-07-28 upstreams. The rules are the SDK v2's (`core-internal/src/shared/mcpParamHeaders.ts`,
 * not exported): the declaration scan and its static-reachability rule, the value conversion, and the
 * `=?base64?…?=` sentinel for values that are not a safe plain-ASCII field value.
 */
import { isPlainObject } from '../wire.js';

export const MCP_PARAM_HEADER_PREFIX = 'Mcp-Param-';
/** JSON-RPC HeaderMismatch: the headers and the body of a 2026-07-28 request disagree (sent with HTTP 400). */
export const HEADER_MISMATCH_CODE = -32020;

const X_MCP_HEADER = 'x-mcp-header';
/** RFC 9110 `token` (`1*tchar`). */
const RFC9110_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PERMITTED_TYPES: ReadonlySet<string> = new Set(['string', 'integer', 'boolean']);
/** Positions a `properties` chain may not pass through: an annotation under one makes the tool invalid. */
const UNREACHABLE_KEYWORDS = [
  'items',
  'prefixItems',
  'contains',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'propertyNames',
  'patternProperties',
  'dependentSchemas',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
  '$defs',
  'definitions',
] as const;
const OBJECT_VALUED: ReadonlySet<string> = new Set(['patternProperties', 'dependentSchemas', '$defs', 'definitions']);
const BASE64_PREFIX = '=?base64?';
const BASE64_SUFFIX = '?=';
const BASE64_CANONICAL = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const CANONICAL_DECIMAL = /^-?\d+(\.\d+)?$/;
/** Deeper schemas are not walked (Gatehouse refuses schemas over 32 levels anyway, `policy/pins.ts`). */
const MAX_DEPTH = 64;

export interface ParamDeclaration {
  /** The argument's path through `properties` (`["region"]`, or deeper for nested objects). */
  path: string[];
  headerName: string;
  type: string;
}

/**
 * The `x-mcp-header` declarations of a tool's input schema: `valid` false (with the reason) when one breaks
 * a rule the spec sets — then a client sends no headers; `declarations` is still given when the only fault
 * is a `number`-typed one, which a server still checks (as the SDK does).
 */
export type ParamScan =
  | { valid: true; declarations: ParamDeclaration[] }
  | { valid: false; reason: string; declarations?: ParamDeclaration[] };

const NO_DECLARATIONS: ParamScan = Object.freeze({ valid: true, declarations: [] }) as ParamScan;
const scans = new WeakMap<object, ParamScan>();

export function scanParamHeaders(inputSchema: unknown): ParamScan {
  if (!isPlainObject(inputSchema)) return NO_DECLARATIONS;
  const known = scans.get(inputSchema);
  if (known) return known;
  const scan = scanUncached(inputSchema);
  scans.set(inputSchema, scan);
  return scan;
}

function scanUncached(inputSchema: Record<string, unknown>): ParamScan {
  // Most schemas declare nothing: one look at the serialized text spares the walk.
  if (!JSON.stringify(inputSchema).includes(`"${X_MCP_HEADER}"`)) return NO_DECLARATIONS;
  const declarations: ParamDeclaration[] = [];
  const seen = new Map<string, string>();
  let numberFault: string | undefined;
  const where = (path: readonly string[]) => (path.length === 0 ? '<root>' : path.join('.'));
  const visit = (node: unknown, path: string[], reachable: boolean): string | undefined => {
    if (!isPlainObject(node) || path.length > MAX_DEPTH) return undefined;
    if (X_MCP_HEADER in node) {
      if (!reachable || path.length === 0)
        return `${where(path)}: x-mcp-header is only permitted on properties reachable through 'properties' alone`;
      const raw = node[X_MCP_HEADER];
      if (typeof raw !== 'string' || raw.length === 0) return `${where(path)}: x-mcp-header must be a non-empty string`;
      if (!RFC9110_TOKEN.test(raw)) return `${where(path)}: x-mcp-header '${raw}' is not an RFC 9110 token`;
      const type = typeof node.type === 'string' ? node.type : undefined;
      if (type === undefined || !PERMITTED_TYPES.has(type)) {
        const fault = `${where(path)}: x-mcp-header is only permitted on string, integer or boolean properties`;
        if (type !== 'number') return fault;
        numberFault ??= fault;
      }
      const lower = raw.toLowerCase();
      const prior = seen.get(lower);
      if (prior !== undefined) return `x-mcp-header '${raw}' is not unique (also '${prior}')`;
      seen.set(lower, raw);
      declarations.push({ path, headerName: raw, type: type ?? 'number' });
    }
    if (isPlainObject(node.properties)) {
      for (const [key, child] of Object.entries(node.properties)) {
        const fault = visit(child, [...path, key], reachable);
        if (fault !== undefined) return fault;
      }
    }
    for (const keyword of UNREACHABLE_KEYWORDS) {
      const sub = node[keyword];
      if (sub === undefined) continue;
      const branches = Array.isArray(sub)
        ? sub
        : isPlainObject(sub) && OBJECT_VALUED.has(keyword)
          ? Object.values(sub)
          : [sub];
      for (const branch of branches) {
        const fault = visit(branch, [...path, `<${keyword}>`], false);
        if (fault !== undefined) return fault;
      }
    }
    return undefined;
  };
  const fault = visit(inputSchema, [], true);
  if (fault !== undefined) return { valid: false, reason: numberFault ?? fault };
  return numberFault === undefined
    ? { valid: true, declarations }
    : { valid: false, reason: numberFault, declarations };
}

/** A primitive argument as a header's text: strings as they are, numbers in decimal, booleans lower-case. */
function primitiveText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value))) return undefined;
    return String(value);
  }
  return undefined;
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let node = root;
  for (const key of path) {
    if (!isPlainObject(node)) return undefined;
    node = node[key];
  }
  return node;
}

/** Whether a text cannot travel as a plain field value: empty, padded, non-ASCII, or looking like the sentinel. */
function needsBase64(text: string): boolean {
  if (text.length === 0 || text !== text.trim()) return true;
  if (text.startsWith(BASE64_PREFIX) && text.endsWith(BASE64_SUFFIX)) return true;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 9 && (c < 32 || c > 126)) return true;
  }
  return false;
}

export function encodeParamValue(text: string): string {
  return needsBase64(text) ? `${BASE64_PREFIX}${Buffer.from(text, 'utf8').toString('base64')}${BASE64_SUFFIX}` : text;
}

/** A header's value decoded (the sentinel's payload as UTF-8), or undefined for a sentinel that is not canonical. */
export function decodeParamValue(value: string): string | undefined {
  if (!(value.startsWith(BASE64_PREFIX) && value.endsWith(BASE64_SUFFIX))) return value;
  const payload = value.slice(BASE64_PREFIX.length, value.length - BASE64_SUFFIX.length);
  if (!BASE64_CANONICAL.test(payload)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(payload, 'base64'));
  } catch {
    return undefined;
  }
}

/**
 * The `Mcp-Param-*` headers a client sends with a call of a tool with this input schema, named as the SDK
 * client names them (`Mcp-Param-{x-mcp-header}`, so the two merge key for key): none for an invalid schema,
 * none for a null or absent argument, none for a value that is not a primitive.
 */
export function paramHeadersFor(
  inputSchema: unknown,
  args: Record<string, unknown> | undefined,
): Record<string, string> {
  const scan = scanParamHeaders(inputSchema);
  const headers: Record<string, string> = {};
  if (!scan.valid || scan.declarations.length === 0) return headers;
  for (const declaration of scan.declarations) {
    const text = primitiveText(valueAt(args, declaration.path));
    if (text === undefined) continue;
    headers[`${MCP_PARAM_HEADER_PREFIX}${declaration.headerName}`] = encodeParamValue(text);
  }
  return headers;
}

/** Why a call's `Mcp-Param-*` headers disagree with its body: what the agent is answered with. */
export interface ParamMismatch {
  cell: 'param-header-missing' | 'param-header-invalid-encoding' | 'param-header-mismatch';
  header: string;
  message: string;
}

/**
 * Checks a call's `Mcp-Param-*` headers against its arguments, as a server must: for each declared argument
 * the body carries (not null), the header must be present and decode to the same value (integers compared as
 * numbers). A header whose argument is absent is ignored. `header(name)` reads a request header (any case).
 */
export function checkParamHeaders(
  inputSchema: unknown,
  args: unknown,
  header: (lowerCaseName: string) => string | undefined,
): ParamMismatch | undefined {
  const { declarations } = scanParamHeaders(inputSchema);
  if (!declarations || declarations.length === 0) return undefined;
  for (const declaration of declarations) {
    const name = `${MCP_PARAM_HEADER_PREFIX}${declaration.headerName}`;
    const body = valueAt(args, declaration.path);
    if (body === undefined || body === null) continue;
    const bodyText = primitiveText(body);
    if (bodyText === undefined) continue;
    const where = declaration.path.join('.');
    const sent = header(name.toLowerCase());
    if (sent === undefined) {
      return {
        cell: 'param-header-missing',
        header: name,
        message: `the body carries ${where}=${JSON.stringify(body)} but the ${name} header is absent`,
      };
    }
    // Field parsing drops the whitespace around a value (RFC 9110 §5.5).
    const decoded = decodeParamValue(sent.trim());
    if (decoded === undefined) {
      return {
        cell: 'param-header-invalid-encoding',
        header: name,
        message: `the ${name} header carries an invalid Base64 sentinel value`,
      };
    }
    const numeric = (declaration.type === 'integer' || declaration.type === 'number') && typeof body === 'number';
    const equal = numeric && CANONICAL_DECIMAL.test(decoded) ? Number(decoded) === body : decoded === bodyText;
    if (!equal) {
      return {
        cell: 'param-header-mismatch',
        header: name,
        message: `the ${name} header decodes to ${JSON.stringify(decoded)} but the body carries ${where}=${JSON.stringify(body)}`,
      };
    }
  }
  return undefined;
}

/** The JSON-RPC error a mismatch is answered with (HTTP 400), shaped as the SDK's server shapes it. */
export function mismatchResponse(id: unknown, mismatch: ParamMismatch): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: typeof id === 'string' || typeof id === 'number' ? id : null,
    error: {
      code: HEADER_MISMATCH_CODE,
      message: `Bad Request: the request headers and body disagree: ${mismatch.message}`,
      data: { mismatch: { header: mismatch.header, body: mismatch.message } },
    },
  };
}
