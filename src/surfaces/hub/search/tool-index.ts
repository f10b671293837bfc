/**
 * The search index of search mode: BM25F over every listed tool of the catalog — its
 * aggregated name, title, description and argument names (with their descriptions, weighted less).
 * One index per catalog snapshot, built on the first search after the catalog changed; what a caller
 * may see (its groups, a server filter) is applied at query time, so a search is no store round trip.
 * Only usable tools (`allow`, `gated`) are indexed: blocked, excluded and quarantined ones never appear.
 * Results come in a deterministic order (score, then name), so the same query answers the same bytes.
 */
import type { DiscoveredTool } from '../../../registry/records.js';

/** What the index needs of a tool (the hub's `HubTool` is one). */
export interface IndexedTool {
  exposed: string;
  serverId: string;
  definition: DiscoveredTool;
  verdict: string;
}

export interface ToolHit<T extends IndexedTool = IndexedTool> {
  tool: T;
  /** BM25 score (higher first). */
  score: number;
}

/** Splits `read_file`, `createIssue`, `HTTPRequest2` and prose into lower-case words. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter((word) => word.length > 0);
}

/** Words too common in tool documentation to tell tools apart. */
const STOP_WORDS = new Set([
  'a',
  'an',
  'and',
  'are',
  'as',
  'at',
  'be',
  'by',
  'for',
  'from',
  'in',
  'into',
  'is',
  'it',
  'its',
  'of',
  'on',
  'or',
  'that',
  'the',
  'this',
  'to',
  'with',
]);

/** Lower case, stop words out, and a light plural/verb-form fold (files → file, searching → search). */
export function processTerm(term: string): string | null {
  const word = term.toLowerCase();
  if (STOP_WORDS.has(word)) return null;
  if (word.length > 5 && word.endsWith('ing')) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith('ies')) return `${word.slice(0, -3)}y`;
  if (word.length > 4 && /(sses|xes|ches|shes)$/.test(word)) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss') && !word.endsWith('us')) {
    return word.slice(0, -1);
  }
  if (word.length > 4 && word.endsWith('ed')) return word.slice(0, -2);
  return word;
}

/** The names of a schema's top-level properties and their descriptions (bounded). */
function argumentsOf(schema: unknown): { names: string[]; text: string } {
  const properties = (schema as { properties?: unknown } | undefined)?.properties;
  if (!properties || typeof properties !== 'object' || Array.isArray(properties)) return { names: [], text: '' };
  const names: string[] = [];
  const text: string[] = [];
  for (const [name, property] of Object.entries(properties as Record<string, unknown>).slice(0, 100)) {
    names.push(name);
    const description = (property as { description?: unknown } | null)?.description;
    if (typeof description === 'string') text.push(description.slice(0, 500));
  }
  return { names, text: text.join(' ') };
}

/** The argument names of a tool's input schema (for results). */
export function argumentNames(tool: IndexedTool): string[] {
  return argumentsOf(tool.definition.inputSchema).names;
}

/** Fields and their weights (BM25F: a term's frequency counts this many times in that field). */
const FIELD_WEIGHTS = { name: 3, title: 2, description: 1, args: 1.5, argText: 0.5 } as const;
type Field = keyof typeof FIELD_WEIGHTS;
const K1 = 1.2;
const B = 0.75;
/** A word typed in part ("repo" for "repository") finds, weighted below a whole word. */
const PREFIX_WEIGHT = 0.5;
const MIN_PREFIX = 3;
const MAX_EXPANSIONS = 64;

interface Posting {
  docs: Int32Array;
  /** The term's BM25F score in each of `docs` (idf included): a query only adds them up. */
  scores: Float64Array;
}

/**
 * BM25F over an inverted index whose postings carry their final scores, so a query is a few array
 * walks into one accumulator — well under a millisecond at 10,000 tools (minisearch, measured first,
 * took 50–100 ms there: it builds a match record per document and term).
 */
export class ToolIndex<T extends IndexedTool = IndexedTool> {
  private readonly tools: T[];
  private readonly postings = new Map<string, Posting>();
  /** Every indexed term in code-unit order, for prefix matches. */
  private readonly terms: string[];
  private readonly accumulator: Float64Array;
  private readonly nameRank: Int32Array;

  constructor(tools: Iterable<T>) {
    this.tools = [...tools].filter((tool) => tool.verdict === 'allow' || tool.verdict === 'gated');
    const frequencies: Array<Map<string, number>> = [];
    const lengths: number[] = [];
    for (const tool of this.tools) {
      const args = argumentsOf(tool.definition.inputSchema);
      const fields: Record<Field, string> = {
        name: tool.exposed,
        title: tool.definition.title ?? '',
        description: (tool.definition.description ?? '').slice(0, 4000),
        args: args.names.join(' '),
        argText: args.text,
      };
      const tf = new Map<string, number>();
      let length = 0;
      for (const [field, weight] of Object.entries(FIELD_WEIGHTS) as Array<[Field, number]>) {
        for (const term of terms(fields[field])) {
          tf.set(term, (tf.get(term) ?? 0) + weight);
          length += weight;
        }
      }
      frequencies.push(tf);
      lengths.push(length);
    }
    const count = this.tools.length;
    const averageLength = lengths.reduce((a, b) => a + b, 0) / Math.max(1, count);
    const building = new Map<string, { docs: number[]; scores: number[] }>();
    for (const [doc, tf] of frequencies.entries()) {
      const norm = K1 * (1 - B + (B * (lengths[doc] as number)) / (averageLength || 1));
      for (const [term, frequency] of tf) {
        let posting = building.get(term);
        if (!posting) {
          posting = { docs: [], scores: [] };
          building.set(term, posting);
        }
        posting.docs.push(doc);
        posting.scores.push((frequency * (K1 + 1)) / (frequency + norm));
      }
    }
    for (const [term, posting] of building) {
      const df = posting.docs.length;
      const idf = Math.log(1 + (count - df + 0.5) / (df + 0.5));
      this.postings.set(term, {
        docs: Int32Array.from(posting.docs),
        scores: Float64Array.from(posting.scores, (score) => score * idf),
      });
    }
    this.terms = [...this.postings.keys()].sort();
    this.accumulator = new Float64Array(count);
    // Ties are broken by name: each tool's place in name order, so ranking compares numbers only.
    this.nameRank = new Int32Array(count);
    const byName = this.tools.map((tool, doc) => ({ name: tool.exposed, doc }));
    byName.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
    for (const [rank, { doc }] of byName.entries()) this.nameRank[doc] = rank;
  }

  get size(): number {
    return this.tools.length;
  }

  /**
   * Every tool matching `query` that `visible` lets through, best first (score, then name). At most
   * `max` hits: the ranking is a prefix, so a page never depends on how many more there are.
   */
  query(query: string, visible: (tool: T) => boolean, max: number): ToolHit<T>[] {
    const scores = this.accumulator;
    const touched: number[] = [];
    const add = (posting: Posting, weight: number) => {
      for (let i = 0; i < posting.docs.length; i++) {
        const doc = posting.docs[i] as number;
        if (scores[doc] === 0) touched.push(doc);
        scores[doc] = (scores[doc] as number) + (posting.scores[i] as number) * weight;
      }
    };
    for (const term of new Set(terms(query))) {
      const exact = this.postings.get(term);
      if (exact) add(exact, 1);
      if (term.length < MIN_PREFIX) continue;
      let at = lowerBound(this.terms, term);
      for (let n = 0; n < MAX_EXPANSIONS && at < this.terms.length; at++, n++) {
        const candidate = this.terms[at] as string;
        if (!candidate.startsWith(term)) break;
        if (candidate !== term)
          add(this.postings.get(candidate) as Posting, (PREFIX_WEIGHT * term.length) / candidate.length);
      }
    }
    const kept: number[] = [];
    for (const doc of touched) {
      // Rounded, so the rank order and the cursor's key order (meta-tools.ts) agree on ties.
      if (visible(this.tools[doc] as T)) {
        scores[doc] = Math.round((scores[doc] as number) * 1e6) / 1e6;
        kept.push(doc);
      } else scores[doc] = 0;
    }
    const rank = this.nameRank;
    kept.sort((x, y) => (scores[y] as number) - (scores[x] as number) || (rank[x] as number) - (rank[y] as number));
    const hits = kept.slice(0, max).map((doc) => ({ tool: this.tools[doc] as T, score: scores[doc] as number }));
    for (const doc of kept) scores[doc] = 0;
    return hits;
  }
}

/** A text's index terms (tokenized, folded, stop words out). */
function terms(text: string): string[] {
  const out: string[] = [];
  for (const word of tokenize(text)) {
    const term = processTerm(word);
    if (term) out.push(term);
  }
  return out;
}

/** The first index of `sorted` whose item is not below `key`. */
function lowerBound(sorted: readonly string[], key: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((sorted[mid] as string) < key) low = mid + 1;
    else high = mid;
  }
  return low;
}
