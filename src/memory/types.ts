/** The memory engine's public shapes and limits: what callers pass in and get back. */

export type FactType = 'world' | 'experience';
export type UnitState = 'valid' | 'invalidated';
export type Budget = 'low' | 'mid' | 'high';
export type OperationStatus = 'pending' | 'processing' | 'completed' | 'failed' | 'cancelled';
export type OperationKind = 'retain' | 'consolidation' | 'refresh';

/** The datasets a caller may touch by id: a list, or a test. */
export type DatasetScope = readonly string[] | ((dataset: string) => boolean);

export interface Actor {
  id: string;
  name: string;
}

export interface MemoryUnit {
  id: string;
  text: string;
  context: string | null;
  fact_type: FactType;
  entities: string[];
  tags: string[];
  occurred_start: string | null;
  occurred_end: string | null;
  state: UnitState;
  dataset: string;
  source: string;
  document_id: string | null;
  metadata: Record<string, unknown>;
  timestamp: string;
  updated_at: string;
}

export interface SearchResult {
  id: string;
  text: string;
  score: number;
  timestamp: string;
  dataset: string;
  tags: string[];
  source: string;
  metadata: Record<string, unknown>;
  context: string | null;
  fact_type: FactType;
  entities: string[];
  occurred_start: string | null;
  occurred_end: string | null;
}

export interface NewMemory {
  text: string;
  context?: string | undefined;
  fact_type?: FactType | undefined;
  entities?: string[] | undefined;
  tags?: string[] | undefined;
  occurred_start?: string | undefined;
  occurred_end?: string | undefined;
  metadata?: Record<string, unknown> | undefined;
}

export interface CurateChanges {
  text?: string | undefined;
  context?: string | null | undefined;
  occurred_start?: string | null | undefined;
  occurred_end?: string | null | undefined;
  fact_type?: FactType | undefined;
  entities?: string[] | undefined;
  state?: UnitState | undefined;
}

export interface OperationView {
  id: string;
  kind: OperationKind;
  status: OperationStatus;
  dataset: string | null;
  target_id: string | null;
  requester: { id: string; name: string };
  attempts: number;
  result: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Copied from the result for the retain poll: facts_extracted, nothing_learned, notice, document_fact_count. */
  [fact: string]: unknown;
}

export interface ExtractedFact {
  text: string;
  fact_type?: FactType | undefined;
  entities?: string[] | undefined;
  occurred_start?: string | undefined;
  occurred_end?: string | undefined;
}

export const BUDGET_CANDIDATES: Record<Budget, number> = { low: 20, mid: 60, high: 150 };
export const MAX_RECALL_TOKENS = 32_768;
/** Mental models are bank-level: they are generated from the shared dataset only, never from private facts. */
export const MENTAL_MODEL_DATASETS = ['shared'] as const;
