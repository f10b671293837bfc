/**
 * The search index of search mode: BM25F over every listed tool of the catalog — its
 * aggregated name, title, description and argument names (with their descriptions, weighted less).
 * One index per catalog snapshot, built in the background in slices (`ToolIndex.build`); what a caller
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
  /** BM25 score, or with embeddings the fused one (higher first). */
  score: number;
  /** With `distinct`: the other visible tools of the very same definition, in name order. */
  copies?: T[];
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

/** A tool's indexed text, per field. */
function fieldsOf(tool: IndexedTool): Record<Field, string> {
  const { definition } = tool;
  const args = argumentsOf(definition.inputSchema);
  return {
    name: tool.exposed,
    title: definition.title ?? '',
    description: (definition.description ?? '').slice(0, 4000),
    args: args.names.join(' '),
    argText: args.text,
  };
}

/** The text BM25 indexes for a tool, as one document (what search mode's optional embeddings embed). */
export function documentText(tool: IndexedTool): string {
  const { name, title, description, args, argText } = fieldsOf(tool);
  return [name, title, description, args && `Arguments: ${args}`, argText].filter(Boolean).join('\n');
}

/**
 * The semantic half of a hybrid search (`ToolIndex.query`): unit vectors of the index's documents
 * (in its order; absent for a document not embedded) and of the query.
 */
export interface SemanticQuery {
  vectors: ReadonlyArray<Float32Array | undefined>;
  query: Float32Array;
  /** Least cosine similarity for a document to rank by meaning. */
  minSimilarity: number;
}

/** How many documents, most similar first, the semantic ranking contributes to the fusion. */
const SEMANTIC_DEPTH = 50;
/** Reciprocal-rank fusion's constant: a document at rank r of a ranking adds 1/(RRF_K + r). */
const RRF_K = 60;
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

/** What an index is made of (built in steps by `indexing`). */
interface IndexData<T> {
  tools: T[];
  postings: Map<string, Posting>;
  terms: string[];
  /** Per tool, its definition's group: tools with identical definitions (copies on several servers) share one. */
  copyGroup: Int32Array;
}

/** Tools handled between two yields of `indexing` (a yield is where a background build may pause). */
const STEP_TOOLS = 32;
const STEP_POSTINGS = 8192;

/**
 * The index's construction as steps: it yields every few dozen tools or few thousand postings, so a
 * background build can give the event loop back between them (`ToolIndex.build`).
 */
function* indexing<T extends IndexedTool>(input: Iterable<T>): Generator<void, IndexData<T>, void> {
  // Documents are numbered in name order, so a tie on score is broken by comparing numbers only.
  const tools = [...input]
    .filter((tool) => tool.verdict === 'allow' || tool.verdict === 'gated')
    .sort((x, y) => (x.exposed < y.exposed ? -1 : x.exposed > y.exposed ? 1 : 0));
  yield;
  const frequencies: Array<Map<string, number>> = [];
  const lengths: number[] = [];
  const copyGroup = new Int32Array(tools.length);
  const groups = new Map<string, number>();
  for (const [doc, tool] of tools.entries()) {
    const { definition } = tool;
    const fields = fieldsOf(tool);
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
    // Copies: the same upstream name, title, description and input schema (a server added twice).
    const key = JSON.stringify([definition.name, definition.title, definition.description, definition.inputSchema]);
    let group = groups.get(key);
    if (group === undefined) {
      group = groups.size;
      groups.set(key, group);
    }
    copyGroup[doc] = group;
    if (doc % STEP_TOOLS === STEP_TOOLS - 1) yield;
  }
  const count = tools.length;
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
    if (doc % STEP_TOOLS === STEP_TOOLS - 1) yield;
  }
  const postings = new Map<string, Posting>();
  // Counted in postings written, not terms: a common term alone can cover every tool.
  let done = 0;
  for (const [term, posting] of building) {
    const df = posting.docs.length;
    const idf = Math.log(1 + (count - df + 0.5) / (df + 0.5));
    const scores = new Float64Array(df);
    for (let i = 0; i < df; i++) scores[i] = (posting.scores[i] as number) * idf;
    postings.set(term, { docs: Int32Array.from(posting.docs), scores });
    done += df;
    if (done >= STEP_POSTINGS) {
      done = 0;
      yield;
    }
  }
  const sortedTerms = [...postings.keys()].sort();
  return { tools, postings, terms: sortedTerms, copyGroup };
}

/** Gives the event loop back: timers, I/O and other requests run before the build goes on. */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** How long a background build may run before it yields (a search waits at most about this long). */
const SLICE_MS = 8;

/** What a query lets through: true (this tool), the tool to report instead (a newer version of it), or no. */
export type Visibility<T> = (tool: T) => T | boolean | undefined;

/**
 * BM25F over an inverted index whose postings carry their final scores, so a query is a few array
 * walks into one accumulator — well under a millisecond at 10,000 tools (minisearch, measured first,
 * took 50–100 ms there: it builds a match record per document and term).
 */
export class ToolIndex<T extends IndexedTool = IndexedTool> {
  private readonly tools: T[];
  private readonly postings: Map<string, Posting>;
  /** Every indexed term in code-unit order, for prefix matches. */
  private readonly terms: string[];
  private readonly accumulator: Float64Array;
  /** Scratch of a hybrid query (`fuse`), all zeros between queries. */
  private readonly marks: Uint8Array;
  private readonly copyGroup: Int32Array;

  private constructor(data: IndexData<T>) {
    this.tools = data.tools;
    this.postings = data.postings;
    this.terms = data.terms;
    this.copyGroup = data.copyGroup;
    this.accumulator = new Float64Array(data.tools.length);
    this.marks = new Uint8Array(data.tools.length);
  }

  /** Built at once (tests, the bench, small catalogs). */
  static of<T extends IndexedTool>(tools: Iterable<T>): ToolIndex<T> {
    const steps = indexing(tools);
    for (let step = steps.next(); ; step = steps.next()) if (step.done) return new ToolIndex(step.value);
  }

  /**
   * Built in slices of about `sliceMs`, awaiting `pause` between them, so the event loop is never held
   * long (10,000 tools take 1–2 s of CPU under load: built at once, every request would wait that long).
   */
  static async build<T extends IndexedTool>(
    tools: Iterable<T>,
    pause: () => Promise<void> = yieldToLoop,
    sliceMs = SLICE_MS,
  ): Promise<ToolIndex<T>> {
    const steps = indexing(tools);
    let sliceStart = performance.now();
    for (let step = steps.next(); ; step = steps.next()) {
      if (step.done) return new ToolIndex(step.value);
      if (performance.now() - sliceStart >= sliceMs) {
        await pause();
        sliceStart = performance.now();
      }
    }
  }

  get size(): number {
    return this.tools.length;
  }

  /** The indexed tools, in document order (the order `SemanticQuery.vectors` follows). */
  get documents(): readonly T[] {
    return this.tools;
  }

  /**
   * Every tool matching `query` that `visible` lets through, best first (score, then name). At most
   * `max` hits: the ranking is a prefix, so a page never depends on how many more there are. With
   * `distinct`, identical definitions (one tool on several servers) make one hit, its best-ranked copy,
   * carrying the others in `copies` (in name order): otherwise a tool carried by many servers fills every page.
   */
  query(query: string, visible: Visibility<T>, max: number, distinct = false, semantic?: SemanticQuery): ToolHit<T>[] {
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
    const visibleDocs: number[] = [];
    const shown = new Map<number, T>();
    for (const doc of touched) {
      const tool = this.tools[doc] as T;
      const seen = visible(tool);
      // Rounded, so the rank order and the cursor's key order (meta-tools.ts) agree on ties.
      if (seen) {
        scores[doc] = Math.round((scores[doc] as number) * 1e6) / 1e6;
        visibleDocs.push(doc);
        if (seen !== true) shown.set(doc, seen);
      } else scores[doc] = 0;
    }
    if (semantic) this.fuse(semantic, touched, visibleDocs, shown, visible);
    // Name order (documents are numbered so), then best first: score, ties by name.
    const kept = Int32Array.from(visibleDocs).sort();
    const byRank = (x: number, y: number) => (scores[y] as number) - (scores[x] as number) || x - y;
    const toolOf = (doc: number) => shown.get(doc) ?? (this.tools[doc] as T);
    const hits: ToolHit<T>[] = [];
    if (distinct) {
      // Per group of copies: its best document, and every member in name order. Only the groups are ranked.
      const best = new Map<number, number>();
      const members = new Map<number, number[]>();
      for (const doc of kept) {
        const group = this.copyGroup[doc] as number;
        const first = best.get(group);
        if (first === undefined) {
          best.set(group, doc);
          members.set(group, [doc]);
        } else {
          if ((scores[doc] as number) > (scores[first] as number)) best.set(group, doc);
          (members.get(group) as number[]).push(doc);
        }
      }
      const ranked = [...best.values()].sort(byRank).slice(0, max);
      for (const doc of ranked) {
        const hit: ToolHit<T> = { tool: toolOf(doc), score: scores[doc] as number };
        const copies = (members.get(this.copyGroup[doc] as number) as number[]).filter((other) => other !== doc);
        if (copies.length > 0) hit.copies = copies.map(toolOf);
        hits.push(hit);
      }
    } else {
      const ranked = Array.from(kept).sort(byRank).slice(0, max);
      for (const doc of ranked) hits.push({ tool: toolOf(doc), score: scores[doc] as number });
    }
    for (const doc of kept) scores[doc] = 0;
    return hits;
  }

  /**
   * Hybrid ranking: the BM25 ranking of `visibleDocs` and the cosine ranking of the most similar visible
   * documents (those at `minSimilarity` or above, at most SEMANTIC_DEPTH) fused by reciprocal rank, so
   * neither scale dominates; a document only the vectors find joins `visibleDocs`. The fused score
   * replaces the BM25 one in the accumulator (rounded the same way, ties still by name).
   */
  private fuse(
    semantic: SemanticQuery,
    touched: readonly number[],
    visibleDocs: number[],
    shown: Map<number, T>,
    visible: Visibility<T>,
  ): void {
    const scores = this.accumulator;
    const { vectors, query, minSimilarity } = semantic;
    const similar: Array<{ doc: number; cosine: number }> = [];
    for (let doc = 0; doc < this.tools.length; doc++) {
      const vector = vectors[doc];
      if (!vector || vector.length !== query.length) continue;
      const dot = dotProduct(vector, query);
      if (dot >= minSimilarity) similar.push({ doc, cosine: dot });
    }
    similar.sort((x, y) => y.cosine - x.cosine || x.doc - y.doc);
    // Per document: 1 seen by BM25 but not visible, 2 visible (scratch, cleared before returning).
    const marks = this.marks;
    for (const doc of touched) marks[doc] = 1;
    for (const doc of visibleDocs) marks[doc] = 2;
    const semanticRank: number[] = [];
    for (const { doc } of similar) {
      if (semanticRank.length >= SEMANTIC_DEPTH) break;
      if (marks[doc] === 0) {
        const seen = visible(this.tools[doc] as T);
        marks[doc] = seen ? 2 : 1;
        if (!seen) continue;
        visibleDocs.push(doc);
        if (seen !== true) shown.set(doc, seen);
      } else if (marks[doc] !== 2) continue;
      semanticRank.push(doc);
    }
    const lexicalRank = Int32Array.from(visibleDocs.filter((doc) => (scores[doc] as number) > 0)).sort(
      (x, y) => (scores[y] as number) - (scores[x] as number) || x - y,
    );
    for (const doc of visibleDocs) scores[doc] = 0;
    for (let i = 0; i < lexicalRank.length; i++) scores[lexicalRank[i] as number] = 1 / (RRF_K + i + 1);
    for (let i = 0; i < semanticRank.length; i++) {
      const doc = semanticRank[i] as number;
      scores[doc] = (scores[doc] as number) + 1 / (RRF_K + i + 1);
    }
    // Scaled so the rounding to 1e-6 (the cursor's precision) keeps rank differences far down the list.
    for (const doc of visibleDocs) scores[doc] = Math.round((scores[doc] as number) * 1e9) / 1e6;
    for (const doc of touched) marks[doc] = 0;
    for (const { doc } of similar) marks[doc] = 0;
  }
}

/**
 * The dot product of two vectors of one length, four lanes at a time (about twice as fast as one: a
 * hybrid search scans every document's vector, 10,000 × 1,536 dimensions at 10,000 tools).
 */
function dotProduct(a: Float32Array, b: Float32Array): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  const end = a.length - (a.length % 4);
  let i = 0;
  for (; i < end; i += 4) {
    s0 += (a[i] as number) * (b[i] as number);
    s1 += (a[i + 1] as number) * (b[i + 1] as number);
    s2 += (a[i + 2] as number) * (b[i + 2] as number);
    s3 += (a[i + 3] as number) * (b[i + 3] as number);
  }
  for (; i < a.length; i++) s0 += (a[i] as number) * (b[i] as number);
  return s0 + s1 + s2 + s3;
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
