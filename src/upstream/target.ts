/**
 * Turns an `UpstreamTarget` into what the pool keys on and sends: a normalized URL, lower-cased
 * headers, and the pool key, so headers of one key can never be sent on another key's connection.
 */
import { createHash } from 'node:crypto';
import { type ValidationIssue, validationError } from '../errors.js';
import type { UpstreamTarget, UpstreamTransport } from './types.js';

export interface NormalizedTarget {
  /** `new URL(url).href` */
  url: string;
  /** Header names lower-cased; values verbatim. */
  headers: Record<string, string>;
  /** SHA-256 (hex) of the URL, the headers sorted by name and (when `sse`) the transport: the pool key. */
  key: string;
  transport: UpstreamTransport;
  /**
   * The 2025-era twin of a dual-era upstream's target (its own pool key): connected at 2025 whatever
   * the upstream also speaks, so a call of an agent that can be asked lets the upstream ask (`asks.ts`).
   */
  forAsks?: true;
  /** `UpstreamTarget.owner`. */
  owner?: string;
}

/** Headers the MCP transport or HTTP itself owns; a caller's value would corrupt or hijack the exchange. */
const RESERVED_HEADERS = new Set([
  'accept',
  'connection',
  'content-length',
  'content-type',
  'expect',
  'host',
  'keep-alive',
  'last-event-id',
  'mcp-method',
  'mcp-name',
  'mcp-protocol-version',
  'mcp-session-id',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Field values: visible ASCII, spaces, tabs and obs-text; never CR, LF or NUL.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Validates and normalizes a target; problems are `validation_error` naming the field, never a value. */
export function normalizeTarget(target: UpstreamTarget): NormalizedTarget {
  const issues: ValidationIssue[] = [];
  let url = '';
  try {
    url = new URL(target.url).href;
  } catch {
    issues.push({ path: 'url', message: 'must be an absolute URL' });
  }
  // Null prototype: a header named `__proto__` is just a header.
  const headers: Record<string, string> = Object.create(null);
  for (const [rawName, value] of Object.entries(target.headers ?? {})) {
    const name = rawName.toLowerCase();
    const path = `headers.${rawName}`;
    if (!TOKEN.test(rawName)) issues.push({ path, message: 'is not a valid header name' });
    else if (RESERVED_HEADERS.has(name)) issues.push({ path, message: 'is managed by the MCP transport' });
    else if (typeof value !== 'string' || !FIELD_VALUE.test(value)) {
      issues.push({ path, message: 'must be a string without control characters' });
    } else if (Object.hasOwn(headers, name))
      issues.push({ path, message: 'is given twice (names are case-insensitive)' });
    else headers[name] = value;
  }
  if (issues.length > 0) throw validationError(issues, 'The upstream target is invalid.');
  const sorted = Object.keys(headers)
    .sort()
    .map((name) => [name, headers[name]]);
  const transport = target.transport ?? 'streamable-http';
  if (transport !== 'streamable-http' && transport !== 'sse') {
    throw validationError(
      [{ path: 'transport', message: 'must be streamable-http or sse' }],
      'The upstream target is invalid.',
    );
  }
  // The same URL spoken over the other transport is another connection (Streamable HTTP keys are unchanged).
  const keyed = transport === 'sse' ? [url, sorted, transport] : [url, sorted];
  const key = createHash('sha256').update(JSON.stringify(keyed)).digest('hex');
  return { url, headers, key, transport, ...(target.owner !== undefined ? { owner: target.owner } : {}) };
}
