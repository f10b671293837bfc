/**
 * Merging the hub's entry into a client's existing config text.
 *
 * Only what the entry needs is touched: the entry's own fields (url, type, the Authorization header, command, args,
 * the token variable), the other transport's fields when an old entry has them, and for VS Code the token's
 * `inputs` element. Fields a user added to the entry (another header, a timeout) stay; so does every other entry,
 * the file's layout, and in JSONC its comments. A merge that finds everything in place changes nothing, so a second
 * `--write` leaves the file byte-identical.
 *
 * A clear-text token already in the entry is kept when no new one is given (a placeholder is not a token).
 */
import { getNodeValue } from 'jsonc-parser';
import { GatehouseError } from '../../errors.js';
import { type ClientSpec, isPlaceholder, type JsonPath, type WiringInput } from './clients.js';
import { appendValue, detectStyle, parseText, removeValue, setValue } from './jsonc-edit.js';

export interface MergeResult {
  text: string;
  /** What changed, e.g. `added mcpServers.gatehouse`; empty when the file already had it all. */
  changes: string[];
  /** The entry as it is after the merge. */
  entry: Record<string, unknown>;
  /** A real token (not the placeholder) is in the file after the merge. */
  holdsToken: boolean;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

function getAt(value: unknown, path: JsonPath): unknown {
  let current = value;
  for (const segment of path) {
    if (isObject(current) && typeof segment === 'string') current = current[segment];
    else if (Array.isArray(current) && typeof segment === 'number') current = current[segment];
    else return undefined;
  }
  return current;
}

function withAt(value: Json, path: JsonPath, leaf: unknown): Json {
  const [head, ...rest] = path;
  if (typeof head !== 'string') return value;
  const child = value[head];
  return { ...value, [head]: rest.length === 0 ? leaf : withAt(isObject(child) ? child : {}, rest, leaf) };
}

/** The smallest set of `[path, value]` writes that make `existing` hold everything in `desired`. */
function differences(existing: unknown, desired: unknown, path: JsonPath = []): [JsonPath, unknown][] {
  if (isObject(desired) && isObject(existing)) {
    return Object.entries(desired).flatMap(([key, value]) => differences(existing[key], value, [...path, key]));
  }
  return deepEqual(existing, desired) ? [] : [[path, desired]];
}

const dotted = (path: JsonPath) =>
  path.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');

function position(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return `line ${line}, column ${column}`;
}

const PARSE_ERRORS: Record<number, string> = {
  1: 'invalid symbol',
  2: 'invalid number',
  3: 'property name expected',
  4: 'value expected',
  5: 'colon expected',
  6: 'comma expected',
  7: 'closing brace expected',
  8: 'closing bracket expected',
  9: 'end of file expected',
  10: 'invalid comment token',
  11: 'unexpected end of comment',
  12: 'unexpected end of string',
  13: 'unexpected end of number',
  14: 'invalid unicode',
  15: 'invalid escape character',
  16: 'invalid character',
};

function refuse(file: string, why: string): never {
  throw new GatehouseError('validation_error', `Refusing to write ${file}: ${why}`);
}

/** Merges `spec`'s entry for `input` into `original` (the file's text, '' for a new file). Throws on a refusal. */
export function mergeEntry(original: string, spec: ClientSpec, input: WiringInput, file: string): MergeResult {
  const bom = original.startsWith('\uFEFF') ? '\uFEFF' : '';
  let text = bom ? original.slice(1) : original;
  const { root, errors } = parseText(text, spec.format);
  const [error] = errors;
  if (error) {
    const what = spec.format === 'json' ? 'valid JSON' : 'valid JSON with comments';
    const extra =
      spec.format === 'json' && (error.error === 10 || /\/[/*]/.test(text))
        ? ` ${spec.label} reads this file as strict JSON: no comments, no trailing commas.`
        : '';
    refuse(
      file,
      `it is not ${what} (${PARSE_ERRORS[error.error] ?? 'syntax error'} at ${position(text, error.offset)}).${extra} ` +
        'Fix it first; nothing was changed.',
    );
  }
  if (root && root.type !== 'object') refuse(file, `its top level is a JSON ${root.type}, not an object.`);
  const doc: Json = root ? (getNodeValue(root) as Json) : {};

  const optOut = doc.gatehouse;
  if (isObject(optOut) && optOut.wire === false) {
    refuse(
      file,
      'it opts out of wiring ("gatehouse": {"wire": false}). Remove that key to let gatehouse connect edit it.',
    );
  }
  const servers = doc[spec.serversKey];
  if (servers !== undefined && !isObject(servers)) refuse(file, `"${spec.serversKey}" is not an object.`);
  const existing = isObject(servers) ? servers[input.name] : undefined;
  if (existing !== undefined && !isObject(existing)) {
    refuse(file, `"${spec.serversKey}.${input.name}" is not an object.`);
  }
  const inputs = doc.inputs;
  if (spec.input && inputs !== undefined && !Array.isArray(inputs)) refuse(file, '"inputs" is not an array.');

  const style = detectStyle(text);
  const changes: string[] = [];
  const base: JsonPath = [spec.serversKey, input.name];
  let desired = spec.entry(input);
  let entry: Json;

  if (!existing) {
    text = setValue(text, base, desired, style, spec.format);
    changes.push(`added ${dotted(base)}`);
    entry = desired;
  } else {
    // A token already in the file stays unless a new one is given.
    const current = spec.secretPath ? getAt(existing, spec.secretPath) : undefined;
    if (spec.secretPath && !input.token && !isPlaceholder(current)) desired = withAt(desired, spec.secretPath, current);
    entry = { ...existing };
    for (const key of spec.conflicting) {
      if (!Object.hasOwn(existing, key) || Object.hasOwn(desired, key)) continue;
      text = removeValue(text, [...base, key]);
      delete entry[key];
      changes.push(`removed ${dotted([...base, key])}`);
    }
    for (const [path, value] of differences(existing, desired)) {
      text = setValue(text, [...base, ...path], value, style, spec.format);
      entry = withAt(entry, path, value);
      changes.push(`set ${dotted([...base, ...path])}`);
    }
  }

  if (spec.input) {
    const want = spec.input(input);
    const list = Array.isArray(inputs) ? inputs : undefined;
    const index = list ? list.findLastIndex((x) => isObject(x) && x.id === want.id) : -1;
    if (!list) {
      text = setValue(text, ['inputs'], [want], style, spec.format);
      changes.push('added inputs');
    } else if (index < 0) {
      text = appendValue(text, ['inputs'], want, style, spec.format);
      changes.push(`added inputs[${list.length}]`);
    } else {
      for (const [path, value] of differences(list[index], want)) {
        text = setValue(text, ['inputs', index, ...path], value, style, spec.format);
        changes.push(`set ${dotted(['inputs', index, ...path])}`);
      }
    }
  }

  const holdsToken = spec.secret === 'clear' && !!spec.secretPath && !isPlaceholder(getAt(entry, spec.secretPath));
  return { text: changes.length === 0 ? original : bom + text, changes, entry, holdsToken };
}
