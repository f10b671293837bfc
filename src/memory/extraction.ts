/** Fact extraction: asking the language model for a document's facts, and reading its answer defensively. */
import { GatehouseError } from '../errors.js';
import type { LlmClient } from './llm.js';
import type { ExtractedFact, NewMemory } from './types.js';

const MAX_EXTRACTED_FACTS = 50;

const EXTRACTION_PROMPT =
  'Extract the durable facts from the document as JSON: {"facts": [{"text": one self-contained fact, ' +
  '"fact_type": "world" (about the world) or "experience" (what the author did or experienced), ' +
  '"entities": [names], "occurred_start"?: ISO date, "occurred_end"?: ISO date}]}. ' +
  'Answer {"facts": []} when there is nothing worth remembering. Never invent facts.';

/** The language model when configured, otherwise the document as one fact. */
export async function extractFacts(
  llm: LlmClient | undefined,
  text: string,
  hints: NewMemory,
  signal: AbortSignal,
): Promise<ExtractedFact[]> {
  if (!llm) return [{ text }];
  const answer = await llm.chat(
    [
      { role: 'system', content: EXTRACTION_PROMPT },
      { role: 'user', content: hints.context ? `Context: ${hints.context}\n\nDocument:\n${text}` : text },
    ],
    { json: true, maxTokens: 2000 },
  );
  if (signal.aborted) throw new GatehouseError('memory.operation_state', 'The operation was cancelled.');
  return parseExtraction(answer);
}

/** Parses the extraction answer: `{"facts": [{text, fact_type?, entities?, occurred_start?, occurred_end?}]}`. */
export function parseExtraction(answer: string): ExtractedFact[] {
  const trimmed = answer
    .trim()
    .replace(/^```(?:json)?\s*/i, '')
    .replace(/```$/, '');
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    throw new GatehouseError('memory.llm_failed', 'The fact extraction answer is not JSON.', { reason: 'not_json' });
  }
  const facts = (parsed as { facts?: unknown }).facts;
  if (!Array.isArray(facts)) {
    throw new GatehouseError('memory.llm_failed', 'The fact extraction answer has no "facts" list.', {
      reason: 'shape',
    });
  }
  const out: ExtractedFact[] = [];
  for (const fact of facts.slice(0, MAX_EXTRACTED_FACTS)) {
    const f = (typeof fact === 'string' ? { text: fact } : fact) as Record<string, unknown>;
    if (typeof f?.text !== 'string' || f.text.trim() === '') continue;
    out.push({
      text: f.text.trim().slice(0, 8000),
      ...(f.fact_type === 'world' || f.fact_type === 'experience' ? { fact_type: f.fact_type } : {}),
      ...(Array.isArray(f.entities)
        ? { entities: f.entities.filter((e): e is string => typeof e === 'string').slice(0, 50) }
        : {}),
      ...(typeof f.occurred_start === 'string' ? { occurred_start: f.occurred_start } : {}),
      ...(typeof f.occurred_end === 'string' ? { occurred_end: f.occurred_end } : {}),
    });
  }
  return out;
}
