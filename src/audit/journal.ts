/**
 * The local audit journal (SQLite only). A call's row is appended to a file of this process before the
 * call is answered — the first of a turn of the event loop at once, the turn's others in one shared
 * `write` at its end — and moved into the store in batches a moment later (`AuditLog`). An SQLite
 * commit per group (a transaction, its file locks, a WAL frame per touched page) was most of what
 * auditing cost a call; an append is a fraction of it.
 *
 * Durability is the commit's it replaces (WAL at `synchronous = NORMAL`): a written row survives a crash
 * of the process, and both sit in the OS page cache until the disk has them.
 *
 * Exactly once: `audit_journals` keeps, per journal file, how many of its bytes are stored, added to in
 * the transaction that stores their rows (rows are stored in the order they were appended, so that is
 * always a prefix). A journal whose writer is gone is replayed from there into the store, then removed:
 * at start, a file of this host whose process is no longer running; at every sweep, any file nobody has
 * touched for `STALE_MS` (a live writer touches its file every `TOUCH_MS`, even when idle) — the writer
 * on another host sharing the data folder is gone too. A replayer claims a file by renaming it first, so
 * two processes never replay one file.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  futimesSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { rollupIncrements } from '../overview/rollup.js';
import type { Increment, Store } from '../store/db.js';
import type { AuditRow } from './log.js';

/** A live writer touches its file this often, so an idle one is never taken for gone. */
const TOUCH_MS = 15_000;
/** A file untouched this long has no writer (any host): it is replayed. */
const STALE_MS = 90_000;
/** How often journals left by others are looked for. */
const SWEEP_MS = 30_000;
/** Past this size, a journal whose rows are all stored is replaced by a fresh one. */
const ROTATE_BYTES = 16 * 1024 * 1024;
const SUFFIX = '.ndjson';
const CLAIMED = '.replaying';

/** The columns a journal line must have to be a row (anything else in the file is reported and skipped). */
function isRow(value: unknown): value is AuditRow {
  if (typeof value !== 'object' || value === null) return false;
  const row = value as Record<string, unknown>;
  return typeof row.at === 'string' && typeof row.kind === 'string' && typeof row.action === 'string';
}

export interface AuditJournalOptions {
  /** Something about a journal went wrong (the rows stay where they are: in the file, or queued). */
  onError: (error: unknown, context: { rows: number; requeued: boolean }) => void;
  /** Size past which a fully stored journal is replaced by a fresh file (default 16 MiB). */
  rotateBytes?: number;
}

export class AuditJournal {
  private fd: number;
  private file: string;
  private size = 0;
  private sweeper: NodeJS.Timeout | undefined;
  private lastTouch = Date.now();
  private sweeping: Promise<void> = Promise.resolve();
  /** A write failed part-way: the file may end in a torn line, so nothing more is appended to it. */
  broken = false;

  private constructor(
    private readonly store: Store,
    private readonly dir: string,
    private readonly options: AuditJournalOptions,
  ) {
    ({ fd: this.fd, file: this.file } = this.create());
  }

  /** Replays what earlier processes of this host left (and stale journals of any), then opens this process's own. */
  static async open(store: Store, dataDir: string, options: AuditJournalOptions): Promise<AuditJournal> {
    const dir = path.join(dataDir, 'audit-journal');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    await replayLeftovers(store, dir, undefined, options);
    const journal = new AuditJournal(store, dir, options);
    journal.sweeper = setInterval(() => void journal.sweep(), SWEEP_MS);
    journal.sweeper.unref();
    return journal;
  }

  /** The journal's name in `audit_journals`. */
  get name(): string {
    return path.basename(this.file);
  }

  /** The journal file this process appends to. */
  get location(): string {
    return this.file;
  }

  /**
   * Appends `rows` (one JSON line each) in one synchronous write (a few microseconds into the page cache; an
   * `fs.write` through the thread pool costs the event loop more than the write itself); answers each line's
   * length in bytes. Throws when the write failed: the caller then stores these rows itself before answering.
   */
  append(rows: readonly AuditRow[]): number[] {
    if (this.broken) throw new Error('the audit journal is unusable after a failed write');
    const lines = rows.map((row) => Buffer.from(`${JSON.stringify(row)}\n`));
    const buffer = lines.length === 1 ? (lines[0] as Buffer) : Buffer.concat(lines);
    let written = 0;
    try {
      while (written < buffer.length) written += writeSync(this.fd, buffer, written);
    } catch (error) {
      if (written > 0) this.broken = true;
      throw error;
    }
    this.size += buffer.length;
    return lines.map((line) => line.length);
  }

  /** Records, with the rows it is committed with, that `bytes` more of this journal are stored. */
  stored(bytes: number): Increment {
    return { table: 'audit_journals', key: { name: this.name }, add: { stored_bytes: bytes } };
  }

  /**
   * Called when every row appended so far is stored: a journal grown past `ROTATE_BYTES` (or broken) is
   * replaced by a fresh file, and removed with its record (appends are synchronous: none is ever in flight).
   */
  async rotateIfDue(): Promise<void> {
    if (!this.broken && this.size < (this.options.rotateBytes ?? ROTATE_BYTES)) return;
    const old = { fd: this.fd, file: this.file };
    ({ fd: this.fd, file: this.file } = this.create());
    this.size = 0;
    this.broken = false;
    await this.remove(old);
  }

  /** Stops the sweep; with every row stored, removes the file and its record (else the next start replays it). */
  async close(allStored: boolean): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    await this.sweeping;
    if (allStored) await this.remove({ fd: this.fd, file: this.file });
    else closeSync(this.fd);
  }

  /** Keeps this journal looking alive, and replays journals whose writers are gone. */
  private sweep(): Promise<void> {
    this.sweeping = this.sweeping.then(async () => {
      this.touch();
      await replayLeftovers(this.store, this.dir, this.name, this.options).catch((error) =>
        this.options.onError(error, { rows: 0, requeued: true }),
      );
    });
    return this.sweeping;
  }

  private touch(): void {
    const now = Date.now();
    if (now - this.lastTouch < TOUCH_MS / 2) return;
    this.lastTouch = now;
    try {
      futimesSync(this.fd, now / 1000, now / 1000);
    } catch {
      // A journal whose time cannot be set is still written; another host might replay it late, never twice.
    }
  }

  private create(): { fd: number; file: string } {
    // Host and pid tell this host's leftovers apart at start; the random part keeps names unique.
    const name = `${safeHost()}.${process.pid}.${randomBytes(6).toString('hex')}${SUFFIX}`;
    const file = path.join(this.dir, name);
    return { fd: openSync(file, 'a', 0o600), file };
  }

  /** The file first, then its record: a record without a file is inert, a file without one would replay. */
  private async remove(journal: { fd: number; file: string }): Promise<void> {
    closeSync(journal.fd);
    try {
      unlinkSync(journal.file);
      await this.store.db.deleteFrom('audit_journals').where('name', '=', path.basename(journal.file)).execute();
    } catch (error) {
      this.options.onError(error, { rows: 0, requeued: false });
    }
  }
}

function safeHost(): string {
  return (
    hostname()
      .replace(/[^A-Za-z0-9-]/g, '_')
      .slice(0, 64) || 'host'
  );
}

/** Whether the journal `name` was left by a process that is gone (never `own`, this process's own journal). */
function isLeftover(name: string, file: string, own: string | undefined): boolean {
  if (name === own) return false;
  let mtimeMs: number;
  try {
    mtimeMs = statSync(file).mtimeMs;
  } catch {
    return false; // someone else took it a moment ago
  }
  if (Date.now() - mtimeMs > STALE_MS) return true;
  if (name.endsWith(CLAIMED)) return false; // a replay in progress (left alone until it goes stale)
  const [host, pid] = name.split('.');
  if (host !== safeHost()) return false;
  const writer = Number(pid);
  if (!Number.isInteger(writer) || writer <= 0) return false;
  // An earlier life of this pid (a container restarted as pid 1) is gone too: our own file is `own`.
  if (writer === process.pid) return true;
  try {
    process.kill(writer, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

async function replayLeftovers(
  store: Store,
  dir: string,
  own: string | undefined,
  options: AuditJournalOptions,
): Promise<void> {
  for (const name of readdirSync(dir)) {
    if (!name.endsWith(SUFFIX) && !name.endsWith(SUFFIX + CLAIMED)) continue;
    const file = path.join(dir, name);
    if (!isLeftover(name, file, own)) continue;
    // Claimed by renaming: of two processes replaying at once, only one rename succeeds.
    const claimed = name.endsWith(CLAIMED) ? file : `${file}${CLAIMED}`;
    try {
      if (claimed !== file) renameSync(file, claimed);
      const now = Date.now() / 1000;
      utimesSync(claimed, now, now);
    } catch {
      continue;
    }
    try {
      await replay(store, claimed, name.endsWith(CLAIMED) ? name.slice(0, -CLAIMED.length) : name, options);
    } catch (error) {
      // Kept (claimed) for a later sweep to try again once it goes stale; one bad file never stops a start.
      options.onError(error, { rows: 0, requeued: true });
    }
  }
}

/** Stores the rows of `file` past the recorded prefix of journal `name` (one transaction), then removes both. */
async function replay(store: Store, file: string, name: string, options: AuditJournalOptions): Promise<void> {
  const content = readFileSync(file);
  const recorded = await store.db
    .selectFrom('audit_journals')
    .select('stored_bytes')
    .where('name', '=', name)
    .executeTakeFirst();
  let offset = Number(recorded?.stored_bytes ?? 0);
  const start = offset;
  const rows: AuditRow[] = [];
  let skipped = 0;
  for (;;) {
    const end = content.indexOf(10, offset); // a line without its newline was never acknowledged
    if (end < 0) break;
    try {
      const value: unknown = JSON.parse(content.subarray(offset, end).toString('utf8'));
      if (isRow(value)) rows.push(value);
      else skipped++;
    } catch {
      skipped++;
    }
    offset = end + 1;
  }
  if (skipped > 0) {
    options.onError(new Error(`${skipped} unreadable lines in audit journal ${name}`), {
      rows: skipped,
      requeued: false,
    });
  }
  if (offset > start) {
    // One transaction for the rows, their Overview counts and the record: a crash half-way replays none twice.
    // A journal holds at most a few tens of thousands of rows (`ROTATE_BYTES`); this runs once, after a crash.
    await store.relaxedInsert('audit_events', rows, [
      ...rollupIncrements(rows),
      { table: 'audit_journals', key: { name }, add: { stored_bytes: offset - start } },
    ]);
  }
  unlinkSync(file);
  await store.db.deleteFrom('audit_journals').where('name', '=', name).execute();
}
