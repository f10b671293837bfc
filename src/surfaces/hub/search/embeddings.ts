/**
 * Search mode's optional embeddings (`GATEHOUSE_SEARCH_EMBEDDINGS=on`): one vector per tool document
 * (the very text BM25 indexes, `documentText`), computed through the configured language-model
 * endpoint in batches, in the background whenever a new index is built — never on a search's path —
 * and cached by a hash of the text, so a tool whose text did not change is never embedded again. A
 * search embeds its query (one request, a short deadline, the last few queries cached) and ranks by
 * BM25 fused with cosine similarity (`ToolIndex.query`).
 *
 * Embeddings only ever add: any failure — the endpoint down, slow, answering nonsense — leaves that
 * search to BM25 alone, without an error for the agent. The first failure is logged (once, until the
 * endpoint answers again) and the endpoint is left alone for a while, so a dead endpoint costs at most
 * one deadline per retry period, not one per search.
 */
import { createHash } from 'node:crypto';
import { findGatehouseError } from '../../../errors.js';
import type { Logger } from '../../../logging.js';
import { documentText, type IndexedTool, type SemanticQuery, type ToolIndex, yieldToLoop } from './tool-index.js';

/** What computes embeddings (the `LlmClient`). */
export interface Embedder {
  embed(texts: string[], options?: { timeoutMs?: number }): Promise<number[][]>;
}

export interface ToolEmbeddingsOptions {
  embedder: Embedder;
  logger: Pick<Logger, 'warn' | 'info'>;
  /** Deadline for a query's embedding (`GATEHOUSE_EMBEDDINGS_TIMEOUT_MS`). */
  queryTimeoutMs: number;
  /** `GATEHOUSE_EMBEDDINGS_MIN_SIMILARITY`. */
  minSimilarity: number;
  /** Texts per embeddings request (default 32). */
  batchSize?: number;
  /** How long the endpoint is left alone after a failure (default 30 s). */
  retryMs?: number;
  /** Test seam: the clock. */
  now?: () => number;
}

/** An index's vectors, in its document order; `complete` when every document has one. */
interface Aligned {
  vectors: Array<Float32Array | undefined>;
  complete: boolean;
  /** How many documents have one. */
  embedded: number;
}

/** Queries whose vectors are kept (paging through a search, or the same search again, asks nothing). */
const QUERY_CACHE = 256;

export class ToolEmbeddings {
  /** Unit vectors by the hash of their text. */
  private readonly cache = new Map<string, Float32Array>();
  private readonly queries = new Map<string, Float32Array>();
  private readonly aligned = new WeakMap<object, Aligned>();
  private readonly batchSize: number;
  private readonly retryMs: number;
  private readonly now: () => number;
  /** The newest index asked for; a pass for an older one stops at its next batch. */
  private latest: ToolIndex<IndexedTool> | undefined;
  private running: Promise<void> | undefined;
  private failing = false;
  private retryAt = 0;

  constructor(private readonly options: ToolEmbeddingsOptions) {
    this.batchSize = options.batchSize ?? 32;
    this.retryMs = options.retryMs ?? 30_000;
    this.now = options.now ?? Date.now;
  }

  /** Starts embedding `index`'s documents in the background (those not cached yet). Never throws. */
  prepare(index: ToolIndex<IndexedTool>): void {
    this.latest = index;
    if (this.running) return;
    const loop = async () => {
      // A newer index asked for while a pass ran gets its own pass after it.
      for (let done: ToolIndex<IndexedTool> | undefined; done !== this.latest; ) {
        done = this.latest as ToolIndex<IndexedTool>;
        if (!(await this.pass(done))) break;
      }
    };
    this.running = loop()
      .catch(() => undefined)
      .finally(() => {
        this.running = undefined;
      });
  }

  /** Resolves once no pass is under way (tests and the bench wait on it). */
  async settled(): Promise<void> {
    while (this.running) await this.running;
  }

  /**
   * The semantic half of a search of `index` for `query`, or undefined: BM25 alone (nothing embedded
   * yet, the endpoint failing or backing off, the query's embedding late). Never throws.
   */
  async semantic(index: ToolIndex<IndexedTool>, query: string): Promise<SemanticQuery | undefined> {
    const aligned = this.aligned.get(index);
    if (!aligned?.complete && !this.running && !this.backingOff()) this.prepare(index);
    if (!aligned || aligned.embedded === 0) return undefined;
    const vector = await this.queryVector(query);
    if (!vector || vector.length === 0) return undefined;
    return { vectors: aligned.vectors, query: vector, minSimilarity: this.options.minSimilarity };
  }

  private backingOff(): boolean {
    return this.failing && this.now() < this.retryAt;
  }

  private async queryVector(query: string): Promise<Float32Array | undefined> {
    const cached = this.queries.get(query);
    if (cached) {
      // Most recently used last: the first key is the one to drop.
      this.queries.delete(query);
      this.queries.set(query, cached);
      return cached;
    }
    if (this.backingOff()) return undefined;
    let vector: Float32Array;
    try {
      const [raw] = await this.options.embedder.embed([query], { timeoutMs: this.options.queryTimeoutMs });
      vector = unit(raw as number[]);
    } catch (error) {
      this.failed(error);
      return undefined;
    }
    this.recovered();
    this.queries.set(query, vector);
    if (this.queries.size > QUERY_CACHE) this.queries.delete(this.queries.keys().next().value as string);
    return vector;
  }

  /**
   * Embeds `index`'s documents not cached yet, in batches, then records its aligned vectors. Answers
   * false when it stopped on a failure (the rest waits for a retry: a later search, or a new catalog).
   */
  private async pass(index: ToolIndex<IndexedTool>): Promise<boolean> {
    const tools = index.documents;
    const hashes: string[] = new Array(tools.length);
    const missing = new Map<string, string>();
    for (const [doc, tool] of tools.entries()) {
      const text = documentText(tool);
      const hash = createHash('sha256').update(text).digest('base64url');
      hashes[doc] = hash;
      if (!this.cache.has(hash)) missing.set(hash, text);
      if (doc % 512 === 511) await yieldToLoop();
    }
    let ok = true;
    const pending = [...missing];
    for (let at = 0; at < pending.length; at += this.batchSize) {
      if (this.latest !== index) return true;
      if (this.backingOff()) {
        ok = false;
        break;
      }
      const batch = pending.slice(at, at + this.batchSize);
      try {
        const vectors = await this.options.embedder.embed(batch.map(([, text]) => text));
        for (const [i, [hash]] of batch.entries()) this.cache.set(hash, unit(vectors[i] as number[]));
        this.recovered();
      } catch (error) {
        this.failed(error);
        ok = false;
        break;
      }
    }
    const vectors = hashes.map((hash) => this.cache.get(hash));
    const embedded = vectors.filter(Boolean).length;
    const complete = ok && embedded === vectors.length;
    this.aligned.set(index, { vectors, complete, embedded });
    // Only the newest catalog's texts are kept: a removed tool's vector goes with it.
    if (complete && this.latest === index) {
      const keep = new Set(hashes);
      for (const hash of this.cache.keys()) if (!keep.has(hash)) this.cache.delete(hash);
    }
    return ok;
  }

  private failed(error: unknown): void {
    this.retryAt = this.now() + this.retryMs;
    if (this.failing) return;
    this.failing = true;
    const known = findGatehouseError(error);
    this.options.logger.warn(
      { code: known?.code ?? 'search.embeddings_failed', reason: known?.details?.reason, retryMs: this.retryMs },
      'Search embeddings failed: search ranks with BM25 alone until the endpoint answers again',
    );
  }

  private recovered(): void {
    if (!this.failing) return;
    this.failing = false;
    this.options.logger.info('Search embeddings answer again: search ranks with BM25 and embeddings');
  }
}

/**
 * The vector scaled to length 1 (cosine similarity is then a dot product). A zero vector becomes an
 * empty one: kept (never asked again), it matches nothing.
 */
function unit(raw: readonly number[]): Float32Array {
  let norm = 0;
  for (const x of raw) norm += x * x;
  norm = Math.sqrt(norm);
  if (!(norm > 0) || !Number.isFinite(norm)) return new Float32Array(0);
  const vector = new Float32Array(raw.length);
  for (let i = 0; i < raw.length; i++) vector[i] = (raw[i] as number) / norm;
  return vector;
}
