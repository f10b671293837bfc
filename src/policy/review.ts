/**
 * What an operator reviews before re-pinning a tool: a field-by-field diff of
 * the pinned and the pending definition, and flags for content a human would
 * not see in a dashboard but a model reads — invisible characters, bidi
 * controls, instruction tags, long whitespace runs that push text off-screen.
 *
 * Paths are dotted (`inputSchema.properties.path.description`); array items are
 * their index (`inputSchema.required.0`); a key that is not a plain word is
 * quoted as JSON in brackets (`properties["a.b"]`), so every path is unambiguous.
 */

export interface DiffEntry {
  path: string;
  change: 'added' | 'removed' | 'changed';
  /** Absent when the field was added. */
  before?: unknown;
  /** Absent when the field was removed. */
  after?: unknown;
}

export type HiddenContentKind =
  | 'zero_width'
  | 'bidi_control'
  | 'tag_characters'
  | 'instruction_tag'
  | 'whitespace_run'
  | 'blank_lines';

export interface HiddenContentFlag {
  /** The string's path in the definition. */
  path: string;
  /** `key` when the flagged string is a property name rather than a value. */
  in: 'value' | 'key';
  kind: HiddenContentKind;
  /** UTF-16 offset of the first occurrence in the string. */
  index: number;
  /** What was found, printable: code points (`U+200B`), the tag (`<IMPORTANT>`), or a count. */
  match: string;
  /** How many occurrences of this kind the string holds. */
  count: number;
}

/** Bounds, so a hostile definition cannot make the review itself unbounded. */
export const MAX_DIFF_ENTRIES = 500;
export const MAX_FLAGS = 200;

const PLAIN_KEY = /^[A-Za-z0-9_$-]+$/;

export function joinPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return parent === '' ? String(key) : `${parent}.${key}`;
  if (PLAIN_KEY.test(key)) return parent === '' ? key : `${parent}.${key}`;
  return `${parent}[${JSON.stringify(key)}]`;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * Deep, field by field: objects are compared key by key, arrays index by index; a field that appears or
 * disappears is one entry holding its whole value; a value whose type changed is one `changed` entry.
 * At most `MAX_DIFF_ENTRIES` entries (the first ones in document order).
 */
export function definitionDiff(before: unknown, after: unknown, max = MAX_DIFF_ENTRIES): DiffEntry[] {
  const entries: DiffEntry[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (entries.length >= max) return;
    if (isObject(a) && isObject(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
      for (const key of keys) {
        const childPath = joinPath(path, key);
        const inA = Object.hasOwn(a, key) && a[key] !== undefined;
        const inB = Object.hasOwn(b, key) && b[key] !== undefined;
        if (inA && inB) walk(a[key], b[key], childPath);
        else if (inA) push({ path: childPath, change: 'removed', before: a[key] });
        else if (inB) push({ path: childPath, change: 'added', after: b[key] });
      }
      return;
    }
    if (Array.isArray(a) && Array.isArray(b)) {
      const length = Math.max(a.length, b.length);
      for (let i = 0; i < length; i++) {
        const childPath = joinPath(path, i);
        if (i >= b.length) push({ path: childPath, change: 'removed', before: a[i] });
        else if (i >= a.length) push({ path: childPath, change: 'added', after: b[i] });
        else walk(a[i], b[i], childPath);
      }
      return;
    }
    if (!Object.is(a, b)) push({ path, change: 'changed', before: a, after: b });
  };
  const push = (entry: DiffEntry) => {
    if (entries.length < max) entries.push(entry);
  };
  const absent = (v: unknown) => v === undefined || v === null;
  if (absent(before) && absent(after)) return entries;
  // A tool first seen (nothing pinned yet): every field is an addition.
  walk(absent(before) ? {} : before, absent(after) ? {} : after, '');
  return entries;
}

interface Detector {
  kind: HiddenContentKind;
  pattern: RegExp;
  describe(match: string): string;
}

const codePoints = (text: string): string =>
  [...new Set([...text].map((c) => `U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`))].join(
    ' ',
  );

/** Tag names that are instructions in any case; other tags count only in upper case (`<IMPORTANT>`, `<SYSTEM_NOTE>`). */
const INSTRUCTION_TAG_NAMES = [
  'important',
  'system',
  'system_prompt',
  'instructions',
  'instruction',
  'critical',
  'hidden',
  'assistant',
];

/** `important` → `[iI][mM]…`: case-insensitive for these names only (inline `(?i:)` needs Node 23+). */
const anyCase = (name: string): string =>
  [...name].map((c) => (/[a-z]/.test(c) ? `[${c}${c.toUpperCase()}]` : c)).join('');

const DETECTORS: readonly Detector[] = [
  {
    // Zero-width space/non-joiner/joiner, word joiner, invisible operators, BOM, Mongolian vowel separator, soft hyphen.
    kind: 'zero_width',
    pattern: /[\u200B-\u200D\u2060-\u2064\uFEFF\u180E\u00AD]+/g,
    describe: codePoints,
  },
  {
    // Embeddings/overrides, isolates, and the directional marks that steer them.
    kind: 'bidi_control',
    pattern: /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]+/g,
    describe: codePoints,
  },
  {
    // Unicode tag characters (U+E0000–U+E007F): invisible ASCII a model still reads ("ASCII smuggling").
    kind: 'tag_characters',
    pattern: /[\u{E0000}-\u{E007F}]+/gu,
    describe: (m) => `${[...m].length} tag characters`,
  },
  {
    kind: 'instruction_tag',
    pattern: new RegExp(
      `<(?:[A-Z][A-Z0-9_]{2,}|${INSTRUCTION_TAG_NAMES.map(anyCase).join('|')})(?:\\s[^<>]{0,200})?\\/?>`,
      'g',
    ),
    describe: (m) => (m.length > 60 ? `${m.slice(0, 57)}...` : m),
  },
  {
    // Horizontal whitespace, including no-break and typographic spaces.
    kind: 'whitespace_run',
    pattern: /[ \t\u00A0\u2000-\u200A\u202F\u205F\u3000]{20,}/g,
    describe: (m) => `${m.length} whitespace characters`,
  },
  {
    // Five or more blank lines in a row (lines holding only whitespace count as blank).
    kind: 'blank_lines',
    pattern: /\r?\n(?:[ \t\u00A0]*\r?\n){5,}/g,
    describe: (m) => `${m.split('\n').length - 2} blank lines`,
  },
];

function flagsOfString(text: string, path: string, where: 'value' | 'key'): HiddenContentFlag[] {
  const flags: HiddenContentFlag[] = [];
  for (const detector of DETECTORS) {
    const matches = [...text.matchAll(detector.pattern)];
    const first = matches[0];
    if (!first) continue;
    flags.push({
      path,
      in: where,
      kind: detector.kind,
      index: first.index ?? 0,
      match: detector.describe(first[0]),
      count: matches.length,
    });
  }
  return flags;
}

/**
 * Flags hidden content in every string of a definition — descriptions anywhere in the schemas, titles,
 * enum values, defaults, and property names. At most `MAX_FLAGS` flags.
 */
export function hiddenContentFlags(definition: unknown, max = MAX_FLAGS): HiddenContentFlag[] {
  const flags: HiddenContentFlag[] = [];
  const add = (found: HiddenContentFlag[]) => {
    for (const flag of found) if (flags.length < max) flags.push(flag);
  };
  const walk = (value: unknown, path: string, depth: number): void => {
    if (flags.length >= max || depth > 64) return;
    if (typeof value === 'string') add(flagsOfString(value, path, 'value'));
    else if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) walk(item, joinPath(path, i), depth + 1);
    } else if (isObject(value)) {
      for (const [key, child] of Object.entries(value)) {
        const childPath = joinPath(path, key);
        add(flagsOfString(key, childPath, 'key'));
        walk(child, childPath, depth + 1);
      }
    }
  };
  walk(definition, '', 0);
  return flags;
}
