/**
 * Upstream schemas are hostile input: validating arguments against them must never hold the event
 * loop. Regular expressions (`pattern`, `patternProperties`) run on RE2 (re2js, linear time, no
 * backtracking); a pattern RE2 cannot express (lookaround, backreference) makes the tool
 * `unsafe_schema`, quarantined at the handshake. `uniqueItems` runs in linear time (canonical JSON in
 * a set) instead of Ajv's pairwise deep comparison. Linear is not enough on a 2 MB body, so both draw on
 * one work budget per validation (bytes scanned, plus a fixed cost per test or item): past it the
 * validation stops with `tool.arguments_too_complex` (see `ArgumentValidator`).
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
