/**
 * The one cursor format of Gatehouse's paginated MCP lists (`tools/list`, `prompts/list`,
 * `resources/list` through the hub, and any later list such as search or toolsets): an opaque
 * base64url string holding `{"v":1,"k":<list kind>,"a":<key of the last item sent>}`.
 *
 * Stable: a page is "the items whose key sorts after `a`" in the list as it is now, so a cursor needs
 * no server state, means the same on every replica, and survives the list changing between pages (an
 * item added before the cursor is not sent, one removed is not missed over; none is sent twice).
 * Keys are compared as plain strings (code-unit order), which every replica does alike.
 */
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';

const VERSION = 1;
/** A cursor longer than this is not one of ours (keys are names or URIs of bounded length). */
const MAX_CURSOR_LENGTH = 4096;

export interface Page<T> {
  items: T[];
  /** Present when more items follow: pass it back to get them. */
  nextCursor?: string;
}

export function encodeCursor(kind: string, after: string): string {
  return Buffer.from(JSON.stringify({ v: VERSION, k: kind, a: after })).toString('base64url');
}

/** The key a cursor continues after; a cursor that is malformed or of another list is invalid params (-32602). */
export function decodeCursor(kind: string, cursor: string): string {
  const invalid = () => new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid cursor.');
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  const { v, k, a } = (parsed ?? {}) as { v?: unknown; k?: unknown; a?: unknown };
  if (v !== VERSION || k !== kind || typeof a !== 'string') throw invalid();
  return a;
}

/**
 * One page of `items`: without a cursor and at most `pageSize` items, the list as it is (one page, its
 * own order); otherwise the items in key order, after the cursor's key, at most `pageSize` of them.
 */
export function pageOf<T>(
  kind: string,
  items: readonly T[],
  keyOf: (item: T) => string,
  cursor: string | undefined,
  pageSize: number,
): Page<T> {
  if (cursor === undefined && items.length <= pageSize) return { items: [...items] };
  const after = cursor === undefined ? undefined : decodeCursor(kind, cursor);
  const sorted = sortedOnce(items, keyOf);
  let start = 0;
  if (after !== undefined) {
    // The first item whose key sorts after the cursor's (binary search).
    let high = sorted.length;
    while (start < high) {
      const mid = (start + high) >>> 1;
      if (compare(keyOf(sorted[mid] as T), after) <= 0) start = mid + 1;
      else high = mid;
    }
  }
  const page = sorted.slice(start, start + pageSize);
  const last = page.at(-1);
  return start + pageSize < sorted.length && last !== undefined
    ? { items: page, nextCursor: encodeCursor(kind, keyOf(last)) }
    : { items: page };
}

/** Key order of a list, computed once per list instance (a cached aggregate is paged many times). */
const sortedLists = new WeakMap<readonly unknown[], unknown[]>();
function sortedOnce<T>(items: readonly T[], keyOf: (item: T) => string): T[] {
  let sorted = sortedLists.get(items) as T[] | undefined;
  if (!sorted) {
    sorted = [...items].sort((x, y) => compare(keyOf(x), keyOf(y)));
    sortedLists.set(items, sorted);
  }
  return sorted;
}

function compare(x: string, y: string): number {
  return x < y ? -1 : x > y ? 1 : 0;
}
