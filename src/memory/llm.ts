/**
 * The optional language-model client: an OpenAI-compatible `/chat/completions` endpoint (and
 * `/embeddings`, for search mode's optional embeddings), called through the egress guard with a
 * deadline and a response size cap. The key is kept sealed (AES-GCM, bound to the endpoint URL) and
 * opened only to build one request; it is never logged or returned.
 */
import { GatehouseError } from '../errors.js';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';
import { readCapped } from '../upstream-auth/fetch.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface LlmClientOptions {
  url: string;
  model: string;
  /** The model `embed` asks for (default `text-embedding-3-small`). */
  embeddingsModel?: string | undefined;
  apiKey?: string | undefined;
  sealKey: SealKey;
  timeoutMs: number;
  /** The egress guard's fetch. */
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** Largest answer accepted (default 1 MiB). */
  maxResponseBytes?: number;
  /** Largest embeddings answer accepted (default 8 MiB: a batch of vectors is bigger than a chat answer). */
  maxEmbeddingBytes?: number;
}

/** Most texts one `embed` request carries, and most dimensions a vector may have. */
export const MAX_EMBED_BATCH = 256;
const MAX_DIMENSIONS = 16_384;

type ErrorCode = 'memory.llm_failed' | 'search.embeddings_failed';

export class LlmClient {
  readonly model: string;
  readonly embeddingsModel: string;
  private readonly endpoint: string;
  private readonly embeddingsEndpoint: string;
  private readonly sealedKey: string | undefined;
  private readonly sealKey: SealKey;
  private readonly aad: Buffer;

  constructor(private readonly options: LlmClientOptions) {
    this.model = options.model;
    this.embeddingsModel = options.embeddingsModel ?? 'text-embedding-3-small';
    const base = options.url.replace(/\/+$/, '');
    this.endpoint = `${base}/chat/completions`;
    this.embeddingsEndpoint = `${base}/embeddings`;
    this.sealKey = options.sealKey;
    this.aad = aadFor(['memory.llm', this.endpoint]);
    this.sealedKey = options.apiKey ? seal(options.sealKey, options.apiKey, this.aad) : undefined;
  }

  /** One chat completion; resolves to the assistant's text. Failures are `memory.llm_failed`, never the key. */
  async chat(messages: ChatMessage[], options: { maxTokens?: number; json?: boolean } = {}): Promise<string> {
    const body = {
      model: this.model,
      messages,
      temperature: 0,
      ...(options.maxTokens ? { max_tokens: options.maxTokens } : {}),
      ...(options.json ? { response_format: { type: 'json_object' } } : {}),
    };
    const parsed = await this.post(this.endpoint, body, 'memory.llm_failed', {
      timeoutMs: this.options.timeoutMs,
      maxBytes: this.options.maxResponseBytes ?? 1024 * 1024,
    });
    const content = (parsed as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
    if (typeof content !== 'string') {
      throw new GatehouseError('memory.llm_failed', 'The language-model answer has no choices[0].message.content.', {
        reason: 'shape',
      });
    }
    return content;
  }

  /**
   * One embedding per text, in order (OpenAI shape: `{model, input}` → `data[i].embedding`), from
   * `{url}/embeddings` under the same guard, key and response cap as `chat`; `timeoutMs` shortens the
   * deadline (a search's query). Failures are `search.embeddings_failed`, with a `reason`, never the key.
   */
  async embed(texts: string[], options: { timeoutMs?: number } = {}): Promise<number[][]> {
    if (texts.length === 0) return [];
    if (texts.length > MAX_EMBED_BATCH) {
      throw new GatehouseError('search.embeddings_failed', `At most ${MAX_EMBED_BATCH} texts per request.`, {
        reason: 'batch',
      });
    }
    const parsed = await this.post(
      this.embeddingsEndpoint,
      { model: this.embeddingsModel, input: texts },
      'search.embeddings_failed',
      {
        timeoutMs: Math.min(options.timeoutMs ?? this.options.timeoutMs, this.options.timeoutMs),
        maxBytes: this.options.maxEmbeddingBytes ?? 8 * 1024 * 1024,
      },
    );
    const data = (parsed as { data?: unknown }).data;
    const shape = (detail: string) =>
      new GatehouseError('search.embeddings_failed', `The embeddings answer is unusable: ${detail}.`, {
        reason: 'shape',
      });
    if (!Array.isArray(data) || data.length !== texts.length) throw shape(`expected data[] of ${texts.length}`);
    const vectors: number[][] = new Array(texts.length);
    let dimensions = 0;
    for (const [position, item] of data.entries()) {
      const { embedding, index } = (item ?? {}) as { embedding?: unknown; index?: unknown };
      // `index` says which input a vector belongs to; without one, the answer's order is the input's.
      const at = index === undefined ? position : index;
      if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at >= texts.length || vectors[at]) {
        throw shape('data[].index out of place');
      }
      if (!Array.isArray(embedding) || embedding.length === 0 || embedding.length > MAX_DIMENSIONS) {
        throw shape('data[].embedding is not a vector');
      }
      if (!embedding.every((x) => typeof x === 'number' && Number.isFinite(x))) {
        throw shape('data[].embedding holds a non-number');
      }
      if (dimensions !== 0 && embedding.length !== dimensions) throw shape('vectors of different lengths');
      dimensions = embedding.length;
      vectors[at] = embedding as number[];
    }
    return vectors;
  }

  /** One POST of JSON under a deadline and a size cap; resolves to the parsed answer. */
  private async post(
    url: string,
    body: unknown,
    code: ErrorCode,
    limits: { timeoutMs: number; maxBytes: number },
  ): Promise<unknown> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.sealedKey) headers.authorization = `Bearer ${unseal(this.sealKey, this.sealedKey, this.aad)}`;
    const signal = AbortSignal.timeout(limits.timeoutMs);
    const timedOut = (error: unknown) => (error as { name?: string })?.name === 'TimeoutError' || signal.aborted;
    const late = () =>
      new GatehouseError(code, `The language-model endpoint did not answer within ${limits.timeoutMs} ms.`, {
        reason: 'timeout',
      });
    let response: Response;
    try {
      response = await this.options.fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal });
    } catch (error) {
      if (timedOut(error)) throw late();
      const known = error instanceof GatehouseError ? error : undefined;
      throw new GatehouseError(
        code,
        `The language-model endpoint could not be reached${known ? `: ${known.message}` : '.'}`,
        { reason: known?.code ?? 'unreachable' },
      );
    }
    let text: string;
    try {
      // Refused as the cap is passed, the rest never read (not buffered whole, then measured).
      const raw = await readCapped(response, limits.maxBytes, signal);
      text = raw ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8') : '';
    } catch (error) {
      // The deadline covers the body too: a server that sends headers and then stalls is late, not broken.
      if (timedOut(error)) throw late();
      throw new GatehouseError(code, 'The language-model answer was unreadable or too large.', { reason: 'response' });
    }
    if (!response.ok) {
      throw new GatehouseError(code, `The language-model endpoint answered HTTP ${response.status}.`, {
        reason: `http_${response.status}`,
      });
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new GatehouseError(code, 'The language-model endpoint did not answer JSON.', { reason: 'not_json' });
    }
  }
}
