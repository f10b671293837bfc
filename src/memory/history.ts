/** Appending to a unit's history: every change to a unit leaves one line, written in the change's transaction. */
import type { Transaction } from 'kysely';
import type { Database } from '../store/schema.js';
import type { Actor } from './types.js';

export interface HistoryLine {
  unitId: string;
  at: string;
  actor: Actor;
  /** `created`, `edited`, `invalidated`, `restored`, `merged`, `deleted`. */
  action: string;
  /** The fields as they were and as they became; absent for a line with nothing to show. */
  before?: Record<string, unknown>;
  after?: Record<string, unknown>;
}

export async function recordHistory(trx: Transaction<Database>, line: HistoryLine): Promise<void> {
  await trx
    .insertInto('memory_history')
    .values({
      unit_id: line.unitId,
      at: line.at,
      actor_id: line.actor.id,
      actor_name: line.actor.name,
      action: line.action,
      before: line.before === undefined ? null : JSON.stringify(line.before),
      after: line.after === undefined ? null : JSON.stringify(line.after),
    })
    .execute();
}
