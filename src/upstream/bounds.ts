/**
 * Response bounds: what an upstream may hand back through Gatehouse, whatever it sends.
 *
 * Pure functions over already-parsed values. The raw byte cap (16 MB while the response streams)
 * is the egress fetch's job; these bounds apply below it, so a 10 MB string is cut, not failed.
 */
import type { ContentBlock, Tool } from '@modelcontextprotocol/client';
import { GatehouseError } from '../errors.js';

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

function truncateString(value: string, walk: Walk, max = walk.limits.maxStringChars): string {
  if (value.length <= max) return value;
  walk.truncated = true;
  // Do not leave half a surrogate pair at the cut.
  const code = value.charCodeAt(max - 1);
  const cut = value.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
  // A slice keeps the whole string it was cut from alive (V8's sliced strings): copy the kept part, so a bounded
  // value never holds the upstream's 8 MB string behind its 200 kB. UTF-16 code units copy exactly.
  return Buffer.from(cut, 'utf16le').toString('utf16le');
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

/**
 * One item of an upstream's `prompts/list`, `resources/list` or `resources/templates/list`, bounded as a tool is
 * (`boundTool`): every string cut at `maxStringChars`, nesting at `maxDepth`. Its fields pass through (a prompt's
 * or resource's pin picks its own); the list it goes into holds it to the serialized ceiling (`drain.ts`).
 */
export function boundItem<T>(item: T, limits?: Partial<BoundLimits>): { item: T; truncated: boolean } {
  const walk: Walk = { limits: limitsOf(limits), truncated: false };
  return { item: boundValue(item, 1, walk) as T, truncated: walk.truncated };
}

/**
 * The longest `instructions` kept of what an upstream says of itself: passed on to every agent of
 * `/mcp/s/{server}` at `initialize`, and hosts keep theirs to a few kB (tools' descriptions get `maxStringChars`).
 */
export const MAX_INSTRUCTIONS_CHARS = 8 * 1024;

/**
 * What an upstream said of itself (a `server/discover` result, or its `initialize` answer's `serverInfo`,
 * `instructions`, capabilities), bounded before it is stored and passed on: every string and the nesting as
 * anywhere else, `instructions` to `MAX_INSTRUCTIONS_CHARS`.
 */
export function boundDiscover<T>(value: T): T {
  const walk: Walk = { limits: DEFAULT_BOUNDS, truncated: false };
  const bounded = boundValue(value, 0, walk);
  if (bounded === null || typeof bounded !== 'object' || Array.isArray(bounded)) return bounded as T;
  const { instructions } = bounded as { instructions?: unknown };
  if (typeof instructions !== 'string' || instructions.length <= MAX_INSTRUCTIONS_CHARS) return bounded as T;
  return { ...bounded, instructions: truncateString(instructions, walk, MAX_INSTRUCTIONS_CHARS) } as T;
}

/** The `_meta` key saying a result passed on was cut (as a tool result says it, `calls.ts`). */
export const TRUNCATED_META_KEY = 'io.gatehouse/truncated';
/** The most marking a result adds: `,"_meta":{"io.gatehouse/truncated":true}` (less when `_meta` is there). */
const TRUNCATED_META_BYTES = Buffer.byteLength(`,"_meta":{"${TRUNCATED_META_KEY}":true}`);

/** Where a result's bulk is, for `boundResult`. */
export interface ResultShape {
  /** The path of its one array: `['messages']`, `['contents']`, `['completion', 'values']`. */
  list: readonly [string, ...string[]];
  /**
   * Fields of each entry of that array kept whole up to the serialized ceiling, not cut at `maxStringChars`:
   * a resource's `text` and `blob` (a cut blob is a corrupt file, a cut MCP App a broken one, and a UI
   * resource's content is pinned). An entry that does not fit then goes, as a block does.
   */
  wholeFields?: readonly string[];
}

/** `prompts/get`: its messages. */
export const PROMPT_RESULT: ResultShape = Object.freeze({ list: ['messages'] as const });
/** `resources/read`: its contents, each one's `text` or `blob` whole. */
export const RESOURCE_RESULT: ResultShape = Object.freeze({
  list: ['contents'] as const,
  wholeFields: ['text', 'blob'],
});
/** `completion/complete`: its values. */
export const COMPLETION_RESULT: ResultShape = Object.freeze({ list: ['completion', 'values'] as const });

const isPlainRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** A shallow copy of `value` along `path`, with the array there replaced by `items`. */
function withList(value: Record<string, unknown>, path: readonly string[], items: unknown[]): Record<string, unknown> {
  const [head, ...rest] = path as [string, ...string[]];
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) setOwn(out, key, item);
  const inner = value[head];
  setOwn(out, head, rest.length === 0 ? items : withList(isPlainRecord(inner) ? inner : {}, rest, items));
  return out;
}

/** An entry whose whole field is longer than the serialized ceiling: it cannot fit, and is never copied. */
const OVERSIZE = Symbol('oversize');

/** One entry of a result's array, its `wholeFields` kept whole (or `OVERSIZE`) and the rest as anything else. */
function boundEntry(entry: unknown, depth: number, walk: Walk, wholeFields: readonly string[]): unknown {
  if (wholeFields.length === 0 || !isPlainRecord(entry)) return boundValue(entry, depth, walk);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(entry)) {
    if (typeof item === 'string' && wholeFields.includes(key)) {
      // Every character is at least one byte of JSON.
      if (item.length > walk.limits.maxSerializedBytes) return OVERSIZE;
      setOwn(out, key, item);
    } else setOwn(out, key, boundValue(item, depth + 1, walk));
  }
  return out;
}

/** What a result too large to pass on, even cut, becomes. */
function resultTooLarge(limit: number): GatehouseError {
  return new GatehouseError(
    'upstream_protocol_error',
    `The upstream's answer is larger than Gatehouse passes on (${limit} bytes serialized), even with its later entries left out.`,
    { reason: 'result_too_large', limit },
  );
}

/**
 * Bounds a pass-through result (`prompts/get`, `resources/read`, `completion/complete`, a templates list) with a
 * tool result's limits (`boundCallResult`): at most `maxBlocks` entries in its array, every string anywhere cut
 * at `maxStringChars` (but the shape's `wholeFields`), nesting at `maxDepth` (deeper is `null`), then the
 * serialized ceiling, met by dropping trailing entries (all but the first), then `_meta`, then the first entry.
 * Anything cut says so in `_meta` (`io.gatehouse/truncated`, as a tool result says it). A result that still does
 * not fit, or that would keep none of its entries, is refused (`upstream_protocol_error`, reason
 * `result_too_large`): an answer without its content is no answer. Walks no deeper than `maxDepth`.
 */
export function boundResult<T>(result: T, shape: ResultShape, limits?: Partial<BoundLimits>): T {
  const walk: Walk = { limits: limitsOf(limits), truncated: false };
  const { maxBlocks, maxSerializedBytes } = walk.limits;
  if (!isPlainRecord(result)) return boundValue(result, 0, walk) as T;
  let container: unknown = result;
  for (const key of shape.list) container = isPlainRecord(container) ? container[key] : undefined;
  const raw = Array.isArray(container) ? container : undefined;
  // The result without its array is bounded as any value; the array's entries one by one, each at its own depth.
  let out = boundValue(raw ? withList(result, shape.list, []) : result, 0, walk) as Record<string, unknown>;
  const entries: unknown[] = [];
  if (raw) {
    if (raw.length > maxBlocks) walk.truncated = true;
    for (const entry of raw.slice(0, maxBlocks)) {
      entries.push(boundEntry(entry, shape.list.length, walk, shape.wholeFields ?? []));
    }
  }
  const assemble = () => (raw ? withList(out, shape.list, entries) : out);

  // Most results are far below the ceiling, and one serialization (with room for the mark) says so.
  if (entries.includes(OVERSIZE) || jsonBytes(assemble()) + TRUNCATED_META_BYTES > maxSerializedBytes) {
    // Sizes are computed once: `[e1,e2]` is the entries and their commas.
    const sizes = entries.map((entry) => (entry === OVERSIZE ? Number.POSITIVE_INFINITY : jsonBytes(entry)));
    let base = jsonBytes(out);
    const over = () =>
      base + sizes.reduce((a, b) => a + b, 0) + Math.max(0, sizes.length - 1) + TRUNCATED_META_BYTES >
      maxSerializedBytes;
    const drop = (keep: number) => {
      while (over() && entries.length > keep) {
        entries.pop();
        sizes.pop();
        walk.truncated = true;
      }
    };
    drop(1);
    if (over() && out._meta !== undefined) {
      const { _meta, ...rest } = out;
      out = rest;
      base = jsonBytes(out);
      walk.truncated = true;
    }
    drop(0);
    if (over() || (raw && raw.length > 0 && entries.length === 0)) throw resultTooLarge(maxSerializedBytes);
  }
  const bounded = assemble();
  if (!walk.truncated) return bounded as T;
  const meta = isPlainRecord(bounded._meta) ? bounded._meta : {};
  return { ...bounded, _meta: { ...meta, [TRUNCATED_META_KEY]: true } } as T;
}
