/**
 * Upstream schemas are hostile input: validating arguments against them must never hold the event
 * loop. Regular expressions (`pattern`, `patternProperties`) run on RE2 (re2js, linear time, no
 * backtracking); a pattern RE2 cannot express (lookaround, backreference) makes the tool
 * `unsafe_schema`, quarantined at the handshake. `uniqueItems` runs in linear time (canonical JSON in
 * a set) instead of Ajv's pairwise deep comparison. Linear is not enough on a 2 MB body, so both draw on
 * one work budget per validation (bytes scanned, plus a fixed cost per test or item): past it the
 * validation stops with `tool.arguments_too_complex` (see `ArgumentValidator`). A `$ref` loop that never
 * descends into the instance (`$ref: "#"` at the root) would recurse until the stack overflows, on every
 * call: `refLoop` finds it, and its tool is `unsafe_schema` too.
 */
import canonicalize from 'canonicalize';
import { RE2JS } from 're2js';

/** Work units one validation may spend on patterns and uniqueItems: a few ms warm on a small core. */
export const VALIDATION_BUDGET = 64 * 1024;
/** The fixed cost of one pattern test or one uniqueItems item, in bytes-equivalent. */
const PER_TEST = 32;

/** Thrown (and turned into `tool.arguments_too_complex`) when a validation spends its whole budget. */
export class ValidationBudgetExceeded extends Error {
  constructor() {
    super('The validation work budget is spent.');
  }
}

let remaining = Number.POSITIVE_INFINITY;

/** Runs one (synchronous) validation with a fresh work budget. */
export function withValidationBudget<T>(units: number, validate: () => T): T {
  const outer = remaining;
  remaining = units;
  try {
    return validate();
  } finally {
    remaining = outer;
  }
}

function charge(units: number): void {
  remaining -= units;
  if (remaining < 0) throw new ValidationBudgetExceeded();
}

/** What Ajv's `code.regExp` option expects: `(source, flags) => { test(s) }`. */
export interface LinearRegExp {
  test(input: string): boolean;
  toString(): string;
}

/** Compiles a JSON Schema (ECMA-262) pattern for RE2; throws when RE2 cannot express it. */
export function linearRegExp(source: string, _flags?: string): LinearRegExp {
  const compiled = RE2JS.compile(RE2JS.translateRegExp(source));
  return {
    test: (input: string) => {
      charge(input.length + PER_TEST);
      return compiled.test(input);
    },
    toString: () => `re2:${source}`,
  };
}
/** Ajv builds a code string from this for standalone output, which Gatehouse does not use. */
linearRegExp.code = 'linearRegExp';

function compilesOnRe2(source: string): boolean {
  try {
    linearRegExp(source);
    return true;
  } catch {
    return false;
  }
}

const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];
const SCHEMA_ONES = [
  'not',
  'if',
  'then',
  'else',
  'items',
  'additionalItems',
  'additionalProperties',
  'contains',
  'propertyNames',
  'unevaluatedItems',
  'unevaluatedProperties',
];

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** Every pattern of a schema (its `pattern` values and `patternProperties` keys), walked as a schema. */
export function schemaPatterns(schema: unknown, into: string[] = []): string[] {
  if (!isObject(schema)) return into;
  if (typeof schema.pattern === 'string') into.push(schema.pattern);
  if (isObject(schema.patternProperties)) into.push(...Object.keys(schema.patternProperties));
  for (const key of SCHEMA_MAPS) {
    const map = schema[key];
    if (isObject(map)) for (const child of Object.values(map)) schemaPatterns(child, into);
  }
  for (const key of SCHEMA_LISTS) {
    const list = schema[key];
    if (Array.isArray(list)) for (const child of list) schemaPatterns(child, into);
  }
  for (const key of SCHEMA_ONES) schemaPatterns(schema[key], into);
  if (isObject(schema.dependencies))
    for (const child of Object.values(schema.dependencies)) schemaPatterns(child, into);
  return into;
}

/** The patterns of these schemas that RE2 cannot run (lookaround, backreferences, invalid syntax). */
export function unsafePatterns(...schemas: unknown[]): string[] {
  const unsafe: string[] = [];
  for (const schema of schemas)
    for (const pattern of schemaPatterns(schema)) if (!compilesOnRe2(pattern)) unsafe.push(pattern);
  return unsafe;
}

/**
 * `uniqueItems` in linear time: each item's RFC 8785 canonical JSON goes into a set (JSON equality is
 * canonical-text equality), instead of Ajv's n² deep comparisons.
 */
export function itemsAreUnique(items: readonly unknown[]): boolean {
  const seen = new Set<string>();
  for (const item of items) {
    const key = typeof item === 'string' ? `s${item}` : `j${canonicalize(item) ?? 'undefined'}`;
    charge(key.length + PER_TEST);
    if (seen.has(key)) return false;
    seen.add(key);
  }
  return true;
}

/** Subschemas applied to the instance itself: a loop through only these (and `$ref`s) consumes nothing. */
const IN_PLACE_ONES = ['not', 'if', 'then', 'else'];
const IN_PLACE_LISTS = ['allOf', 'anyOf', 'oneOf'];
const IN_PLACE_MAPS = ['dependentSchemas', 'dependencies'];
const REFS = ['$ref', '$dynamicRef', '$recursiveRef'];
/** The base URI of a schema without `$id` (any absolute URI does: it only names the document). */
const DEFAULT_BASE = 'https://schema.gatehouse.invalid/root.json';

function resolveUri(ref: string, base: string): URL | undefined {
  try {
    return new URL(ref, base);
  } catch {
    return undefined;
  }
}

/** What the `$ref`s of one schema document can reach: its resources (by `$id`) and anchors. */
class RefIndex {
  /** Each schema object's base URI and its location in the document (`#/$defs/a`). */
  readonly nodes = new Map<object, { base: string; at: string }>();
  private readonly resources = new Map<string, unknown>();
  private readonly anchors = new Map<string, object>();

  constructor(root: unknown) {
    this.resources.set(DEFAULT_BASE, root);
    this.add(root, DEFAULT_BASE, '#');
  }

  /** Walks a schema (iteratively: the document is untrusted), recording ids, anchors and locations. */
  add(schema: unknown, base: string, at: string): void {
    const stack: [unknown, string, string][] = [[schema, base, at]];
    for (let next = stack.pop(); next; next = stack.pop()) {
      const [node, parentBase, where] = next;
      if (!isObject(node) || this.nodes.has(node)) continue;
      let nodeBase = parentBase;
      if (typeof node.$id === 'string') {
        const id = resolveUri(node.$id, parentBase);
        if (id) {
          const anchor = id.hash.slice(1);
          id.hash = '';
          if (anchor) this.anchors.set(`${id.href}#${anchor}`, node);
          else this.resources.set(id.href, node);
          nodeBase = id.href;
        }
      }
      for (const key of ['$anchor', '$dynamicAnchor'])
        if (typeof node[key] === 'string') this.anchors.set(`${nodeBase}#${node[key]}`, node);
      this.nodes.set(node, { base: nodeBase, at: where });
      const push = (child: unknown, path: string) => stack.push([child, nodeBase, `${where}/${path}`]);
      for (const key of [...SCHEMA_MAPS, 'dependencies']) {
        const map = node[key];
        if (isObject(map))
          for (const [name, child] of Object.entries(map)) push(child, `${key}/${escapePointer(name)}`);
      }
      for (const key of SCHEMA_LISTS) {
        const list = node[key];
        if (Array.isArray(list)) for (const [i, child] of list.entries()) push(child, `${key}/${i}`);
      }
      for (const key of SCHEMA_ONES) push(node[key], key);
    }
  }

  /** The schema a reference names, or undefined when it is not in this document (or not a schema object). */
  resolve(ref: string, base: string): object | undefined {
    const url = resolveUri(ref, base);
    if (!url) return undefined;
    const fragment = url.hash.slice(1);
    url.hash = '';
    const resource = this.resources.get(url.href);
    if (resource === undefined) return undefined;
    if (fragment && !fragment.startsWith('/'))
      return this.anchors.get(`${url.href}#${decodeURIComponentSafe(fragment)}`);
    let target: unknown = resource;
    for (const token of fragment ? fragment.slice(1).split('/') : []) {
      if (target === null || typeof target !== 'object') return undefined;
      const key = decodeURIComponentSafe(token).replaceAll('~1', '/').replaceAll('~0', '~');
      if (!Object.hasOwn(target, key)) return undefined;
      target = (target as Record<string, unknown>)[key];
    }
    if (!isObject(target)) return undefined;
    // A pointer may land where no keyword walks (under an unknown keyword): Ajv compiles it all the same.
    if (!this.nodes.has(target)) this.add(target, url.href, `#${fragment}`);
    return target;
  }

  /** The schemas applied to the same instance as `node`: its in-place subschemas and what its refs name. */
  inPlace(node: object): object[] {
    const schema = node as Record<string, unknown>;
    const base = this.nodes.get(node)?.base ?? DEFAULT_BASE;
    const next: unknown[] = IN_PLACE_ONES.map((key) => schema[key]);
    for (const key of IN_PLACE_LISTS) if (Array.isArray(schema[key])) next.push(...(schema[key] as unknown[]));
    for (const key of IN_PLACE_MAPS) if (isObject(schema[key])) next.push(...Object.values(schema[key]));
    for (const key of REFS) if (typeof schema[key] === 'string') next.push(this.resolve(schema[key] as string, base));
    return next.filter(isObject);
  }
}

function escapePointer(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * A `$ref` loop in these schemas that consumes nothing — each step applies to the same instance (`$ref`,
 * `allOf`, `not`, `if`/`then`, …), never to a property or an item — as the locations around it
 * (`["#", "#"]` for `$ref: "#"` at the root); undefined when there is none. Validating through such a loop
 * never ends (the JSON Schema specs forbid it). A recursive schema that descends (a tree whose `children`
 * items refer back to the node) stops when the instance does, and is fine.
 */
export function refLoop(...schemas: unknown[]): string[] | undefined {
  for (const schema of schemas) {
    if (!isObject(schema)) continue;
    const index = new RefIndex(schema);
    // Iterative depth-first search (the document is untrusted): `stack` is the path being followed.
    const done = new Set<object>();
    const onPath = new Map<object, number>();
    for (const start of [...index.nodes.keys()]) {
      if (done.has(start)) continue;
      const stack: { node: object; next: object[] }[] = [];
      const enter = (node: object) => {
        onPath.set(node, stack.length);
        stack.push({ node, next: index.inPlace(node) });
      };
      enter(start);
      while (stack.length > 0) {
        const top = stack[stack.length - 1] as { node: object; next: object[] };
        const child = top.next.pop();
        if (child === undefined) {
          done.add(top.node);
          onPath.delete(top.node);
          stack.pop();
        } else if (onPath.has(child)) {
          const loop = [...stack.slice(onPath.get(child)).map((s) => s.node), child];
          return loop.map((node) => index.nodes.get(node)?.at ?? '?');
        } else if (!done.has(child)) {
          enter(child);
        }
      }
    }
  }
  return undefined;
}
