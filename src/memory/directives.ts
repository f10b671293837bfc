/** Directives: standing instructions reflect passes to the language model; their CRUD. */
import { nowIso, parseJson } from '../store/json.js';
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';
import { notFound } from './scope.js';
import type { MemoryDirectiveTable } from './tables.js';
import { hasTag } from './tags.js';
import { newMemoryId, uniq } from './text.js';
import type { Actor } from './types.js';

function toDirective(row: MemoryDirectiveTable) {
  return {
    id: row.id,
    name: row.name,
    content: row.content,
    priority: Number(row.priority),
    is_active: Number(row.is_active) === 1,
    tags: parseJson<string[]>(row.tags, []),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface DirectiveListOptions {
  active_only?: boolean | undefined;
  tags?: string[] | undefined;
  limit: number;
  offset: number;
}

export interface NewDirective {
  name: string;
  content: string;
  priority?: number | undefined;
  is_active?: boolean | undefined;
  tags?: string[] | undefined;
}

export interface DirectiveChanges {
  name?: string | undefined;
  content?: string | undefined;
  priority?: number | undefined;
  is_active?: boolean | undefined;
  tags?: string[] | undefined;
}

/** The contents of the active directives, highest priority first (at most 20 reach the prompt). */
export async function activeDirectives(ctx: MemoryContext): Promise<string[]> {
  const rows = await ctx.store.db
    .selectFrom('memory_directives')
    .select(['content'])
    .where('is_active', '=', 1)
    .orderBy('priority', 'desc')
    .orderBy('created_at')
    .limit(20)
    .execute();
  return rows.map((r) => r.content);
}

export async function listDirectives(ctx: MemoryContext, options: DirectiveListOptions) {
  return withStore(async () => {
    let q = ctx.store.db.selectFrom('memory_directives');
    if (options.active_only) q = q.where('is_active', '=', 1);
    for (const tag of options.tags ?? []) q = q.where(hasTag('tags', tag));
    const { total } = await q.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    const page = await q
      .selectAll()
      .orderBy('priority', 'desc')
      .orderBy('created_at')
      .orderBy('id')
      .limit(options.limit)
      .offset(options.offset)
      .execute();
    return { directives: page.map(toDirective), count: page.length, total: Number(total) };
  });
}

export async function getDirective(ctx: MemoryContext, id: string) {
  return withStore(async () => {
    const row = await ctx.store.db.selectFrom('memory_directives').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound('directive', id);
    return toDirective(row);
  });
}

export async function createDirective(ctx: MemoryContext, input: NewDirective, actor: Actor) {
  return withStore(async () => {
    const at = nowIso();
    const row = {
      id: newMemoryId('dir'),
      name: input.name,
      content: input.content,
      priority: input.priority ?? 0,
      is_active: input.is_active === false ? 0 : 1,
      tags: JSON.stringify(uniq(input.tags ?? [])),
      created_by: actor.id,
      created_at: at,
      updated_at: at,
    };
    await ctx.store.db.insertInto('memory_directives').values(row).execute();
    return toDirective(row);
  });
}

export async function updateDirective(ctx: MemoryContext, id: string, changes: DirectiveChanges) {
  await getDirective(ctx, id);
  return withStore(async () => {
    const set: Record<string, unknown> = { updated_at: nowIso() };
    if (changes.name !== undefined) set.name = changes.name;
    if (changes.content !== undefined) set.content = changes.content;
    if (changes.priority !== undefined) set.priority = changes.priority;
    if (changes.is_active !== undefined) set.is_active = changes.is_active ? 1 : 0;
    if (changes.tags !== undefined) set.tags = JSON.stringify(uniq(changes.tags));
    await ctx.store.db.updateTable('memory_directives').set(set).where('id', '=', id).execute();
    return getDirective(ctx, id);
  });
}

export async function deleteDirective(ctx: MemoryContext, id: string): Promise<{ deleted: string }> {
  await getDirective(ctx, id);
  await withStore(() => ctx.store.db.deleteFrom('memory_directives').where('id', '=', id).execute());
  return { deleted: id };
}
