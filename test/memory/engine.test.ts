/**
 * The memory engine on both databases: retain as an operation, full-text search with one results
 * contract, token-budgeted recall with near-duplicates collapsed, curation history, consolidation,
 * operations (cancel, retry), and the store-unreachable classification.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isStoreUnreachable, withStore } from '../../src/memory/availability.js';
import { MemoryEngine, parseExtraction } from '../../src/memory/engine.js';
import { openStore, type Store } from '../../src/store/db.js';
import type { Database } from '../../src/store/schema.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';

const alice = { id: 'tok_alice', name: 'alice' };

describeEachStore('memory engine', (target) => {
  let engine: MemoryEngine;
  let cleanup: () => Promise<void>;

  beforeEach(async () => {
    const fresh = await freshStore(target);
    engine = new MemoryEngine({ store: fresh.store });
    cleanup = async () => {
      await engine.close();
      await fresh.cleanup();
    };
  });
  afterEach(async () => cleanup());

  const retain = async (text: string, dataset = 'shared', extra: Record<string, unknown> = {}) => {
    const added = await engine.add({ text, ...extra }, dataset, alice);
    await engine.idle();
    return { added, op: await engine.operationGet(added.operation_id) };
  };

  it('retains a document as one fact without a language model, and reports the yield', async () => {
    const { added, op } = await retain('The deploy pipeline runs on Tuesdays at noon.', 'shared', {
      tags: ['ops'],
      fact_type: 'world',
    });
    expect(added.id).toMatch(/^doc_[A-Za-z0-9_-]{16}$/);
    expect(op).toMatchObject({ kind: 'retain', status: 'completed', facts_extracted: 1, attempts: 1 });
    expect(op.nothing_learned).toBeUndefined();
    const listed = await engine.list({ datasets: ['shared'], limit: 10 });
    expect(listed.items).toHaveLength(1);
    expect(listed.items[0]).toMatchObject({
      text: 'The deploy pipeline runs on Tuesdays at noon.',
      tags: ['ops'],
      source: 'tok_alice',
      document_id: added.id,
      state: 'valid',
    });
  });

  it('recognises known content by its hash, and a document that teaches nothing new', async () => {
    await retain('Postgres listens on port 5432.');
    const again = await retain('  postgres LISTENS on   port 5432. ');
    expect(again.op).toMatchObject({ status: 'completed', facts_extracted: 0, document_fact_count: 1 });
    expect(again.op.notice).toMatch(/content was already known/);
    expect(again.op.nothing_learned).toBeUndefined();
    // Same fact, different context: a new document, but its only fact is already known.
    const zero = await retain('Postgres listens on port 5432.', 'shared', { context: 'from the runbook' });
    expect(zero.op).toMatchObject({ status: 'completed', facts_extracted: 0, nothing_learned: true });
    expect(zero.op.notice).toMatch(/Nothing new was learned/);
    // Another dataset knows nothing yet.
    const other = await retain('Postgres listens on port 5432.', 'project:db');
    expect(other.op).toMatchObject({ facts_extracted: 1 });
  });

  it('searches with ranking, dataset isolation, tag and fact-type filters', async () => {
    await retain('The billing service retries failed payments three times.', 'shared', { tags: ['billing'] });
    await retain('Payments are settled nightly by the ledger job.', 'shared', { fact_type: 'experience' });
    await retain('The office plant needs water on Fridays.');
    await retain('Secret: my payments password hint is a cat.', 'private:tok_bob');
    const hits = await engine.search('payment retries', { datasets: ['shared'] }, 10);
    expect(hits.map((h) => h.text)).toEqual([
      'The billing service retries failed payments three times.',
      'Payments are settled nightly by the ledger job.',
    ]);
    expect(hits[0]).toMatchObject({ dataset: 'shared', tags: ['billing'], source: 'tok_alice', metadata: {} });
    expect(hits[0]?.score).toBeGreaterThan(hits[1]?.score as number);
    expect(hits.every((h) => h.score > 0 && h.score <= 1)).toBe(true);
    expect(hits[0]?.timestamp).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await engine.search('payment', { datasets: ['shared'], tags: ['billing'] }, 10)).toHaveLength(1);
    expect(await engine.search('payment', { datasets: ['shared'], fact_type: 'experience' }, 10)).toHaveLength(1);
    expect((await engine.search('password', { datasets: ['shared'] }, 10)).length).toBe(0);
    expect((await engine.search('password', { datasets: ['private:tok_bob'] }, 10)).length).toBe(1);
    // Query syntax never reaches the index: quotes, operators and NEAR are plain words.
    expect(await engine.search('"payments" OR NEAR( * ) -- \' ;', { datasets: ['shared'] }, 10)).toHaveLength(2);
    expect(await engine.search('!!!', { datasets: ['shared'] }, 10)).toEqual([]);
  });

  it('matches a tag exactly: `_` in a tag is not a wildcard', async () => {
    await retain('Deploys go out on Tuesdays.', 'shared', { tags: ['release_train'] });
    await retain('Deploys are frozen in December.', 'shared', { tags: ['releaseXtrain'] });
    const hits = await engine.search('deploys', { datasets: ['shared'], tags: ['release_train'] }, 10);
    expect(hits.map((h) => h.text)).toEqual(['Deploys go out on Tuesdays.']);
    const listed = await engine.list({ datasets: ['shared'], tags: ['release_train'], limit: 10 });
    expect(listed.items.map((u) => u.text)).toEqual(['Deploys go out on Tuesdays.']);
  });

  it('finds a match the filters leave behind many better-ranked ones (the complete path)', async () => {
    const at = new Date().toISOString();
    const row = (text: string, dataset: string, i: number) => ({
      id: `mem_filler${i}`,
      dataset,
      text,
      context: null,
      fact_type: 'world',
      entities: '[]',
      tags: '[]',
      occurred_start: null,
      occurred_end: null,
      state: 'valid',
      source: 'tok_alice',
      document_id: null,
      content_hash: `h${i}`,
      metadata: '{}',
      created_at: at,
      updated_at: at,
    });
    const rows = Array.from({ length: 200 }, (_, i) => row(`widget widget widget number ${i}`, 'shared', i));
    rows.push(row('a long sentence that mentions the widget only once among many other words', 'project:x', 999));
    for (let i = 0; i < rows.length; i += 50)
      await engine.db
        .insertInto('memory_units')
        .values(rows.slice(i, i + 50))
        .execute();
    const hits = await engine.search('widget', { datasets: ['project:x'] }, 10);
    expect(hits.map((h) => h.id)).toEqual(['mem_filler999']);
    expect(await engine.search('widget', { datasets: ['shared'] }, 10)).toHaveLength(10);
  });

  it('recalls within a token budget and collapses near-duplicates', async () => {
    await retain('The staging cluster lives in eu-west-1 and has three nodes.');
    await retain('The staging cluster lives in eu-west-1 and has three nodes!', 'shared', { context: 'dup' });
    await retain('The staging cluster lives in eu-west-1 and it has three nodes.');
    await retain(`The staging cluster dashboard is at grafana. ${'padding words '.repeat(60)}`);
    const full = await engine.recall('staging cluster', { datasets: ['shared'], max_tokens: 4096, budget: 'mid' });
    expect(full.results).toHaveLength(2);
    const withTwins = full.results.find((r) => r.text.includes('eu-west-1'));
    expect(withTwins?.collapsed).toHaveLength(2);
    expect(full.truncated).toBe(false);
    const small = await engine.recall('staging cluster', { datasets: ['shared'], max_tokens: 40, budget: 'low' });
    expect(small.results).toHaveLength(1);
    expect(small.tokens).toBeLessThanOrEqual(40);
    expect(small.truncated).toBe(true);
  });

  it('curates without destroying: edits and invalidation are kept in the history', async () => {
    await retain('The API rate limit is 100 requests per minute.');
    const [unit] = (await engine.list({ datasets: ['shared'], limit: 1 })).items;
    const id = unit?.id as string;
    await engine.curate(id, { text: 'The API rate limit is 600 requests per minute.' }, ['shared'], alice);
    expect(await engine.search('600', { datasets: ['shared'] }, 5)).toHaveLength(1);
    expect(await engine.search('100', { datasets: ['shared'] }, 5)).toHaveLength(0);
    await engine.curate(id, { state: 'invalidated' }, ['shared'], alice);
    expect(await engine.search('rate limit', { datasets: ['shared'] }, 5)).toHaveLength(0);
    const history = await engine.history(id, ['shared']);
    expect(history.history.map((h) => (h as { action: string }).action)).toEqual(['created', 'edited', 'invalidated']);
    expect(history.history[1]).toMatchObject({
      before: { text: 'The API rate limit is 100 requests per minute.' },
      after: { text: 'The API rate limit is 600 requests per minute.' },
      actor: { id: 'tok_alice', name: 'alice' },
    });
    await expect(engine.history(id, ['private:tok_alice'])).rejects.toMatchObject({ code: 'memory.not_found' });
  });

  it('consolidates exact and near duplicates into the oldest unit, reversibly', async () => {
    await retain('Backups run every night at 02:00 UTC.', 'shared', { tags: ['a'] });
    await retain('Backups run every night at 02:00 UTC.', 'shared', { context: 'copy', tags: ['b'] });
    // A curation that makes one unit say exactly what another says: an exact duplicate by hash.
    await retain('Backups run nightly at two.', 'shared', { tags: ['d'] });
    const twin = (await engine.search('nightly', { datasets: ['shared'] }, 1))[0]?.id as string;
    await engine.curate(twin, { text: 'Backups run every night at 02:00 UTC.' }, ['shared'], alice);
    await retain('Backups run every single night at 02:00 UTC.', 'shared', { tags: ['c'] });
    await retain('Unrelated: the cafeteria opens at eight.');
    const before = (await engine.list({ datasets: ['shared'], limit: 10 })).items.length;
    const result = await engine.consolidate('shared', alice);
    expect(result.deduplicated).toBe(2);
    expect((await engine.list({ datasets: ['shared'], limit: 10 })).items).toHaveLength(before - 2);
    const op = await engine.operationGet(result.operation_id);
    expect(op).toMatchObject({ kind: 'consolidation', status: 'completed', deduplicated: 2 });
    const keeper = (await engine.search('backups', { datasets: ['shared'] }, 5))[0];
    expect(keeper?.tags.sort()).toEqual(['a', 'c', 'd']);
    // Invalidated, not deleted: the merged twin can be brought back.
    expect((await engine.getUnit(twin, ['shared'])).state).toBe('invalidated');
    await engine.curate(twin, { state: 'valid' }, ['shared'], alice);
    expect((await engine.history(twin, ['shared'])).history.map((h) => (h as { action: string }).action)).toEqual([
      'created',
      'edited',
      'invalidated',
      'restored',
    ]);
    expect((await engine.consolidate('shared', alice)).deduplicated).toBe(1);
  });

  it('cancels pending work and retries failed work', async () => {
    const added = await engine.add({ text: 'A fact that will be cancelled.' }, 'shared', alice);
    const cancelled = await engine.operationCancel(added.operation_id);
    expect(cancelled.status).toBe('cancelled');
    await engine.idle();
    expect((await engine.list({ datasets: ['shared'], limit: 5 })).items).toHaveLength(0);
    await expect(engine.operationCancel(added.operation_id)).rejects.toMatchObject({
      code: 'memory.operation_state',
    });
    const retried = await engine.operationRetry(added.operation_id);
    expect(['pending', 'processing', 'completed']).toContain(retried.status);
    await engine.idle();
    expect(await engine.operationGet(added.operation_id)).toMatchObject({ status: 'completed', facts_extracted: 1 });
    await expect(engine.operationRetry(added.operation_id)).rejects.toMatchObject({ code: 'memory.operation_state' });
    // Someone else's operation does not exist for this requester.
    await expect(engine.operationGet(added.operation_id, 'tok_bob')).rejects.toMatchObject({
      code: 'memory.not_found',
    });
  });

  it('runs again an operation whose process died mid-way (lapsed lease), exactly once', async () => {
    const added = await engine.add({ text: 'Lease test fact.' }, 'shared', alice);
    await engine.idle();
    // Make it look like a process claimed it and died before committing: no units, no result, an old lease.
    await engine.db.deleteFrom('memory_units').where('document_id', '=', added.id).execute();
    await engine.db
      .updateTable('memory_operations')
      .set({ status: 'processing', result: null, updated_at: '2000-01-01T00:00:00.000Z' })
      .where('id', '=', added.operation_id)
      .execute();
    expect(await engine.reclaimLapsed()).toBe(1);
    expect(await engine.reclaimLapsed()).toBe(0);
    expect(await engine.resume()).toBe(1);
    await engine.idle();
    expect(await engine.operationGet(added.operation_id)).toMatchObject({
      status: 'completed',
      facts_extracted: 1,
      attempts: 2,
    });
    expect((await engine.list({ datasets: ['shared'], limit: 5 })).items).toHaveLength(1);
  });

  it('keeps directives and mental models; refresh is unsupported without a language model', async () => {
    const directive = await engine.directiveCreate({ name: 'tone', content: 'Be brief.', priority: 5 }, alice);
    expect(await engine.directiveUpdate(directive.id, { is_active: false })).toMatchObject({ is_active: false });
    expect((await engine.directiveList({ limit: 10, offset: 0 })).total).toBe(1);
    const model = await engine.mentalModelCreate({ name: 'infra', source_query: 'infrastructure' }, alice);
    expect(model).toMatchObject({ operation_id: null, content_status: 'unsupported' });
    expect(await engine.mentalModelRefresh(model.mental_model_id as string, alice)).toMatchObject({
      status: 'unsupported',
    });
    expect(await engine.reflect('anything', { datasets: ['shared'], max_tokens: 100, budget: 'low' })).toMatchObject({
      status: 'unsupported',
    });
    const listed = await engine.mentalModelList({ detail: 'metadata', limit: 10, offset: 0 });
    expect(listed.mental_models[0]).toEqual({
      id: model.mental_model_id,
      name: 'infra',
      tags: [],
      stale: true,
      refreshed_at: null,
    });
    expect(await engine.stats(['shared'])).toMatchObject({ nodes: 0, directives: 1, mental_models: 1 });
  });

  it('lists with a cursor and counts tags', async () => {
    for (let i = 0; i < 5; i++) await retain(`Numbered fact ${i}.`, 'shared', { tags: i % 2 ? ['odd'] : ['even'] });
    const first = await engine.list({ datasets: ['shared'], limit: 3 });
    expect(first.items.map((u) => u.text)).toEqual(['Numbered fact 4.', 'Numbered fact 3.', 'Numbered fact 2.']);
    const second = await engine.list({ datasets: ['shared'], limit: 3, cursor: first.next_cursor as string });
    expect(second.items.map((u) => u.text)).toEqual(['Numbered fact 1.', 'Numbered fact 0.']);
    expect(second.next_cursor).toBeNull();
    expect(await engine.tags(['shared'])).toEqual({
      tags: [
        { tag: 'even', count: 3 },
        { tag: 'odd', count: 2 },
      ],
      count: 2,
    });
  });

  it('reports a statement error as itself, never as unavailability', async () => {
    const error = await withStore(() => sql`select * from no_such_table`.execute(engine.db)).catch((e) => e);
    expect(isStoreUnreachable(error)).toBe(false);
    expect(error.code).not.toBe('memory.engine_unavailable');
  });
});

describe('memory engine availability', () => {
  it('an unreachable store is memory.engine_unavailable with retry_after_s', async () => {
    const fresh = await freshStore({
      kind: 'sqlite',
      fresh: (await import('../helpers/stores.js')).sqliteTarget.fresh,
    });
    const engine = new MemoryEngine({ store: fresh.store });
    await fresh.store.close();
    const error = await engine.add({ text: 'x' }, 'shared', alice).catch((e) => e);
    expect(error).toMatchObject({ code: 'memory.engine_unavailable', details: { retry_after_s: 5 } });
    await fresh.cleanup().catch(() => {});
  });

  it('memory_add on a PostgreSQL that refuses connections is memory.engine_unavailable', async () => {
    const pool = new pg.Pool({
      connectionString: 'postgres://postgres@127.0.0.1:1/test',
      connectionTimeoutMillis: 2000,
    });
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    const engine = new MemoryEngine({ store: { kind: 'postgres', db } as unknown as Store });
    const error = await engine.add({ text: 'x' }, 'shared', alice).catch((e) => e);
    expect(error).toMatchObject({ code: 'memory.engine_unavailable', details: { retry_after_s: 5 } });
    await db.destroy();
  });

  it('a PostgreSQL that refuses connections is unavailable too', async () => {
    const error = await openStore({ dataDir: '/nonexistent', databaseUrl: 'postgres://postgres@127.0.0.1:1/test' })
      .then(() => undefined)
      .catch((e) => e);
    expect(isStoreUnreachable(error)).toBe(true);
  });

  it('parses extraction answers and refuses malformed ones', () => {
    expect(
      parseExtraction('```json\n{"facts":[{"text":" a ","fact_type":"experience","entities":["X",1]},"b",{"x":1}]}```'),
    ).toEqual([{ text: 'a', fact_type: 'experience', entities: ['X'] }, { text: 'b' }]);
    expect(() => parseExtraction('nope')).toThrow(/not JSON/);
    expect(() => parseExtraction('{"facts": 3}')).toThrow(/no "facts"/);
  });
});
