/** The list contract: `{"<items>": [...], "count": n, "total": n}`, paged by `limit` (1–500, default 100) and `offset`. */
import { z } from 'zod';

export const MAX_PAGE = 500;

export const pageQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(100),
  offset: z.coerce.number().int().min(0).default(0),
});

export type Page = z.output<typeof pageQuery>;

export function listAnswer<K extends string, T>(
  key: K,
  items: T[],
  total: number,
): Record<K, T[]> & { count: number; total: number } {
  return { [key]: items, count: items.length, total } as Record<K, T[]> & { count: number; total: number };
}
