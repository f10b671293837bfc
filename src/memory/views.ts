/** Stored rows turned into the shapes callers see (JSON columns parsed, fields renamed). */
import { parseJson } from '../store/json.js';
import type { RankedUnit, UnitRow } from './search.js';
import type { MemoryOperationTable } from './tables.js';
import type {
  FactType,
  MemoryUnit,
  OperationKind,
  OperationStatus,
  OperationView,
  SearchResult,
  UnitState,
} from './types.js';

export function toUnit(row: Omit<UnitRow, 'seq'> & { seq?: number }): MemoryUnit {
  return {
    id: row.id,
    text: row.text,
    context: row.context,
    fact_type: row.fact_type as FactType,
    entities: parseJson<string[]>(row.entities, []),
    tags: parseJson<string[]>(row.tags, []),
    occurred_start: row.occurred_start,
    occurred_end: row.occurred_end,
    state: row.state as UnitState,
    dataset: row.dataset,
    source: row.source,
    document_id: row.document_id,
    metadata: parseJson<Record<string, unknown>>(row.metadata, {}),
    timestamp: row.created_at,
    updated_at: row.updated_at,
  };
}

export function toResult(ranked: RankedUnit): SearchResult {
  const unit = toUnit(ranked.row);
  return {
    id: unit.id,
    text: unit.text,
    score: ranked.score,
    timestamp: unit.timestamp,
    dataset: unit.dataset,
    tags: unit.tags,
    source: unit.source,
    metadata: unit.metadata,
    context: unit.context,
    fact_type: unit.fact_type,
    entities: unit.entities,
    occurred_start: unit.occurred_start,
    occurred_end: unit.occurred_end,
  };
}

export function toOperation(row: MemoryOperationTable): OperationView {
  const result = parseJson<Record<string, unknown> | null>(row.result, null);
  return {
    ...(result ?? {}),
    id: row.id,
    kind: row.kind as OperationKind,
    status: row.status as OperationStatus,
    dataset: row.dataset,
    target_id: row.target_id,
    requester: { id: row.requester_id, name: row.requester_name },
    attempts: Number(row.attempts),
    result,
    error: parseJson<{ code: string; message: string } | null>(row.error, null),
    created_at: row.created_at,
    updated_at: row.updated_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
  };
}
