/** Text helpers of the memory engine: normalisation, content hashes, terms, token estimates, similarity. */
import { createHash, randomBytes } from 'node:crypto';

export const newMemoryId = (prefix: 'mem' | 'doc' | 'dir' | 'mm' | 'op'): string =>
  `${prefix}_${randomBytes(12).toString('base64url')}`;

/** Whitespace collapsed, trimmed, case folded: what "the same content" means. */
export function normalizeText(text: string): string {
  return text.normalize('NFKC').replace(/\s+/g, ' ').trim().toLowerCase();
}

export function contentHash(...parts: (string | null | undefined)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(`${normalizeText(part ?? '').length}:${normalizeText(part ?? '')}|`);
  return hash.digest('hex');
}

const STOPWORDS = new Set(
  (
    'a an and are as at be by for from has have in is it its of on or that the this to was were will with ' +
    'what which who whom when where why how do does did i you he she we they me my our your their'
  ).split(' '),
);

/** The search terms of a query: letters and digits only (so nothing reaches FTS syntax), stopwords dropped. */
export function queryTerms(query: string, max = 16): string[] {
  const words = [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])];
  const content = words.filter((w) => !STOPWORDS.has(w));
  return (content.length > 0 ? content : words).slice(0, max);
}

/** Word set for near-duplicate detection. */
export function wordSet(text: string): Set<string> {
  return new Set(normalizeText(text).match(/[\p{L}\p{N}]+/gu) ?? []);
}

export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let shared = 0;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const word of small) if (large.has(word)) shared++;
  return shared / (a.size + b.size - shared);
}

/** A conservative token estimate (about four characters per token, never zero). */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** The values once each, first occurrence first. */
export function uniq(values: readonly string[]): string[] {
  return [...new Set(values)];
}
