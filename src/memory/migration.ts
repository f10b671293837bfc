/**
 * Migration 4: the memory bank's tables on both databases, and its full-text
 * index — an external-content FTS5 table kept in step by triggers on SQLite
 * (porter stemming, BM25), a generated `tsvector` column with a GIN index on
 * PostgreSQL (english configuration, `ts_rank`).
 */
import { type Kysely, sql } from 'kysely';
import type { StoreKind } from '../store/db.js';

// biome-ignore lint/suspicious/noExplicitAny: migrations create tables the typed schema does not know yet
type AnyDb = Kysely<any>;

export async function memoryMigration(db: AnyDb, kind: StoreKind): Promise<void> {
  const seq = kind === 'postgres' ? sql`bigserial primary key` : sql`integer primary key autoincrement`;
  await db.schema
    .createTable('memory_units')
    .addColumn('seq', seq)
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('dataset', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('context', 'text')
    .addColumn('fact_type', 'text', (c) => c.notNull())
    .addColumn('entities', 'text', (c) => c.notNull())
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('occurred_start', 'text')
    .addColumn('occurred_end', 'text')
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('document_id', 'text')
    .addColumn('content_hash', 'text', (c) => c.notNull())
    .addColumn('metadata', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('memory_units_by_dataset')
    .on('memory_units')
    .columns(['dataset', 'state', 'created_at'])
    .execute();
  await db.schema.createIndex('memory_units_by_hash').on('memory_units').columns(['dataset', 'content_hash']).execute();
  await db.schema.createIndex('memory_units_by_document').on('memory_units').columns(['document_id']).execute();

  await db.schema
    .createTable('memory_documents')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('dataset', 'text', (c) => c.notNull())
    .addColumn('content_hash', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('context', 'text')
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('fact_count', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('memory_documents_by_hash')
    .on('memory_documents')
    .columns(['dataset', 'content_hash'])
    .execute();

  await db.schema
    .createTable('memory_history')
    .addColumn('seq', seq)
    .addColumn('unit_id', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('actor_id', 'text')
    .addColumn('actor_name', 'text')
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('before', 'text')
    .addColumn('after', 'text')
    .execute();
  await db.schema.createIndex('memory_history_by_unit').on('memory_history').columns(['unit_id', 'seq']).execute();

  await db.schema
    .createTable('memory_directives')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('priority', 'integer', (c) => c.notNull())
    .addColumn('is_active', 'integer', (c) => c.notNull())
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('memory_mental_models')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('source_query', 'text', (c) => c.notNull())
    .addColumn('max_tokens', 'integer', (c) => c.notNull())
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('content', 'text')
    .addColumn('grounding', 'text', (c) => c.notNull())
    .addColumn('refreshed_at', 'text')
    .addColumn('created_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('memory_operations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('dataset', 'text')
    .addColumn('requester_id', 'text', (c) => c.notNull())
    .addColumn('requester_name', 'text', (c) => c.notNull())
    .addColumn('target_id', 'text')
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('result', 'text')
    .addColumn('error', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('started_at', 'text')
    .addColumn('finished_at', 'text')
    .execute();
  await db.schema
    .createIndex('memory_operations_by_status')
    .on('memory_operations')
    .columns(['status', 'created_at'])
    .execute();

  if (kind === 'sqlite') {
    await sql`create virtual table memory_units_fts using fts5(
      text, context, content='memory_units', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2'
    )`.execute(db);
    await sql`create trigger memory_units_fts_insert after insert on memory_units begin
      insert into memory_units_fts(rowid, text, context) values (new.seq, new.text, new.context);
    end`.execute(db);
    await sql`create trigger memory_units_fts_delete after delete on memory_units begin
      insert into memory_units_fts(memory_units_fts, rowid, text, context) values ('delete', old.seq, old.text, old.context);
    end`.execute(db);
    await sql`create trigger memory_units_fts_update after update of text, context on memory_units begin
      insert into memory_units_fts(memory_units_fts, rowid, text, context) values ('delete', old.seq, old.text, old.context);
      insert into memory_units_fts(rowid, text, context) values (new.seq, new.text, new.context);
    end`.execute(db);
  } else {
    await sql`alter table memory_units add column tsv tsvector generated always as (
      to_tsvector('english', text || ' ' || coalesce(context, ''))
    ) stored`.execute(db);
    await sql`create index memory_units_tsv on memory_units using gin (tsv)`.execute(db);
  }
}
