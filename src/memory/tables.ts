/**
 * Table types of the memory bank (Kysely). Same conventions as the rest of the
 * store: ISO-8601 text timestamps, JSON text for lists and maps, 0/1 booleans.
 * PostgreSQL's `memory_units.tsv` (a generated tsvector) is deliberately not
 * typed here: it is only ever read through raw `sql`.
 */
import type { Generated } from 'kysely';

export interface MemoryUnitTable {
  /** Integer key the full-text index points at (FTS5 rowid); never shown. */
  seq: Generated<number>;
  id: string;
  dataset: string;
  text: string;
  context: string | null;
  /** `world` or `experience`. */
  fact_type: string;
  entities: string;
  tags: string;
  occurred_start: string | null;
  occurred_end: string | null;
  /** `valid` or `invalidated`. */
  state: string;
  /** Which client wrote it (server-injected from the token, never from the caller). */
  source: string;
  document_id: string | null;
  /** SHA-256 of the normalised text: exact duplicates share it. */
  content_hash: string;
  metadata: string;
  created_at: string;
  updated_at: string;
}

export interface MemoryDocumentTable {
  id: string;
  dataset: string;
  /** SHA-256 of the normalised text and context: a retain of known content is recognised by it. */
  content_hash: string;
  text: string;
  context: string | null;
  tags: string;
  source: string;
  fact_count: number;
  created_at: string;
}

export interface MemoryHistoryTable {
  seq: Generated<number>;
  unit_id: string;
  at: string;
  actor_id: string | null;
  actor_name: string | null;
  /** `created`, `edited`, `invalidated`, `restored`, `merged`. */
  action: string;
  before: string | null;
  after: string | null;
}

export interface MemoryDirectiveTable {
  id: string;
  name: string;
  content: string;
  priority: number;
  is_active: number;
  tags: string;
  created_by: string | null;
  created_at: string;
  updated_at: string;
}

export interface MemoryMentalModelTable {
  id: string;
  name: string;
  source_query: string;
  max_tokens: number;
  tags: string;
  trigger: string;
  content: string | null;
  /** The unit ids the content was grounded in (JSON list). */
  grounding: string;
  refreshed_at: string | null;
  created_by: string | null;
  created_at: string;
  updated_at: string;
}

export interface MemoryOperationTable {
  id: string;
  /** `retain`, `consolidation`, `refresh`. */
  kind: string;
  /** `pending`, `processing`, `completed`, `failed`, `cancelled`. */
  status: string;
  dataset: string | null;
  requester_id: string;
  requester_name: string;
  /** The document (retain) or mental model (refresh) it works on. */
  target_id: string | null;
  payload: string;
  result: string | null;
  error: string | null;
  attempts: number;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface MemoryTables {
  memory_units: MemoryUnitTable;
  memory_documents: MemoryDocumentTable;
  memory_history: MemoryHistoryTable;
  memory_directives: MemoryDirectiveTable;
  memory_mental_models: MemoryMentalModelTable;
  memory_operations: MemoryOperationTable;
}
