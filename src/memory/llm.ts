/**
 * The optional language-model client: an OpenAI-compatible `/chat/completions`
 * endpoint, called through the egress guard with a deadline and a response
 * size cap. The key is kept sealed (AES-GCM, bound to the endpoint URL) and
 * opened only to build one request; it is never logged or returned.
 */
import { GatehouseError } from '../errors.js';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface LlmClientOptions {
  url: string;
  model: string;
  apiKey?: string | undefined;
  sealKey: SealKey;
  timeoutMs: number;
  /** The egress guard's fetch. */
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** Largest answer accepted (default 1 MiB). */
  maxResponseBytes?: number;
}

export class LlmClient {
  readonly model: string;
  private readonly endpoint: string;
  private readonly sealedKey: string | undefined;
  private readonly sealKey: SealKey;
  private readonly aad: Buffer;

  constructor(private readonly options: LlmClientOptions) {
    this.model = options.model;
    this.endpoint = `${options.url.replace(/\/+$/, '')}/chat/completions`;
    this.sealKey = options.sealKey;
    this.aad = aadFor(['memory.llm', this.endpoint]);
    this.sealedKey = options.apiKey ? seal(options.sealKey, options.apiKey, this.aad) : undefined;
  }

  /** One chat completion; resolves to the assistant's text. Failures are `memory.llm_failed`, never the key. */
  async chat(messages: ChatMessage[], options: { maxTokens?: number; json?: boolean } = {}): Promise<string> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.sealedKey) headers.authorization = `Bearer ${unseal(this.sealKey, this.sealedKey, this.aad)}`;
    const body = {
      model: this.model,
      messages,
      temperature: 0,
      ...(options.maxTokens ? { max_tokens: options.maxTokens } : {}),
      ...(options.json ? { response_format: { type: 'json_object' } } : {}),
    };
    let response: Response;
    try {
      response = await this.options.fetch(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (error) {
      const known = error instanceof GatehouseError ? error : undefined;
      const timedOut = (error as { name?: string })?.name === 'TimeoutError';
      throw new GatehouseError(
        'memory.llm_failed',
        timedOut
          ? `The language-model endpoint did not answer within ${this.options.timeoutMs} ms.`
          : `The language-model endpoint could not be reached${known ? `: ${known.message}` : '.'}`,
        { reason: timedOut ? 'timeout' : (known?.code ?? 'unreachable') },
      );
    }
    const limit = this.options.maxResponseBytes ?? 1024 * 1024;
    let text: string;
    try {
      const raw = await response.arrayBuffer();
      if (raw.byteLength > limit) throw new Error('too large');
      text = Buffer.from(raw).toString('utf8');
    } catch {
      throw new GatehouseError('memory.llm_failed', 'The language-model answer was unreadable or too large.', {
        reason: 'response',
      });
    }
    if (!response.ok) {
      throw new GatehouseError('memory.llm_failed', `The language-model endpoint answered HTTP ${response.status}.`, {
        reason: `http_${response.status}`,
      });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new GatehouseError('memory.llm_failed', 'The language-model endpoint did not answer JSON.', {
        reason: 'not_json',
      });
    }
    const content = (parsed as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
    if (typeof content !== 'string') {
      throw new GatehouseError('memory.llm_failed', 'The language-model answer has no choices[0].message.content.', {
        reason: 'shape',
      });
    }
    return content;
  }
}
