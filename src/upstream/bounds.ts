/**
 * Response bounds: what an upstream may hand back through Gatehouse, whatever it sends.
 *
 * Pure functions over already-parsed values. The raw byte cap (16 MB while the response streams)
 * is the egress fetch's job; these bounds apply below it, so a 10 MB string is cut, not failed.
 */
import type { ContentBlock, Tool } from '@modelcontextprotocol/client';

export interface BoundLimits {
  /** Content blocks kept; later ones are dropped. */
  maxBlocks: number;
  /** Longest string kept anywhere in a result or tool (UTF-16 code units, never splitting a pair). */
  maxStringChars: number;
  /** Serialized (UTF-8 JSON) ceiling of a whole result or tool list. */
  maxSerializedBytes: number;
  /** Deepest nesting kept; anything deeper becomes `null` (keeps every walk far from the stack limit). */
  maxDepth: number;
}

export const DEFAULT_BOUNDS: Readonly<BoundLimits> = Object.freeze({
  maxBlocks: 100,
  maxStringChars: 200_000,
  maxSerializedBytes: 5 * 1024 * 1024,
  maxDepth: 100,
});

export interface BoundedCallResult {
  isError: boolean;
  content: ContentBlock[];
  structuredContent?: unknown;
  _meta?: Record<string, unknown>;
  /** Present when anything was cut: a string, a block, a field, or nesting. */
  truncated?: true;
}

/** The loose shape `boundCallResult` accepts: whatever a `tools/call` result parsed into. */
export interface CallToolResultLike {
  content?: unknown;
  isError?: unknown;
  structuredContent?: unknown;
  _meta?: unknown;
}

/** Tool fields passed through from an upstream's `tools/list`; anything else is dropped. */
const TOOL_FIELDS = [
  'name',
  'title',
  'description',
  'inputSchema',
  'outputSchema',
  'annotations',
  '_meta',
  'icons',
  'execution',
] as const;

interface Walk {
  limits: BoundLimits;
  truncated: boolean;
}

function limitsOf(limits: Partial<BoundLimits> | undefined): BoundLimits {
  return limits ? { ...DEFAULT_BOUNDS, ...limits } : DEFAULT_BOUNDS;
}

function truncateString(value: string, walk: Walk): string {
  const max = walk.limits.maxStringChars;
  if (value.length <= max) return value;
  walk.truncated = true;
  // Do not leave half a surrogate pair at the cut.
  const code = value.charCodeAt(max - 1);
  return value.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}

/** Sets an own property, `__proto__` included, without touching the prototype. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

/** Returns `value` with every string bounded; copies only what changed. */
function boundValue(value: unknown, depth: number, walk: Walk): unknown {
  if (typeof value === 'string') return truncateString(value, walk);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= walk.limits.maxDepth) {
    walk.truncated = true;
    return null;
  }
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item = boundValue(value[i], depth + 1, walk);
      if (item !== value[i] && !out) out = value.slice(0, i);
      out?.push(item);
    }
    return out ?? value;
  }
  let out: Record<string, unknown> | undefined;
  const entries = Object.entries(value);
  for (let i = 0; i < entries.length; i++) {
    const [key, item] = entries[i]!;
    const bounded = boundValue(item, depth + 1, walk);
    if (bounded !== item && !out) {
      out = {};
      for (let j = 0; j < i; j++) setOwn(out, entries[j]![0], entries[j]![1]);
    }
    if (out) setOwn(out, key, bounded);
  }
  return out ?? value;
}

/** Bounds every string (and the nesting depth) of any JSON value. */
export function boundStrings<T>(value: T, limits?: Partial<BoundLimits>): { value: T; truncated: boolean } {
  const walk: Walk = { limits: limitsOf(limits), truncated: false };
  return { value: boundValue(value, 0, walk) as T, truncated: walk.truncated };
}

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
/** What `"truncated":true` adds to a serialized result (the ceiling counts it whether or not it is set). */
const TRUNCATED_MARK_BYTES = Buffer.byteLength(',"truncated":true');

/**
 * Bounds a `tools/call` result: at most `maxBlocks` blocks, every string anywhere cut at
 * `maxStringChars`, then the serialized ceiling, met by dropping trailing blocks first, then
 * `structuredContent`, then `_meta`. `truncated: true` says something was cut.
 */
export function boundCallResult(result: CallToolResultLike, limits?: Partial<BoundLimits>): BoundedCallResult {
  const walk: Walk = { limits: limitsOf(limits), truncated: false };
  const { maxBlocks, maxSerializedBytes } = walk.limits;
  const raw = Array.isArray(result.content) ? result.content : [];
  if (raw.length > maxBlocks) walk.truncated = true;
  const out: BoundedCallResult = {
    isError: result.isError === true,
    content: raw.slice(0, maxBlocks).map((block) => boundValue(block, 1, walk) as ContentBlock),
  };
  if (result.structuredContent !== undefined) out.structuredContent = boundValue(result.structuredContent, 1, walk);
  if (result._meta !== null && typeof result._meta === 'object' && !Array.isArray(result._meta)) {
    out._meta = boundValue(result._meta, 1, walk) as Record<string, unknown>;
  }

  // Most results are far below the ceiling, and one serialization (with room for the mark) says so.
  if (jsonBytes(out) + TRUNCATED_MARK_BYTES <= maxSerializedBytes) {
    if (walk.truncated) out.truncated = true;
    return out;
  }
  // Sizes are computed once and kept as arithmetic: `{...,"content":[b1,b2]}` is base + blocks + commas.
  const sizes = out.content.map(jsonBytes);
  const baseSize = () => jsonBytes({ ...out, content: [], truncated: true });
  let total = baseSize() + sizes.reduce((a, b) => a + b, 0) + Math.max(0, sizes.length - 1);
  while (total > maxSerializedBytes && out.content.length > 0) {
    out.content.pop();
    total -= sizes.pop()! + (sizes.length > 0 ? 1 : 0);
    walk.truncated = true;
  }
  for (const field of ['structuredContent', '_meta'] as const) {
    if (total <= maxSerializedBytes || out[field] === undefined) continue;
    const before = baseSize();
    delete out[field];
    total -= before - baseSize();
    walk.truncated = true;
  }
  if (walk.truncated) out.truncated = true;
  return out;
}

/** A tool as the upstream gave it (known fields only), every string bounded. */
export function boundTool(tool: Tool, limits?: Partial<BoundLimits>): { tool: Tool; truncated: boolean } {
  const walk: Walk = { limits: limitsOf(limits), truncated: false };
  const source = tool as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const field of TOOL_FIELDS) {
    if (source[field] !== undefined) out[field] = boundValue(source[field], 1, walk);
  }
  return { tool: out as unknown as Tool, truncated: walk.truncated };
}
