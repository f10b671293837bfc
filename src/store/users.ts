/** User records: people who sign in and own agent tokens (see `src/identity/users.ts`). */
import { randomBytes } from 'node:crypto';
import type { User, UserRole } from '../identity/users.js';
import type { Store } from './db.js';
import { nowIso, parseJson } from './json.js';
import type { UserTable } from './schema.js';

export interface NewUser {
  name: string;
  email?: string | null | undefined;
  role: UserRole;
  groups?: readonly string[] | undefined;
  source: 'api' | 'cli' | 'oidc';
  externalId?: string | null | undefined;
}

export interface UserChanges {
  name?: string;
  email?: string | null;
  role?: UserRole;
  groups?: readonly string[];
  disabled?: boolean;
}

function toUser(row: UserTable): User {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    role: row.role as UserRole,
    groups: parseJson<string[]>(row.groups, []),
    disabled: Number(row.disabled) === 1,
    source: row.source,
    externalId: row.external_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lastSeenAt: row.last_seen_at,
  };
}

export const newUserId = (): string => `usr_${randomBytes(9).toString('base64url')}`;

export class UserStore {
  constructor(private readonly store: Store) {}

  async create(input: NewUser): Promise<User> {
    const now = nowIso();
    const row: UserTable = {
      id: newUserId(),
      name: input.name,
      email: input.email ?? null,
      role: input.role,
      groups: JSON.stringify(input.groups ?? []),
      disabled: 0,
      source: input.source,
      external_id: input.externalId ?? null,
      created_at: now,
      updated_at: now,
      last_seen_at: null,
    };
    await this.store.db.insertInto('users').values(row).execute();
    await this.store.changed('users');
    return toUser(row);
  }

  async list(page: { limit: number; offset: number }): Promise<{ users: User[]; total: number }> {
    const rows = await this.store.db
      .selectFrom('users')
      .selectAll()
      .orderBy('created_at')
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    const { total } = await this.store.db
      .selectFrom('users')
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .executeTakeFirstOrThrow();
    return { users: rows.map(toUser), total: Number(total) };
  }

  async get(id: string): Promise<User | undefined> {
    const row = await this.store.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
    return row ? toUser(row) : undefined;
  }

  /** By id, or else by exact name (the CLI's `users disable alice`); undefined when a name is ambiguous. */
  async find(idOrName: string): Promise<User | undefined> {
    const byId = await this.get(idOrName);
    if (byId) return byId;
    const rows = await this.store.db.selectFrom('users').selectAll().where('name', '=', idOrName).limit(2).execute();
    return rows.length === 1 && rows[0] ? toUser(rows[0]) : undefined;
  }

  async findByExternalId(externalId: string): Promise<User | undefined> {
    const row = await this.store.db
      .selectFrom('users')
      .selectAll()
      .where('external_id', '=', externalId)
      .executeTakeFirst();
    return row ? toUser(row) : undefined;
  }

  /** Every user keyed by id: the authenticators' cache, rebuilt when the `users` version moves. */
  async all(): Promise<Map<string, User>> {
    const rows = await this.store.db.selectFrom('users').selectAll().execute();
    return new Map(rows.map((row) => [row.id, toUser(row)]));
  }

  async update(id: string, changes: UserChanges): Promise<User | undefined> {
    const values: Partial<UserTable> = {};
    if (changes.name !== undefined) values.name = changes.name;
    if (changes.email !== undefined) values.email = changes.email;
    if (changes.role !== undefined) values.role = changes.role;
    if (changes.groups !== undefined) values.groups = JSON.stringify(changes.groups);
    if (changes.disabled !== undefined) values.disabled = changes.disabled ? 1 : 0;
    if (Object.keys(values).length > 0) {
      values.updated_at = nowIso();
      await this.store.db.updateTable('users').set(values).where('id', '=', id).execute();
      await this.store.changed('users');
    }
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    const result = await this.store.db.deleteFrom('users').where('id', '=', id).executeTakeFirst();
    const deleted = Number(result.numDeletedRows) > 0;
    if (deleted) await this.store.changed('users');
    return deleted;
  }

  /** Best effort, no version bump: last-seen is informational and must not rebuild every cache. */
  async touch(id: string): Promise<void> {
    await this.store.db.updateTable('users').set({ last_seen_at: nowIso() }).where('id', '=', id).execute();
  }
}
