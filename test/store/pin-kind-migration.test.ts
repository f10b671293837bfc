/** Migration 6 on a store that already has tool pins: they become tool pins of scheme 1, nothing lost. */
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { sqliteTarget } from '../helpers/stores.js';

it('keeps every existing pin as a tool pin of scheme 1, and lets a prompt share a tool name', async () => {
  const place = await sqliteTarget.fresh();
  try {
    // A store as it was before pins had a kind: migrations 1–4 only, one server with one quarantined pin.
    const raw = new SqliteDatabase(join(place.dataDir, 'gatehouse.db'));
    // biome-ignore lint/suspicious/noExplicitAny: the schema of an older version
    const old = new Kysely<any>({ dialect: new SqliteDialect({ database: raw }) });
    await sql`create table gatehouse_migrations (version integer primary key, name text not null, applied_at text not null)`.execute(
      old,
    );
    for (const migration of MIGRATIONS.filter((m) => m.version <= 4)) {
      await migration.up(old, 'sqlite');
      await old
        .insertInto('gatehouse_migrations')
        .values({ version: migration.version, name: migration.name, applied_at: 'then' })
        .execute();
    }
    const at = new Date().toISOString();
    await old
      .insertInto('servers')
      .values({
        id: 'files',
        name: 'files',
        transport: 'streamable-http',
        url: 'http://127.0.0.2/mcp',
        args: '[]',
        headers: '{}',
        env: '{}',
        auth: '{}',
        enabled: 1,
        private_network: 0,
        trust_new_tools: 0,
        exposure: '["default"]',
        tool_policy: '{}',
        options: '{}',
        policy_version: 1,
        status: 'connected',
        discovered_tools: '[]',
        discovered_prompts: '[]',
        discovered_resources: '[]',
        source_kind: 'url',
        installed_at: at,
        updated_at: at,
      })
      .execute();
    await old
      .insertInto('tool_pins')
      .values({
        server_id: 'files',
        tool_name: 'greet',
        pin_hash: 'a'.repeat(64),
        definition: '{"name":"greet"}',
        state: 'quarantined',
        reason: 'changed',
        pending_hash: 'b'.repeat(64),
        pending_definition: '{"name":"greet","description":"new"}',
        first_seen_at: at,
        updated_at: at,
        approved_by: null,
      })
      .execute();
    await old.destroy();

    const store = await openStore(place);
    try {
      const pins = await store.db.selectFrom('tool_pins').selectAll().execute();
      const [pin] = pins;
      if (!pin) throw new Error('the pin is gone');
      expect(pins).toEqual([
        expect.objectContaining({
          server_id: 'files',
          kind: 'tool',
          scheme: 1,
          tool_name: 'greet',
          pin_hash: 'a'.repeat(64),
          state: 'quarantined',
          reason: 'changed',
          pending_hash: 'b'.repeat(64),
        }),
      ]);
      // The key now includes the kind: a prompt may be named like a tool.
      await store.db
        .insertInto('tool_pins')
        .values({
          server_id: 'files',
          kind: 'prompt',
          tool_name: 'greet',
          scheme: 1,
          pin_hash: pin.pin_hash,
          definition: pin.definition,
          state: 'pinned',
          reason: null,
          pending_hash: null,
          pending_definition: null,
          first_seen_at: pin.first_seen_at,
          updated_at: pin.updated_at,
          approved_by: null,
        })
        .execute();
      expect(await store.db.selectFrom('tool_pins').select('kind').orderBy('kind').execute()).toEqual([
        { kind: 'prompt' },
        { kind: 'tool' },
      ]);
      // The cascade from servers still holds.
      await store.db.deleteFrom('servers').where('id', '=', 'files').execute();
      expect(await store.db.selectFrom('tool_pins').selectAll().execute()).toEqual([]);
    } finally {
      await store.close();
    }
  } finally {
    await place.cleanup();
  }
});
