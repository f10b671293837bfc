/**
 * The local audit journal (SQLite): a call row is committed by an append to this process's journal before
 * its answer, stored a moment later with a record of how much of the journal is stored, and a journal whose
 * writer is gone is replayed exactly once (from the recorded prefix; a torn last line was never answered).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditJournal } from '../../src/audit/journal.js';
import { AuditLog, type AuditRow } from '../../src/audit/log.js';
import type { Store } from '../../src/store/db.js';
import { freshStore, sqliteTarget } from '../helpers/stores.js';

function row(n: number, at = new Date(Date.now() - 60_000 + n).toISOString()): AuditRow {
  return {
    at,
    kind: 'call',
    action: 'tools/call',
    actor_id: 'tok_agent',
    actor_name: 'agent-one',
    user_id: null,
    user_name: null,
    server_id: 'files',
    tool: `tool-${n}`,
    verdict: 'allow',
    approval_id: null,
    outcome: 'ok',
    latency_ms: 3,
    request_bytes: 10,
    response_bytes: 20,
    args_digest: null,
    data: null,
    trace_id: null,
  };
}

async function storedTools(store: Store): Promise<string[]> {
  const rows = await store.db
    .selectFrom('audit_events')
    .select('tool')
    .where('kind', '=', 'call')
    .orderBy('id')
    .execute();
  return rows.map((r) => r.tool ?? '');
}

async function storedBytes(store: Store, name: string): Promise<number | undefined> {
  const mark = await store.db
    .selectFrom('audit_journals')
    .select('stored_bytes')
    .where('name', '=', name)
    .executeTakeFirst();
  return mark === undefined ? undefined : Number(mark.stored_bytes);
}

/** A pid no process has now (a child that has exited). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

const host = () =>
  hostname()
    .replace(/[^A-Za-z0-9-]/g, '_')
    .slice(0, 64) || 'host';

// The journal is SQLite's (one machine, one disk); on PostgreSQL each group is committed to the store.
describe('audit journal [sqlite]', () => {
  const target = sqliteTarget;
  let base: Awaited<ReturnType<typeof freshStore>>;
  const errors: unknown[] = [];
  const onError = (error: unknown) => {
    errors.push(error);
  };
  beforeEach(async () => {
    base = await freshStore(target);
    errors.length = 0;
  });
  afterEach(async () => {
    await base.cleanup();
  });
  const journalDir = () => path.join(base.dataDir, 'audit-journal');

  it('answers a call once its row is in the journal, and stores it with the record of the journal’s stored prefix', async () => {
    const journal = await AuditJournal.open(base.store, base.dataDir, { onError });
    const audit = new AuditLog(base.store, { onError });
    audit.journalTo(journal);
    const committed = [audit.enqueue(row(1)), audit.enqueue(row(2)), audit.enqueue(row(3))];
    // The turn's first row is appended at once (a lone call waits for no turn); the others share one append
    // at the end of the turn.
    const fileNow = () => readFileSync(journal.location, 'utf8').trimEnd().split('\n').filter(Boolean);
    expect(fileNow().map((line) => (JSON.parse(line) as AuditRow).tool)).toEqual(['tool-1']);
    await Promise.all(committed);
    // Committed: every row is in the file, none necessarily in the store yet.
    const lines = fileNow();
    expect(lines.map((line) => (JSON.parse(line) as AuditRow).tool)).toEqual(['tool-1', 'tool-2', 'tool-3']);

    await audit.settle();
    expect(await storedTools(base.store)).toEqual(['tool-1', 'tool-2', 'tool-3']);
    expect(await storedBytes(base.store, journal.name)).toBe(statSync(journal.location).size);

    // Closed with everything stored: the file and its record go.
    await audit.close();
    expect(readdirSync(journalDir())).toEqual([]);
    expect(await storedBytes(base.store, journal.name)).toBeUndefined();
    expect(errors).toEqual([]);
  });

  it('stores the rows a moment later on its own, and replaces a grown journal once everything in it is stored', async () => {
    const journal = await AuditJournal.open(base.store, base.dataDir, { onError, rotateBytes: 1000 });
    const audit = new AuditLog(base.store, { onError });
    audit.journalTo(journal);
    const first = journal.name;
    for (let i = 0; i < 10; i++) await audit.enqueue(row(i));
    // No reader asks: the batch timer stores them.
    await expect.poll(() => storedTools(base.store), { timeout: 5000 }).toHaveLength(10);
    await expect.poll(() => journal.name, { timeout: 5000 }).not.toBe(first);
    expect(readdirSync(journalDir())).toEqual([journal.name]);
    expect(await storedBytes(base.store, first)).toBeUndefined();
    await audit.enqueue(row(10));
    await audit.close();
    expect(await storedTools(base.store)).toHaveLength(11);
  });

  it('replays a journal left by a dead process of this host exactly once: past the stored prefix, not the torn last line', async () => {
    // A process that stored two rows, journaled two more, and died half-way through writing a fifth.
    const name = `${host()}.${deadPid()}.abcdef012345.ndjson`;
    const file = path.join(journalDir(), name);
    const stored = [row(1), row(2)].map((r) => `${JSON.stringify(r)}\n`).join('');
    const left = [row(3), row(4)].map((r) => `${JSON.stringify(r)}\n`).join('');
    const torn = JSON.stringify(row(5)).slice(0, 40);
    const setup = await AuditJournal.open(base.store, base.dataDir, { onError });
    await setup.close(true);
    writeFileSync(file, stored + left + torn);
    await base.store.relaxedInsert(
      'audit_events',
      [row(1), row(2)],
      [{ table: 'audit_journals', key: { name }, add: { stored_bytes: Buffer.byteLength(stored) } }],
    );

    const journal = await AuditJournal.open(base.store, base.dataDir, { onError });
    expect(await storedTools(base.store)).toEqual(['tool-1', 'tool-2', 'tool-3', 'tool-4']);
    expect(readdirSync(journalDir())).toEqual([journal.name]);
    expect(await storedBytes(base.store, name)).toBeUndefined();
    // The Overview's day counts include the replayed rows (and only those: the first two were counted by their writer).
    const counted = await base.store.db
      .selectFrom('audit_rollup_calls')
      .select((eb) => eb.fn.sum<number>('calls').as('calls'))
      .executeTakeFirst();
    expect(Number(counted?.calls)).toBe(2);
    await journal.close(true);
    expect(errors).toEqual([]);
  });

  it('leaves a live journal of another host alone, replays one nobody has touched for long, and skips unreadable lines', async () => {
    const live = path.join(journalDir(), 'elsewhere.4242.000000000001.ndjson');
    const stale = path.join(journalDir(), 'elsewhere.4243.000000000002.ndjson');
    const setup = await AuditJournal.open(base.store, base.dataDir, { onError });
    await setup.close(true);
    writeFileSync(live, `${JSON.stringify(row(1))}\n`);
    writeFileSync(
      stale,
      `${JSON.stringify(row(2))}\nnot json\n${JSON.stringify({ at: 'x' })}\n${JSON.stringify(row(3))}\n`,
    );
    const longAgo = (Date.now() - 10 * 60_000) / 1000;
    utimesSync(stale, longAgo, longAgo);

    const journal = await AuditJournal.open(base.store, base.dataDir, { onError });
    expect(await storedTools(base.store)).toEqual(['tool-2', 'tool-3']);
    expect(readdirSync(journalDir()).sort()).toEqual([path.basename(live), journal.name].sort());
    expect(errors.map(String)).toEqual([expect.stringContaining('2 unreadable lines')]);
    await journal.close(true);
  });

  it('keeps a leftover the store refuses, claimed, without stopping the start; a later replay stores it once', async () => {
    const name = `${host()}.${deadPid()}.abcdef012346.ndjson`;
    const setup = await AuditJournal.open(base.store, base.dataDir, { onError });
    await setup.close(true);
    writeFileSync(path.join(journalDir(), name), `${JSON.stringify(row(1))}\n${JSON.stringify(row(2))}\n`);
    // The store refuses every audit row for now (a real SQLite trigger, as a full disk or a broken table would).
    await sql`create trigger refuse_audit before insert on audit_events begin select raise(abort, 'refused'); end`.execute(
      base.store.db,
    );

    const first = await AuditJournal.open(base.store, base.dataDir, { onError });
    expect(errors.map(String)).toEqual([expect.stringContaining('refused')]);
    expect(await storedTools(base.store)).toEqual([]);
    expect(readdirSync(journalDir()).sort()).toEqual([first.name, `${name}.replaying`].sort());
    await first.close(true);

    // Once the store takes rows again, the claimed file is replayed when it has gone stale: both rows, once.
    await sql`drop trigger refuse_audit`.execute(base.store.db);
    const longAgo = (Date.now() - 10 * 60_000) / 1000;
    utimesSync(path.join(journalDir(), `${name}.replaying`), longAgo, longAgo);
    const second = await AuditJournal.open(base.store, base.dataDir, { onError });
    expect(await storedTools(base.store)).toEqual(['tool-1', 'tool-2']);
    expect(readdirSync(journalDir())).toEqual([second.name]);
    await second.close(true);
  });
});
