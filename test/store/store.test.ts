import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { hashToken } from '../../src/identity/index.js';
import { loadSealKey } from '../../src/secrets/key.js';
import { aadFor, seal, unseal } from '../../src/secrets/seal.js';
import { SettingsService } from '../../src/settings/service.js';
import { openStore, type Store } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { TokenStore } from '../../src/store/tokens.js';
import { runTs } from '../helpers/processes.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';

const STORE_PROCESS = new URL('../helpers/store-process.ts', import.meta.url).pathname;

describeEachStore('store', (target) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let place: { dataDir: string; databaseUrl: string | undefined };

  beforeEach(async () => {
    const fresh = await freshStore(target);
    store = fresh.store;
    cleanup = fresh.cleanup;
    place = { dataDir: fresh.dataDir, databaseUrl: fresh.databaseUrl };
  });
  afterEach(async () => cleanup());

  it('migrates once and bootstraps exactly one admin when several processes start on an empty store', async () => {
    // A second empty place: the store opened in beforeEach has migrated already.
    const empty = await target.fresh();
    try {
      const args = [empty.dataDir, ...(empty.databaseUrl ? [empty.databaseUrl] : [])];
      const outputs = await Promise.all([1, 2, 3, 4].map(() => runTs(STORE_PROCESS, args)));
      const results = outputs.map((o) => JSON.parse(o.trim()) as { createdAdmin: boolean });
      expect(results.filter((r) => r.createdAdmin)).toHaveLength(1);
      const check = await openStore(empty);
      const versions = await check.db.selectFrom('gatehouse_migrations').select('version').execute();
      expect(versions.map((r) => Number(r.version)).sort((a, b) => a - b)).toEqual(MIGRATIONS.map((m) => m.version));
      const admins = (await new TokenStore(check).list({ limit: 10, offset: 0 })).tokens.filter(
        (t) => t.role === 'admin',
      );
      expect(admins).toHaveLength(1);
      await check.close();
    } finally {
      await empty.cleanup();
    }
  });

  it('creates, lists, finds by hash and revokes tokens', async () => {
    const tokens = new TokenStore(store);
    const { record, token } = await tokens.create({ name: 'claude-laptop', role: 'agent', source: 'api' });
    expect(token).toMatch(/^gh_/);
    expect(record.groups).toEqual(['default']);
    const byHash = await tokens.activeByHash();
    expect(byHash.get(hashToken(token as string))?.id).toBe(record.id);
    const listed = await tokens.list({ limit: 10, offset: 0 });
    expect(listed.total).toBe(1);
    expect(JSON.stringify(listed)).not.toContain(token as string);
    expect(await tokens.revoke(record.id)).toBe(true);
    expect(await tokens.revoke(record.id)).toBe(false);
    expect((await tokens.activeByHash()).size).toBe(0);
  });

  it('bootstraps the admin token only once', async () => {
    const tokens = new TokenStore(store);
    expect(await tokens.bootstrapAdmin('an-admin-token-that-is-long-enough')).toBe(
      'an-admin-token-that-is-long-enough',
    );
    expect(await tokens.bootstrapAdmin()).toBeUndefined();
    const byHash = await tokens.activeByHash();
    expect(byHash.get(hashToken('an-admin-token-that-is-long-enough'))?.role).toBe('admin');
  });

  it('serves settings with defaults, validates per key, and sees another process’s change on the next read', async () => {
    const other = await openStore(place);
    const mine = new SettingsService(store);
    const theirs = new SettingsService(other);
    expect((await mine.current())['mcp.hubEnabled']).toBe(true);
    expect((await theirs.current())['mcp.scope.servers']).toBe('off');
    await theirs.patch({ 'mcp.scope.servers': 'write', 'hub.rateLimit': 60 }, 'tok_test');
    // PostgreSQL delivers the change notice asynchronously; poll briefly for it rather than sleeping blindly.
    for (let i = 0; i < 100 && (await mine.current())['mcp.scope.servers'] !== 'write'; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(await mine.current()).toMatchObject({ 'mcp.scope.servers': 'write', 'hub.rateLimit': 60 });
    await expect(mine.patch({ 'mcp.scope.audit': 'write' }, null)).rejects.toMatchObject({ code: 'validation_error' });
    await expect(mine.patch({ 'mcp.nope': true }, null)).rejects.toMatchObject({ code: 'validation_error' });
    await other.close();
  });

  it('keeps one sealing key per database and refuses another', async () => {
    const keyHex = 'ab'.repeat(32);
    const key = await loadSealKey(store, { secretKey: keyHex, dataDir: place.dataDir });
    const aad = aadFor(['srv', 'https://example.test/mcp', 'headers', 'authorization']);
    const sealed = seal(key, 'Bearer sentinel', aad);
    expect(sealed).not.toContain('sentinel');
    expect(unseal(key, sealed, aad)).toBe('Bearer sentinel');
    expect(() => unseal(key, sealed, aadFor(['srv', 'https://other.test/mcp', 'headers', 'authorization']))).toThrow();
    await expect(loadSealKey(store, { secretKey: 'cd'.repeat(32), dataDir: place.dataDir })).rejects.toMatchObject({
      code: 'validation_error',
    });
    expect((await loadSealKey(store, { secretKey: keyHex, dataDir: place.dataDir })).fingerprint).toBe(key.fingerprint);
  });

  it('relaxes durability for the duration of a relaxed write only, with no other write inside it', async () => {
    const durability = async (db: typeof store.db) =>
      target.kind === 'sqlite'
        ? String((await sql<{ synchronous: number }>`pragma synchronous`.execute(db)).rows[0]?.synchronous)
        : String(
            (await sql<{ setting: string }>`select current_setting('synchronous_commit') as setting`.execute(db))
              .rows[0]?.setting,
          );
    const strict = target.kind === 'sqlite' ? '2' : 'on';
    const relaxed = target.kind === 'sqlite' ? '1' : 'off';
    expect(await durability(store.db)).toBe(strict);

    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inside = '';
    const write = store.relaxedWrite(async (db) => {
      inside = await durability(db);
      await db
        .insertInto('settings')
        .values({ key: 'probe', value: '1', updated_at: 'now', updated_by: null })
        .execute();
      await held;
    });
    await new Promise((r) => setTimeout(r, 20));
    // On SQLite the one connection is held, so another write waits and never commits under NORMAL.
    let otherDone = false;
    const other = store.db
      .insertInto('settings')
      .values({ key: 'other', value: '1', updated_at: 'now', updated_by: null })
      .execute()
      .then(() => {
        otherDone = true;
      });
    await new Promise((r) => setTimeout(r, 20));
    if (target.kind === 'sqlite') expect(otherDone).toBe(false);
    release();
    await Promise.all([write, other]);
    expect(inside).toBe(relaxed);
    expect(await durability(store.db)).toBe(strict);
    const keys = (await store.db.selectFrom('settings').select('key').execute()).map((r) => r.key).sort();
    expect(keys).toEqual(['other', 'probe']);
  });

  it('appends rows by a relaxed insert; on PostgreSQL in one statement that relaxes its own commit', async () => {
    const rows = ['a', 'b', 'c'].map((key) => ({
      key: `relaxed.${key}`,
      value: key,
      updated_at: 'now',
      updated_by: null,
    }));
    // Every statement the store sends while the rows go in (PostgreSQL), observed on their way out.
    const sent: string[] = [];
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
      sent.push(text ?? '');
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    try {
      await store.relaxedInsert('settings', rows);
    } finally {
      pg.Client.prototype.query = query;
    }
    if (target.kind === 'postgres') {
      // An audit group's write: one round trip, not begin, `set local`, insert and commit.
      expect(sent).toHaveLength(1);
      expect(sent[0]).toContain(`set_config('synchronous_commit', 'off', true)`);
      // The setting was local to that statement's transaction: the connection is strict again.
      const { rows: after } = await sql<{
        setting: string;
      }>`select current_setting('synchronous_commit') as setting`.execute(store.db);
      expect(after[0]?.setting).toBe('on');
    }
    const stored = await store.db
      .selectFrom('settings')
      .select(['key', 'value'])
      .where('key', 'like', 'relaxed.%')
      .execute();
    expect(stored.sort((x, y) => x.key.localeCompare(y.key))).toEqual(rows.map(({ key, value }) => ({ key, value })));
  });
});
