/** The tag filter every memory list shares: tags are kept as a JSON list in one text column. */
import { type RawBuilder, sql } from 'kysely';

/**
 * "The JSON tag list in `column` contains `tag`", as a LIKE test with its wildcards escaped: `_` is a
 * legal tag character and must not match any character. Tags need no JSON escaping (their pattern
 * allows none of `"` or `\`), so the quoted tag is exactly what the column holds.
 */
export function hasTag(column: string, tag: string): RawBuilder<boolean> {
  const pattern = `%${JSON.stringify(tag).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<boolean>`${sql.ref(column)} like ${pattern} escape '\\'`;
}
