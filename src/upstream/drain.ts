/**
 * Drains a paginated MCP list verb one page per request with explicit cursors: the one bounded pagination loop,
 * for tools (`listAllTools`) and for prompts, resources and resource templates (`drainList`). Every item bounded
 * (`boundItem` unless told otherwise: strings, nesting), at most 1000 items over at most 50 pages and 5 MiB
 * serialized (the first item that does not fit ends the list), and a cursor seen twice ends it (an upstream that
 * loops) or, for tools, is a protocol error.
 *
 * Never the SDK's `listPrompts()`/`listResources()`/`listResourceTemplates()` without a cursor: those walk up to
 * 64 pages and merge them before returning, so no bound of ours would hold until all of it sat in memory.
 */
import { createHash } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/client';
import { GatehouseError } from '../errors.js';
import { boundItem, DEFAULT_BOUNDS } from './bounds.js';
import { catalogParams } from './client-capabilities.js';

export interface DrainLimits {
  maxItems: number;
  maxPages: number;
  /** Serialized (UTF-8 JSON) ceiling of the whole list, as for a tool list. */
  maxSerializedBytes: number;
}

export const DRAIN_LIMITS: Readonly<DrainLimits> = Object.freeze({
  maxItems: 1000,
  maxPages: 50,
  maxSerializedBytes: DEFAULT_BOUNDS.maxSerializedBytes,
});

export interface ListPage {
  items: unknown[];
  nextCursor?: string | undefined;
}

export interface DrainOptions<T> {
  limits?: Partial<DrainLimits> | undefined;
  /** Bounds one item as it arrives, or leaves it out (undefined); default `boundItem`. */
  bound?: ((raw: unknown) => { item: T; truncated: boolean } | undefined) | undefined;
  /** A repeated cursor ends the list (`stop`, the default) or fails it (`throw`: `upstream_protocol_error`). */
  repeatedCursor?: 'stop' | 'throw';
}

/** The items, and whether anything was left out or cut to hold the limits. */
export async function drainPages<T>(
  page: (cursor: string | undefined) => Promise<ListPage>,
  {
    limits = {},
    bound = boundItem as (raw: unknown) => { item: T; truncated: boolean },
    repeatedCursor = 'stop',
  }: DrainOptions<T> = {},
): Promise<{ items: T[]; truncated: boolean }> {
  const { maxItems, maxPages, maxSerializedBytes } = { ...DRAIN_LIMITS, ...limits };
  const items: T[] = [];
  // Cursors are opaque and upstream-sized; remember their hashes, not the strings.
  const seen = new Set<string>();
  let bytes = 2;
  let truncated = false;
  let cursor: string | undefined;
  for (let pages = 1; ; pages++) {
    const result = await page(cursor);
    for (const raw of result.items) {
      const bounded = bound(raw);
      if (!bounded) continue;
      const size = Buffer.byteLength(JSON.stringify(bounded.item) ?? 'null') + 1;
      if (items.length >= maxItems || bytes + size > maxSerializedBytes) return { items, truncated: true };
      bytes += size;
      truncated ||= bounded.truncated;
      items.push(bounded.item);
    }
    cursor = result.nextCursor;
    if (!cursor) return { items, truncated };
    if (pages >= maxPages || items.length >= maxItems) return { items, truncated: true };
    const digest = createHash('sha256').update(cursor).digest('base64');
    if (seen.has(digest)) {
      if (repeatedCursor === 'stop') return { items, truncated };
      throw new GatehouseError('upstream_protocol_error', 'The upstream repeated a pagination cursor.', {
        reason: 'repeated_cursor',
      });
    }
    seen.add(digest);
  }
}

/** `drainPages` with each item bounded as a list item (`boundItem`): the items alone. */
export async function drain<T>(
  page: (cursor: string | undefined) => Promise<ListPage>,
  limits: Partial<DrainLimits> = {},
): Promise<T[]> {
  return (await drainPages<T>(page, { limits })).items;
}

export type ListMethod = 'prompts/list' | 'resources/list' | 'resources/templates/list';

const ITEMS_OF: Record<ListMethod, string> = {
  'prompts/list': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resourceTemplates',
};

/**
 * One page of `method`, asked as itself (`client.request`, validated by the SDK as its `listX()` would be).
 * `catalog`: the hub's own listing, which declares MCP Apps to a 2026-07-28 upstream (`catalogParams`).
 */
export async function listPage(
  client: Client,
  method: ListMethod,
  cursor: string | undefined,
  signal: AbortSignal,
  catalog = false,
): Promise<ListPage> {
  const params = cursor === undefined ? {} : { cursor };
  const page = (await client.request(
    { method, params: catalog ? catalogParams(client, params) : params },
    { signal },
  )) as unknown as Record<string, unknown>;
  const items = page[ITEMS_OF[method]];
  return {
    items: Array.isArray(items) ? items : [],
    nextCursor: typeof page.nextCursor === 'string' ? page.nextCursor : undefined,
  };
}

/** Every page of `method` the limits allow, each item bounded (callers check the capability first). */
export function drainList<T>(
  client: Client,
  method: ListMethod,
  signal: AbortSignal,
  { catalog = false, limits }: { catalog?: boolean; limits?: Partial<DrainLimits> } = {},
): Promise<T[]> {
  return drain<T>((cursor) => listPage(client, method, cursor, signal, catalog), limits);
}
