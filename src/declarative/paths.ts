/**
 * Where something is in `gatehouse.yaml`: a path printed the way people read YAML (`servers[2].url`,
 * `settings["mcp.hubEnabled"]`) and, when the source is at hand, its line and column.
 */
import { type Document, isMap, isScalar, isSeq, type LineCounter, type Node } from 'yaml';

export type PathSegment = string | number;

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;

export function formatPath(path: readonly PropertyKey[]): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (typeof segment === 'string' && PLAIN_KEY.test(segment)) text += text === '' ? segment : `.${segment}`;
    else text += `[${JSON.stringify(String(segment))}]`;
  }
  return text;
}

/** The `line:col` of the deepest node on `path` that exists (a missing key points at its parent). */
export function locate(doc: Document, lines: LineCounter, path: readonly PropertyKey[]): string | undefined {
  let node: unknown = doc.contents;
  let offset = (node as Node | null)?.range?.[0];
  for (const segment of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === segment);
      if (!pair) break;
      // The key's position rather than the value's: the value may be missing, null, or on the next line.
      if (isScalar(pair.key) && pair.key.range) offset = pair.key.range[0];
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      const item = node.items[segment] as Node | undefined;
      if (!item) break;
      offset = item.range?.[0] ?? offset;
      node = item;
    } else break;
  }
  if (offset === undefined) return undefined;
  const { line, col } = lines.linePos(offset);
  return `${line}:${col}`;
}
