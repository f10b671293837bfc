/**
 * Drains a paginated MCP list verb (tools, resources, prompts) with explicit cursors, bounded as a handshake is:
 * at most 1000 items over at most 50 pages, and a cursor seen twice ends it (an upstream that loops).
 */
const MAX_ITEMS = 1000;
const MAX_PAGES = 50;

export async function drain<T>(
  page: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor?: string | undefined }>,
): Promise<T[]> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let pages = 0; pages < MAX_PAGES && items.length < MAX_ITEMS; pages++) {
    const result = await page(cursor);
    items.push(...result.items.slice(0, MAX_ITEMS - items.length));
    cursor = result.nextCursor;
    if (!cursor || seen.has(cursor)) break;
    seen.add(cursor);
  }
  return items;
}
