/**
 * Recall and reflect: token-budgeted recall with near-duplicates collapsed, and an answer the language
 * model synthesises from recalled facts only.
 */
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { activeDirectives } from './directives.js';
import { searchUnits } from './search.js';
import { estimateTokens, jaccard, wordSet } from './text.js';
import { BUDGET_CANDIDATES, type Budget, MAX_RECALL_TOKENS, type SearchResult } from './types.js';
import { toResult } from './views.js';

/** Word overlap at which two recalled facts count as one. */
const RECALL_COLLAPSE = 0.8;

export type RecalledResult = SearchResult & { collapsed?: string[] };

export interface RecallOptions {
  datasets: readonly string[];
  max_tokens: number;
  budget: Budget;
  tags?: string[] | undefined;
}

// A type, not an interface: callers pass it on as a `Record<string, unknown>` payload.
export type RecallAnswer = {
  results: RecalledResult[];
  tokens: number;
  max_tokens: number;
  budget: Budget;
  truncated: boolean;
};

/**
 * Token-budgeted, consolidated recall: `budget` sets how many candidates are considered, near-duplicates
 * (word overlap ≥ 0.8) collapse into the best-scored one, and results are packed best first until
 * `max_tokens` would be exceeded.
 */
export async function recall(ctx: MemoryContext, query: string, options: RecallOptions): Promise<RecallAnswer> {
  return withStore(async () => {
    const candidates = await searchUnits(
      ctx.store,
      query,
      { datasets: options.datasets, tags: options.tags },
      BUDGET_CANDIDATES[options.budget],
    );
    const kept: { result: RecalledResult; words: Set<string> }[] = [];
    for (const candidate of candidates) {
      const words = wordSet(candidate.row.text);
      const twin = kept.find((k) => jaccard(k.words, words) >= RECALL_COLLAPSE);
      if (twin) {
        twin.result.collapsed = [...(twin.result.collapsed ?? []), candidate.row.id];
        continue;
      }
      kept.push({ result: toResult(candidate), words });
    }
    const results: RecalledResult[] = [];
    let tokens = 0;
    let truncated = false;
    for (const { result } of kept) {
      const cost = estimateTokens(result.text) + (result.context ? estimateTokens(result.context) : 0) + 8;
      if (tokens + cost > options.max_tokens) {
        truncated = true;
        continue; // a shorter, lower-ranked fact may still fit
      }
      tokens += cost;
      results.push(result);
    }
    return { results, tokens, max_tokens: options.max_tokens, budget: options.budget, truncated };
  });
}

export interface ReflectOptions {
  datasets: readonly string[];
  max_tokens: number;
  budget: Budget;
}

/** An answer synthesised by the language model from recalled facts only; `unsupported` without one. */
export async function reflect(
  ctx: MemoryContext,
  query: string,
  options: ReflectOptions,
): Promise<Record<string, unknown>> {
  const llm = ctx.llm;
  if (!llm) {
    return {
      status: 'unsupported',
      reason: 'No language-model endpoint is configured (GATEHOUSE_LLM_URL); reflect needs one.',
    };
  }
  const recalled = await recall(ctx, query, {
    datasets: options.datasets,
    budget: options.budget,
    max_tokens: Math.min(options.max_tokens, MAX_RECALL_TOKENS),
  });
  if (recalled.results.length === 0) {
    return {
      status: 'ok',
      text: '',
      based_on: [],
      notice: 'No memory matched the query; nothing to reflect on.',
    };
  }
  const directives = await activeDirectives(ctx);
  const facts = recalled.results.map((r, i) => `[${i + 1}] (${r.id}) ${r.text}`).join('\n');
  const text = await llm.chat(
    [
      {
        role: 'system',
        content:
          'Answer the question using only the numbered memory facts given. Cite facts as [n]. ' +
          'If the facts do not answer it, say so.' +
          (directives.length > 0 ? `\nStanding directives:\n${directives.map((d) => `- ${d}`).join('\n')}` : ''),
      },
      { role: 'user', content: `Facts:\n${facts}\n\nQuestion: ${query}` },
    ],
    { maxTokens: Math.min(options.max_tokens, 4096) },
  );
  return {
    status: 'ok',
    text,
    based_on: recalled.results.map((r) => ({ id: r.id, text: r.text, score: r.score })),
    model: llm.model,
  };
}
