/** Toolsets in the store; a write announces a `servers` change, so the hub's snapshot (which holds them) is rebuilt. */
import type { Kysely } from 'kysely';
import { GatehouseError } from '../errors.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import type { Database, ToolsetTable } from '../store/schema.js';
import type { Toolset, ToolsetEntry } from './model.js';

export function toToolset(row: ToolsetTable): Toolset {
  return {
    name: row.name,
    description: row.description,
    tools: parseJson<ToolsetEntry[]>(row.tools, []),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    updatedBy: row.updated_by,
  };
}

export async function listToolsets(db: Kysely<Database>): Promise<Toolset[]> {
  return (await db.selectFrom('toolsets').selectAll().orderBy('name').execute()).map(toToolset);
}

export async function listToolsetsPage(
  db: Kysely<Database>,
  page: { limit: number; offset: number },
): Promise<{ toolsets: Toolset[]; total: number }> {
  const rows = await db
    .selectFrom('toolsets')
    .selectAll()
    .orderBy('name')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const { total } = await db
    .selectFrom('toolsets')
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();
  return { toolsets: rows.map(toToolset), total: Number(total) };
}

export async function getToolset(db: Kysely<Database>, name: string): Promise<Toolset> {
  const row = await db.selectFrom('toolsets').selectAll().where('name', '=', name).executeTakeFirst();
  if (!row) throw new GatehouseError('toolset.not_found', `No toolset is named "${name}".`, { toolset: name });
  return toToolset(row);
}

export interface ToolsetInput {
  description?: string | null | undefined;
  tools: ToolsetEntry[];
}

export class ToolsetStore {
  constructor(private readonly store: Store) {}

  list(page: { limit: number; offset: number }) {
    return listToolsetsPage(this.store.db, page);
  }

  get(name: string): Promise<Toolset> {
    return getToolset(this.store.db, name);
  }

  async create(name: string, input: ToolsetInput, by: string): Promise<Toolset> {
    const at = nowIso();
    const exists = await this.store.db
      .selectFrom('toolsets')
      .select('name')
      .where('name', '=', name)
      .executeTakeFirst();
    if (exists) throw new GatehouseError('toolset.already_exists', `A toolset is named "${name}".`, { toolset: name });
    await this.store.db
      .insertInto('toolsets')
      .values({
        name,
        description: input.description ?? null,
        tools: JSON.stringify(input.tools),
        created_at: at,
        updated_at: at,
        updated_by: by,
      })
      .execute();
    await this.store.changed('servers');
    return this.get(name);
  }

  /** Replaces a toolset's description and tools (creates it when `upsert`). */
  async replace(name: string, input: ToolsetInput, by: string, upsert = false): Promise<Toolset> {
    const result = await this.store.db
      .updateTable('toolsets')
      .set({
        ...(input.description !== undefined ? { description: input.description } : {}),
        tools: JSON.stringify(input.tools),
        updated_at: nowIso(),
        updated_by: by,
      })
      .where('name', '=', name)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) {
      if (upsert) return this.create(name, input, by);
      throw new GatehouseError('toolset.not_found', `No toolset is named "${name}".`, { toolset: name });
    }
    await this.store.changed('servers');
    return this.get(name);
  }

  async delete(name: string): Promise<void> {
    const result = await this.store.db.deleteFrom('toolsets').where('name', '=', name).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) {
      throw new GatehouseError('toolset.not_found', `No toolset is named "${name}".`, { toolset: name });
    }
    await this.store.changed('servers');
  }
}
