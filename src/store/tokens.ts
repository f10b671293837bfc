/** Token records. The token itself exists only in the answer that created it; the store keeps its hash. */
import { randomBytes } from 'node:crypto';
import type { Role } from '../identity/index.js';
import { generateToken, hashToken } from '../identity/index.js';
import type { Store } from './db.js';
import { nowIso, parseJson } from './json.js';
import type { TokenTable } from './schema.js';

export interface TokenRecord {
  id: string;
  name: string;
  role: Role;
  groups: string[];
  rateLimit: number | null;
  maxConcurrent: number | null;
  maxSessions: number | null;
  /** `all`, `search` or `toolset:<name>`; null: the platform setting `hub.toolView`. */
  toolView: string | null;
  source: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  /** The user who owns this token (agent tokens created by a signed-in user); null: nobody in particular. */
  userId: string | null;
}

export interface NewToken {
  name: string;
  role: Role;
  groups?: readonly string[] | undefined;
  rateLimit?: number | null | undefined;
  maxConcurrent?: number | null | undefined;
  maxSessions?: number | null | undefined;
  toolView?: string | null | undefined;
  source: 'bootstrap' | 'api' | 'cli' | 'config';
  /** Use this token instead of generating one (bootstrap from GATEHOUSE_ADMIN_TOKEN, declarative config). */
  token?: string | undefined;
  /** Store this hash instead (declarative config may carry only hashes). */
  hash?: string | undefined;
  /** The owning user, if any. */
  userId?: string | null | undefined;
}

function toRecord(row: TokenTable): TokenRecord {
  return {
    id: row.id,
    name: row.name,
    role: row.role as Role,
    groups: parseJson<string[]>(row.groups, []),
    rateLimit: row.rate_limit,
    maxConcurrent: row.max_concurrent,
    maxSessions: row.max_sessions ?? null,
    toolView: row.tool_view ?? null,
    source: row.source,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
    userId: row.user_id ?? null,
  };
}

export const newTokenId = (): string => `tok_${randomBytes(9).toString('base64url')}`;

export class TokenStore {
  constructor(private readonly store: Store) {}

  /** Creates a token; `token` in the answer is the only time it is ever shown. */
  async create(input: NewToken): Promise<{ record: TokenRecord; token: string | undefined }> {
    const token = input.hash ? undefined : (input.token ?? generateToken());
    const row: TokenTable = {
      id: newTokenId(),
      name: input.name,
      role: input.role,
      groups: JSON.stringify(input.groups ?? (input.role === 'agent' ? ['default'] : [])),
      hash: input.hash ?? hashToken(token as string),
      rate_limit: input.rateLimit ?? null,
      max_concurrent: input.maxConcurrent ?? null,
      max_sessions: input.maxSessions ?? null,
      tool_view: input.toolView ?? null,
      source: input.source,
      created_at: nowIso(),
      last_used_at: null,
      revoked_at: null,
      user_id: input.userId ?? null,
    };
    await this.store.db.insertInto('tokens').values(row).execute();
    await this.store.changed('tokens');
    return { record: toRecord(row), token };
  }

  /** Live tokens, a page of them; `userId` keeps those one user owns. */
  async list(
    page: { limit: number; offset: number },
    filter: { userId?: string } = {},
  ): Promise<{ tokens: TokenRecord[]; total: number }> {
    const live = this.store.db
      .selectFrom('tokens')
      .where('revoked_at', 'is', null)
      .$if(filter.userId !== undefined, (q) => q.where('user_id', '=', filter.userId as string));
    const rows = await live
      .selectAll()
      .orderBy('created_at')
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    const { total } = await live.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    return { tokens: rows.map(toRecord), total: Number(total) };
  }

  async get(id: string): Promise<TokenRecord | undefined> {
    const row = await this.store.db.selectFrom('tokens').selectAll().where('id', '=', id).executeTakeFirst();
    return row && row.revoked_at === null ? toRecord(row) : undefined;
  }

  async findByName(name: string): Promise<TokenRecord | undefined> {
    const row = await this.store.db
      .selectFrom('tokens')
      .selectAll()
      .where('name', '=', name)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /** The live token whose hash this is (one indexed read: sign-in is public, so it never reads every token). */
  async activeWithHash(hash: string): Promise<TokenRecord | undefined> {
    const row = await this.store.db
      .selectFrom('tokens')
      .selectAll()
      .where('hash', '=', hash)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /** Every live token keyed by hash: the authenticator's cache, rebuilt when the `tokens` version moves. */
  async activeByHash(): Promise<Map<string, TokenRecord>> {
    const rows = await this.store.db.selectFrom('tokens').selectAll().where('revoked_at', 'is', null).execute();
    return new Map(rows.map((row) => [row.hash, toRecord(row)]));
  }

  async update(
    id: string,
    changes: {
      rateLimit?: number | null;
      maxConcurrent?: number | null;
      maxSessions?: number | null;
      toolView?: string | null;
      groups?: readonly string[];
    },
  ): Promise<TokenRecord | undefined> {
    const values: Partial<TokenTable> = {};
    if (changes.rateLimit !== undefined) values.rate_limit = changes.rateLimit;
    if (changes.maxConcurrent !== undefined) values.max_concurrent = changes.maxConcurrent;
    if (changes.maxSessions !== undefined) values.max_sessions = changes.maxSessions;
    if (changes.toolView !== undefined) values.tool_view = changes.toolView;
    if (changes.groups !== undefined) values.groups = JSON.stringify(changes.groups);
    if (Object.keys(values).length > 0) {
      await this.store.db
        .updateTable('tokens')
        .set(values)
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .execute();
      await this.store.changed('tokens');
    }
    return this.get(id);
  }

  /** The live tokens a user owns. */
  async ownedBy(userId: string): Promise<TokenRecord[]> {
    const rows = await this.store.db
      .selectFrom('tokens')
      .selectAll()
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .orderBy('created_at')
      .execute();
    return rows.map(toRecord);
  }

  async revoke(id: string): Promise<boolean> {
    const result = await this.store.db
      .updateTable('tokens')
      .set({ revoked_at: nowIso() })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    const revoked = Number(result.numUpdatedRows) > 0;
    if (revoked) {
      await this.store.changed('tokens');
      // Search mode's recent tools of a token that can no longer call anything (migration 22).
      await this.store.db.deleteFrom('recent_tools').where('token_id', '=', id).execute();
    }
    return revoked;
  }

  /**
   * Creates the first admin token exactly once, however many processes start together: the claim row in
   * gatehouse_meta is inserted by one winner only. Returns the token when this call created it.
   */
  async bootstrapAdmin(adminToken?: string): Promise<string | undefined> {
    const token = adminToken ?? generateToken();
    const created = await this.store.db.transaction().execute(async (trx) => {
      const claim = await trx
        .insertInto('gatehouse_meta')
        .values({ key: 'bootstrap_admin', value: nowIso() })
        .onConflict((oc) => oc.column('key').doNothing())
        .executeTakeFirst();
      if (Number(claim.numInsertedOrUpdatedRows ?? 0n) === 0) return false;
      await trx
        .insertInto('tokens')
        .values({
          id: newTokenId(),
          name: 'admin',
          role: 'admin',
          groups: '[]',
          hash: hashToken(token),
          rate_limit: null,
          max_concurrent: null,
          source: 'bootstrap',
          created_at: nowIso(),
          last_used_at: null,
          revoked_at: null,
        })
        .execute();
      return true;
    });
    if (!created) return undefined;
    await this.store.changed('tokens');
    return token;
  }
}
