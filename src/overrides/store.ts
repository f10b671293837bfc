/**
 * Overrides are recorded beside the pin: a `tool_pins` row of kind `override`
 * for the same server and tool name, holding what the operator set (and the
 * tool pin it was checked against), who set it and when. Server uninstall
 * drops them with the pins (the foreign key cascades).
 */
import type { Kysely, Transaction } from 'kysely';
import { nowIso, parseJson } from '../store/json.js';
import type { Database, ToolPinTable } from '../store/schema.js';
import { overrideHash, type StoredOverride, type ToolOverride } from './model.js';

export const OVERRIDE_KIND = 'override';

export interface OverrideRecord {
  serverId: string;
  tool: string;
  override: ToolOverride;
  /** The tool pin hash it was validated against. */
  basePinHash: string | null;
  /** SHA-256 of the canonical override. */
  hash: string;
  setBy: string | null;
  createdAt: string;
  updatedAt: string;
}

export function toOverrideRecord(row: ToolPinTable): OverrideRecord {
  const { basePinHash, ...override } = parseJson<StoredOverride>(row.definition, { basePinHash: null });
  return {
    serverId: row.server_id,
    tool: row.tool_name,
    override,
    basePinHash: basePinHash ?? null,
    hash: row.pin_hash,
    setBy: row.approved_by,
    createdAt: row.first_seen_at,
    updatedAt: row.updated_at,
  };
}

export async function listOverrides(db: Kysely<Database>, serverId?: string): Promise<OverrideRecord[]> {
  let query = db.selectFrom('tool_pins').selectAll().where('kind', '=', OVERRIDE_KIND);
  if (serverId !== undefined) query = query.where('server_id', '=', serverId);
  return (await query.orderBy('server_id').orderBy('tool_name').execute()).map(toOverrideRecord);
}

export async function getOverride(
  db: Kysely<Database>,
  serverId: string,
  tool: string,
): Promise<OverrideRecord | undefined> {
  const row = await db
    .selectFrom('tool_pins')
    .selectAll()
    .where('server_id', '=', serverId)
    .where('kind', '=', OVERRIDE_KIND)
    .where('tool_name', '=', tool)
    .executeTakeFirst();
  return row ? toOverrideRecord(row) : undefined;
}

/** Sets (inserts or replaces) an override inside the caller's transaction. */
export async function putOverride(
  trx: Transaction<Database>,
  serverId: string,
  tool: string,
  override: ToolOverride,
  basePinHash: string | null,
  setBy: string,
): Promise<void> {
  const at = nowIso();
  const definition = JSON.stringify({ ...override, basePinHash } satisfies StoredOverride);
  const hash = overrideHash(override);
  const updated = await trx
    .updateTable('tool_pins')
    .set({ definition, pin_hash: hash, state: 'pinned', reason: null, updated_at: at, approved_by: setBy })
    .where('server_id', '=', serverId)
    .where('kind', '=', OVERRIDE_KIND)
    .where('tool_name', '=', tool)
    .executeTakeFirst();
  if (Number(updated.numUpdatedRows) > 0) return;
  await trx
    .insertInto('tool_pins')
    .values({
      server_id: serverId,
      kind: OVERRIDE_KIND,
      tool_name: tool,
      scheme: 1,
      pin_hash: hash,
      definition,
      state: 'pinned',
      reason: null,
      pending_hash: null,
      pending_definition: null,
      first_seen_at: at,
      updated_at: at,
      approved_by: setBy,
    })
    .execute();
}

export async function deleteOverride(trx: Transaction<Database>, serverId: string, tool: string): Promise<boolean> {
  const result = await trx
    .deleteFrom('tool_pins')
    .where('server_id', '=', serverId)
    .where('kind', '=', OVERRIDE_KIND)
    .where('tool_name', '=', tool)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
