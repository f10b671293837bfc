/**
 * The operation queue's records: queuing a row, completing it inside the work's own transaction, and the
 * caller-facing list/get/cancel/retry. Running them is the runner's job (`runner.ts`).
 */
import type { Transaction } from 'kysely';
import { GatehouseError } from '../errors.js';
import { nowIso } from '../store/json.js';
import type { Database } from '../store/schema.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { notFound } from './scope.js';
import type { MemoryOperationTable } from './tables.js';
import type { Actor, OperationKind, OperationStatus, OperationView } from './types.js';
import { toOperation } from './views.js';

/** Thrown inside a run whose operation was cancelled meanwhile: its transaction rolls back, nothing is recorded. */
export class CancelledError extends Error {
  constructor() {
    super('The operation was cancelled while it ran; its work was rolled back.');
  }
}

export interface NewOperation {
  id: string;
  kind: OperationKind;
  status: OperationStatus;
  dataset: string | null;
  actor: Actor;
  targetId: string | null;
  payload: Record<string, unknown>;
  result?: Record<string, unknown>;
  at: string;
  startedAt?: string;
}

export function operationRow(input: NewOperation): MemoryOperationTable {
  const final = input.status === 'completed';
  return {
    id: input.id,
    kind: input.kind,
    status: input.status,
    dataset: input.dataset,
    requester_id: input.actor.id,
    requester_name: input.actor.name,
    target_id: input.targetId,
    payload: JSON.stringify(input.payload),
    result: input.result ? JSON.stringify(input.result) : null,
    error: null,
    attempts: final || input.startedAt ? 1 : 0,
    created_at: input.at,
    updated_at: input.at,
    started_at: input.startedAt ?? (final ? input.at : null),
    finished_at: final ? input.at : null,
  };
}

export async function insertOperation(ctx: MemoryContext, input: NewOperation): Promise<void> {
  await ctx.store.db.insertInto('memory_operations').values(operationRow(input)).execute();
}

/** processing → completed inside the transaction that wrote the work; a cancelled operation rolls it back. */
export async function completeOperation(
  trx: Transaction<Database>,
  id: string,
  result: Record<string, unknown>,
): Promise<void> {
  const at = nowIso();
  const res = await trx
    .updateTable('memory_operations')
    .set({ status: 'completed', result: JSON.stringify(result), updated_at: at, finished_at: at })
    .where('id', '=', id)
    .where('status', '=', 'processing')
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1) throw new CancelledError();
}

export interface OperationListOptions {
  requesterId?: string | undefined;
  status?: OperationStatus | undefined;
  kind?: OperationKind | undefined;
  limit: number;
  offset: number;
}

export async function listOperations(ctx: MemoryContext, options: OperationListOptions) {
  return withStore(async () => {
    let q = ctx.store.db.selectFrom('memory_operations');
    if (options.requesterId) q = q.where('requester_id', '=', options.requesterId);
    if (options.status) q = q.where('status', '=', options.status);
    if (options.kind) q = q.where('kind', '=', options.kind);
    const rows = await q
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .limit(options.limit)
      .offset(options.offset)
      .execute();
    const { total } = await q.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    return { operations: rows.map(toOperation), count: rows.length, total: Number(total) };
  });
}

/** With `requesterId`, another requester's operation does not exist for this caller. */
export async function getOperation(ctx: MemoryContext, id: string, requesterId?: string): Promise<OperationView> {
  return withStore(async () => {
    const row = await ctx.store.db.selectFrom('memory_operations').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row || (requesterId !== undefined && row.requester_id !== requesterId)) throw notFound('operation', id);
    return toOperation(row);
  });
}

/** pending or processing → cancelled; a running extraction is aborted and writes nothing. */
export async function cancelOperation(ctx: MemoryContext, id: string, requesterId?: string): Promise<OperationView> {
  const op = await getOperation(ctx, id, requesterId);
  if (op.status !== 'pending' && op.status !== 'processing') {
    throw new GatehouseError('memory.operation_state', `Operation ${id} is already ${op.status}.`, {
      status: op.status,
    });
  }
  const at = nowIso();
  const res = await withStore(() =>
    ctx.store.db
      .updateTable('memory_operations')
      .set({ status: 'cancelled', updated_at: at, finished_at: at })
      .where('id', '=', id)
      .where('status', 'in', ['pending', 'processing'])
      .executeTakeFirst(),
  );
  if (Number(res.numUpdatedRows) !== 1) {
    const now = await getOperation(ctx, id);
    throw new GatehouseError('memory.operation_state', `Operation ${id} is already ${now.status}.`, {
      status: now.status,
    });
  }
  ctx.runner.abort(id);
  return getOperation(ctx, id);
}

/** failed or cancelled → pending again, and run. */
export async function retryOperation(ctx: MemoryContext, id: string, requesterId?: string): Promise<OperationView> {
  const op = await getOperation(ctx, id, requesterId);
  if (op.status !== 'failed' && op.status !== 'cancelled') {
    throw new GatehouseError(
      'memory.operation_state',
      `Only a failed or cancelled operation can be retried; ${id} is ${op.status}.`,
      {
        status: op.status,
      },
    );
  }
  const res = await withStore(() =>
    ctx.store.db
      .updateTable('memory_operations')
      .set({
        status: 'pending',
        error: null,
        result: null,
        updated_at: nowIso(),
        started_at: null,
        finished_at: null,
      })
      .where('id', '=', id)
      .where('status', 'in', ['failed', 'cancelled'])
      .executeTakeFirst(),
  );
  if (Number(res.numUpdatedRows) !== 1)
    throw new GatehouseError('memory.operation_state', `Operation ${id} changed meanwhile.`);
  ctx.runner.launch(id);
  return getOperation(ctx, id);
}
