/**
 * Dashboard sessions in the shared store (so every replica agrees). The cookie carries a random secret;
 * the store keeps only its SHA-256, and the CSRF token's SHA-256 beside it.
 */
import { randomBytes } from 'node:crypto';
import { generateToken, hashToken } from '../identity/tokens.js';
import type { Store } from './db.js';
import { nowIso } from './json.js';
import type { UserSessionTable } from './schema.js';

/** An absolute lifetime: a dashboard session is a working day, then sign in again. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

export interface SessionRecord {
  id: string;
  userId: string | null;
  tokenId: string | null;
  csrfHash: string;
  createdAt: string;
  expiresAt: string;
}

function toRecord(row: UserSessionTable): SessionRecord {
  return {
    id: row.id,
    userId: row.user_id,
    tokenId: row.token_id,
    csrfHash: row.csrf_hash,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
  };
}

export class SessionStore {
  constructor(private readonly store: Store) {}

  /** Opens a session for a user or an ownerless token; the secret and CSRF token exist only in this answer. */
  async create(owner: { userId?: string | null; tokenId?: string | null }): Promise<{
    record: SessionRecord;
    secret: string;
    csrf: string;
  }> {
    const secret = generateToken();
    const csrf = randomBytes(24).toString('base64url');
    const now = Date.now();
    const row: UserSessionTable = {
      id: `ses_${randomBytes(9).toString('base64url')}`,
      hash: hashToken(secret),
      csrf_hash: hashToken(csrf),
      user_id: owner.userId ?? null,
      token_id: owner.tokenId ?? null,
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + SESSION_TTL_MS).toISOString(),
      last_seen_at: null,
      revoked_at: null,
    };
    await this.store.db.insertInto('user_sessions').values(row).execute();
    return { record: toRecord(row), secret, csrf };
  }

  /** The live session a cookie secret names, if any. */
  async findBySecret(secret: string): Promise<SessionRecord | undefined> {
    const row = await this.store.db
      .selectFrom('user_sessions')
      .selectAll()
      .where('hash', '=', hashToken(secret))
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', nowIso())
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  async revoke(id: string): Promise<boolean> {
    const result = await this.store.db
      .updateTable('user_sessions')
      .set({ revoked_at: nowIso() })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    const revoked = Number(result.numUpdatedRows) > 0;
    if (revoked) await this.store.changed('sessions');
    return revoked;
  }

  /** Ends every session of a user (disabled or deleted) or of a token (revoked); returns how many. */
  async revokeFor(owner: { userId?: string; tokenId?: string }): Promise<number> {
    let query = this.store.db
      .updateTable('user_sessions')
      .set({ revoked_at: nowIso() })
      .where('revoked_at', 'is', null);
    if (owner.userId) query = query.where('user_id', '=', owner.userId);
    else if (owner.tokenId) query = query.where('token_id', '=', owner.tokenId);
    else return 0;
    const result = await query.executeTakeFirst();
    const count = Number(result.numUpdatedRows);
    if (count > 0) await this.store.changed('sessions');
    return count;
  }

  /** Drops sessions past their end (kept a day for the record) and OIDC sign-ins never finished. */
  async sweep(): Promise<void> {
    const dayAgo = new Date(Date.now() - 24 * 60 * 60 * 1000).toISOString();
    await this.store.db.deleteFrom('user_sessions').where('expires_at', '<', dayAgo).execute();
    await this.store.db.deleteFrom('oidc_logins').where('expires_at', '<', nowIso()).execute();
  }
}
