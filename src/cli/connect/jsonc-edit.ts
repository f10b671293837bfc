/**
 * Minimal-change edits of a JSON/JSONC text with jsonc-parser: a value is replaced where it stands, a new member is
 * added after the last one in the file's own indentation and line endings, and nothing else in the text moves —
 * other entries, their layout and every comment stay as they were. (jsonc-parser's own formatter re-lays out the
 * whole line an insertion touches, which would reflow a neighbouring one-line entry and move its trailing comment,
 * so inserted text is laid out here instead.)
 */
import {
  applyEdits,
  createScanner,
  type Node,
  type ParseError,
  parseTree,
  type SyntaxKind,
  modify as setByJsonc,
} from 'jsonc-parser';
import type { JsonPath } from './clients.js';

/** jsonc-parser's `SyntaxKind` is a const enum, which isolated modules cannot read: its values, named. */
const TOKEN = {
  comma: 5 as SyntaxKind,
  lineComment: 12 as SyntaxKind,
  blockComment: 13 as SyntaxKind,
  lineBreak: 14 as SyntaxKind,
  whitespace: 15 as SyntaxKind,
} as const;

export interface TextStyle {
  eol: '\n' | '\r\n';
  /** One level of indentation: a tab or some spaces. */
  unit: string;
}

/** The file's line ending and indentation unit (two spaces for a new or flat file). */
export function detectStyle(text: string): TextStyle {
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  let unit = '';
  for (const line of text.split(/\r?\n/)) {
    const indent = /^([ \t]+)\S/.exec(line)?.[1];
    if (!indent) continue;
    if (indent.startsWith('\t')) {
      unit = '\t';
      break;
    }
    if (unit === '' || indent.length < unit.length) unit = indent;
  }
  return { eol, unit: unit === '' ? '  ' : unit.length > 8 ? '  ' : unit };
}

export interface ParsedText {
  root: Node | undefined;
  errors: ParseError[];
}

export function parseText(text: string, format: 'json' | 'jsonc'): ParsedText {
  const errors: ParseError[] = [];
  const root = parseTree(text, errors, {
    disallowComments: format === 'json',
    allowTrailingComma: format === 'jsonc',
    allowEmptyContent: true,
  });
  return { root, errors };
}

/** The node at `path`, or undefined; for duplicate keys the last one wins, as `JSON.parse` decides. */
export function nodeAt(root: Node | undefined, path: JsonPath): Node | undefined {
  let node = root;
  for (const segment of path) {
    if (!node) return undefined;
    if (node.type === 'object' && typeof segment === 'string') {
      node = node.children?.findLast((p) => p.children?.[0]?.value === segment)?.children?.[1];
    } else if (node.type === 'array' && typeof segment === 'number') {
      node = node.children?.[segment];
    } else return undefined;
  }
  return node;
}

function lineStart(text: string, offset: number): number {
  const nl = text.lastIndexOf('\n', offset - 1);
  return nl + 1;
}

function lineIndent(text: string, offset: number): string {
  return /^[ \t]*/.exec(text.slice(lineStart(text, offset), offset))?.[0] ?? '';
}

function startsLine(text: string, offset: number): boolean {
  return text.slice(lineStart(text, offset), offset).trim() === '';
}

/** `value` as indented JSON whose continuation lines start at `indent`. */
export function render(value: unknown, indent: string, style: TextStyle): string {
  return JSON.stringify(value, null, style.unit)
    .split('\n')
    .join(style.eol + indent);
}

/** `value` on one line, spaced the way people write one-line JSON: `{ "a": [1, 2] }`. */
export function renderInline(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(renderInline).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    const members = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${renderInline(v)}`);
    return members.length === 0 ? '{}' : `{ ${members.join(', ')} }`;
  }
  return JSON.stringify(value);
}

function nest(path: JsonPath, value: unknown): unknown {
  let nested = value;
  for (const segment of [...path].reverse()) nested = { [String(segment)]: nested };
  return nested;
}

/** Adds `member` (`"key": value` or a bare array element) as the last member of an object or array node. */
function insertMember(
  text: string,
  container: Node,
  key: string | undefined,
  value: unknown,
  style: TextStyle,
): string {
  const children = container.children ?? [];
  const open = container.offset;
  const close = container.offset + container.length - 1;
  const last = children[children.length - 1];
  if (last && !text.slice(open, close).includes('\n')) {
    // A one-line object or array stays on one line.
    const end = last.offset + last.length;
    const member = `${key === undefined ? '' : `${JSON.stringify(key)}: `}${renderInline(value)}`;
    return `${text.slice(0, end)}, ${member}${text.slice(end)}`;
  }
  const containerIndent = lineIndent(text, open);
  const first = children[0];
  const indent =
    first && startsLine(text, first.offset) ? lineIndent(text, first.offset) : containerIndent + style.unit;
  const member = `${key === undefined ? '' : `${JSON.stringify(key)}: `}${render(value, indent, style)}`;

  if (children.length === 0) {
    const inner = text.slice(open + 1, close);
    if (inner.trim() === '') {
      return `${text.slice(0, open + 1)}${style.eol}${indent}${member}${style.eol}${containerIndent}${text.slice(close)}`;
    }
    // Only comments inside: the member goes first, the comments stay after it.
    return `${text.slice(0, open + 1)}${style.eol}${indent}${member}${text.slice(open + 1)}`;
  }

  if (!last) throw new Error('unreachable: a container with members has a last one');
  const end = last.offset + last.length;
  const scanner = createScanner(text, false);
  scanner.setPosition(end);
  let token = scanner.scan();
  while (
    token === TOKEN.whitespace ||
    token === TOKEN.lineBreak ||
    token === TOKEN.blockComment ||
    token === TOKEN.lineComment
  ) {
    token = scanner.scan();
  }
  const trailingComma = token === TOKEN.comma;
  let at = trailingComma ? scanner.getTokenOffset() + 1 : end;
  // Keep comments that end the last member's line with that member: insert after them, before the line break.
  scanner.setPosition(at);
  let reach = at;
  for (;;) {
    token = scanner.scan();
    if (token === TOKEN.whitespace || token === TOKEN.blockComment || token === TOKEN.lineComment) {
      reach = scanner.getTokenOffset() + scanner.getTokenLength();
      continue;
    }
    if (token === TOKEN.lineBreak) at = reach;
    break;
  }
  const added = `${style.eol}${indent}${member}${trailingComma ? ',' : ''}`;
  if (trailingComma) return `${text.slice(0, at)}${added}${text.slice(at)}`;
  return `${text.slice(0, end)},${text.slice(end, at)}${added}${text.slice(at)}`;
}

/**
 * Sets `path` to `value`: replaces the value where it stands, or adds the missing member (with any missing parents)
 * at the end of the deepest existing object. The path's existing parts must be objects (or arrays for numbers).
 */
export function setValue(text: string, path: JsonPath, value: unknown, style: TextStyle, format: 'json' | 'jsonc') {
  const { root } = parseText(text, format);
  if (!root) {
    // An empty file, or one with only comments (kept above the new document).
    const kept = text.trim() === '' ? '' : text.endsWith('\n') ? text : `${text}${style.eol}`;
    return `${kept}${render(nest(path, value), '', style)}${style.eol}`;
  }
  let node: Node = root;
  for (let i = 0; i < path.length; i++) {
    const segment = path[i] as string | number;
    const next = nodeAt(node, [segment]);
    if (!next) {
      if (node.type !== 'object' || typeof segment !== 'string') {
        throw new Error(`cannot add ${JSON.stringify(path.slice(0, i + 1))}: the parent is not an object`);
      }
      return insertMember(text, node, segment, nest(path.slice(i + 1), value), style);
    }
    node = next;
  }
  const old = text.slice(node.offset, node.offset + node.length);
  const rendered = old.includes('\n') ? render(value, lineIndent(text, node.offset), style) : renderInline(value);
  return `${text.slice(0, node.offset)}${rendered}${text.slice(node.offset + node.length)}`;
}

/** Appends `value` to the array at `path` (which must exist). */
export function appendValue(text: string, path: JsonPath, value: unknown, style: TextStyle, format: 'json' | 'jsonc') {
  const array = nodeAt(parseText(text, format).root, path);
  if (array?.type !== 'array') throw new Error(`${JSON.stringify(path)} is not an array`);
  return insertMember(text, array, undefined, value, style);
}

/** Removes the member at `path` (with its comma), leaving the rest of the text alone. */
export function removeValue(text: string, path: JsonPath): string {
  return applyEdits(text, setByJsonc(text, path, undefined, {}));
}
