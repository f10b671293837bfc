/**
 * Section `memory` (issue 8): the embedded memory engine, in process, at 100k memory units on SQLite
 * and on PostgreSQL. Measures:
 * - add rate: `engine.add` end to end (document + operation committed, extraction run in the
 *   background and committed), sequentially, on a sample of documents;
 * - seed rate: the rest of the 100k units loaded in batched transactions (the full-text index kept
 *   by the SQLite triggers / the PostgreSQL generated tsvector) — labelled apart, it is not `add`;
 * - search p50/p99 (limit 10) and recall p50/p99 (budget mid, max_tokens 2048) over queries of two or
 *   three words drawn from the corpus vocabulary.
 * Target (issue 8): search p50 under 5 ms at 100k on SQLite.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { MemoryEngine } from '../src/memory/engine.js';
import { contentHash, newMemoryId } from '../src/memory/text.js';
import { openStore, type Store } from '../src/store/db.js';
import { machineLine, num, renderTable, verdict } from './table.js';

const UNITS = Number(process.env.BENCH_MEMORY_UNITS ?? 100_000);
const ADD_SAMPLE = Number(process.env.BENCH_MEMORY_ADDS ?? 500);
const SEARCHES = 500;
const RECALLS = 200;
const VOCABULARY = 6000;
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A deterministic generator, so every run and both databases see the same corpus and queries. */
function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SYLLABLES = ['ka', 'lo', 'mi', 'ter', 'zan', 'po', 'ri', 'sul', 'ven', 'da', 'gor', 'ny', 'bel', 'tis', 'ur'];
function vocabulary(random: () => number): string[] {
  const words = new Set<string>();
  while (words.size < VOCABULARY) {
    const n = 2 + Math.floor(random() * 3);
    let word = '';
    for (let i = 0; i < n; i++) word += SYLLABLES[Math.floor(random() * SYLLABLES.length)];
    words.add(word);
  }
  return [...words];
}

/** Zipf-like pick: a few words are common, most are rare — like real text. */
function zipfPick(words: readonly string[], random: () => number): string {
  const index = Math.min(words.length - 1, Math.floor(words.length * random() ** 3));
  return words[index] as string;
}

function sentence(words: readonly string[], random: () => number): string {
  const n = 8 + Math.floor(random() * 14);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(zipfPick(words, random));
  return `${parts.join(' ')}.`;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

interface Figures {
  store: string;
  addPerS: number;
  seedPerS: number;
  searchP50: number;
  searchP99: number;
  recallP50: number;
  recallP99: number;
  hitsPerSearch: number;
}

async function seed(store: Store, words: readonly string[], random: () => number, count: number): Promise<number> {
  const started = performance.now();
  const batch = 200;
  const at = new Date(Date.now() - 90 * 86_400_000);
  for (let done = 0; done < count; ) {
    await store.db.transaction().execute(async (trx) => {
      for (let inTx = 0; inTx < 5 && done < count; inTx++) {
        const rows = [];
        for (let i = 0; i < batch && done < count; i++, done++) {
          const text = sentence(words, random);
          const created = new Date(at.getTime() + done * 60_000).toISOString();
          rows.push({
            id: newMemoryId('mem'),
            dataset: done % 10 === 0 ? 'private:tok_bench' : 'shared',
            text,
            context: null,
            fact_type: done % 3 === 0 ? 'experience' : 'world',
            entities: '[]',
            tags: done % 7 === 0 ? '["seeded"]' : '[]',
            occurred_start: null,
            occurred_end: null,
            state: 'valid',
            source: 'tok_bench',
            document_id: null,
            content_hash: contentHash(text),
            metadata: '{}',
            created_at: created,
            updated_at: created,
          });
        }
        await trx.insertInto('memory_units').values(rows).execute();
      }
    });
  }
  return count / ((performance.now() - started) / 1000);
}

async function measure(label: string, store: Store): Promise<Figures> {
  const random = rng(8);
  const words = vocabulary(random);
  const engine = new MemoryEngine({ store });
  const actor = { id: 'tok_bench', name: 'bench' };
  try {
    process.stderr.write(`memory [${label}]: ${ADD_SAMPLE} adds through the engine\n`);
    const addStarted = performance.now();
    for (let i = 0; i < ADD_SAMPLE; i++) {
      await engine.add({ text: sentence(words, random), tags: ['added'] }, 'shared', actor);
      await engine.idle();
    }
    const addPerS = ADD_SAMPLE / ((performance.now() - addStarted) / 1000);

    process.stderr.write(`memory [${label}]: seeding ${UNITS - ADD_SAMPLE} units\n`);
    const seedPerS = await seed(store, words, random, UNITS - ADD_SAMPLE);
    await sql.raw(store.kind === 'postgres' ? 'analyze memory_units' : 'pragma optimize').execute(store.db);

    const datasets = ['shared', 'private:tok_bench'];
    const queries = Array.from({ length: SEARCHES + RECALLS + 20 }, () => {
      const n = 2 + Math.floor(random() * 2);
      return Array.from({ length: n }, () => words[50 + Math.floor(random() * (words.length - 50))]).join(' ');
    });
    for (const q of queries.slice(0, 20)) await engine.search(q, { datasets }, 10); // warm caches
    process.stderr.write(`memory [${label}]: ${SEARCHES} searches, ${RECALLS} recalls\n`);
    const searchTimes: number[] = [];
    let hits = 0;
    for (const q of queries.slice(20, 20 + SEARCHES)) {
      const t = performance.now();
      hits += (await engine.search(q, { datasets }, 10)).length;
      searchTimes.push(performance.now() - t);
    }
    const recallTimes: number[] = [];
    for (const q of queries.slice(20 + SEARCHES)) {
      const t = performance.now();
      await engine.recall(q, { datasets, max_tokens: 2048, budget: 'mid' });
      recallTimes.push(performance.now() - t);
    }
    searchTimes.sort((a, b) => a - b);
    recallTimes.sort((a, b) => a - b);
    return {
      store: label,
      addPerS,
      seedPerS,
      searchP50: percentile(searchTimes, 50),
      searchP99: percentile(searchTimes, 99),
      recallP50: percentile(recallTimes, 50),
      recallP99: percentile(recallTimes, 99),
      hitsPerSearch: hits / SEARCHES,
    };
  } finally {
    await engine.close();
  }
}

async function onSqlite(): Promise<Figures> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-bench-memory-'));
  const store = await openStore({ dataDir });
  try {
    return await measure('SQLite', store);
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function onPostgres(): Promise<Figures | string> {
  const schema = `gh_bench_memory_${process.pid}`;
  const admin = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 2000 });
  try {
    await admin.connect();
  } catch {
    return `PostgreSQL at ${DATABASE_URL} is unreachable: skipped (set BENCH_DATABASE_URL).`;
  }
  await admin.query(`create schema ${schema}`);
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const store = await openStore({ dataDir: os.tmpdir(), databaseUrl: url.toString() });
  try {
    return await measure('PostgreSQL', store);
  } finally {
    await store.close();
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  }
}

export async function memorySection(): Promise<string> {
  const loadBefore = os.loadavg()[0] as number;
  const results: (Figures | string)[] = [await onSqlite(), await onPostgres()];
  const loadAfter = os.loadavg()[0] as number;
  const figures = results.filter((r): r is Figures => typeof r !== 'string');
  const notes = results.filter((r): r is string => typeof r === 'string');
  const table = renderTable(
    [
      { title: 'store', align: 'left' },
      { title: 'add/s' },
      { title: 'seed units/s' },
      { title: 'search p50 ms' },
      { title: 'search p99 ms' },
      { title: 'recall p50 ms' },
      { title: 'recall p99 ms' },
      { title: 'hits/search' },
    ],
    figures.map((f) => [
      f.store,
      num(f.addPerS, 0),
      num(f.seedPerS, 0),
      num(f.searchP50, 2),
      num(f.searchP99, 2),
      num(f.recallP50, 2),
      num(f.recallP99, 2),
      num(f.hitsPerSearch, 1),
    ]),
  );
  const sqlite = figures.find((f) => f.store === 'SQLite');
  return [
    `## memory — embedded engine at ${UNITS.toLocaleString('en')} units (in process)`,
    machineLine(),
    `load average (1 min) before/after: ${num(loadBefore, 2)} / ${num(loadAfter, 2)} on ${os.cpus().length} cores (other work lowers every figure)`,
    `add = engine.add end to end (document, operation, background extraction; ${ADD_SAMPLE} sequential adds, no language model);`,
    'seed = the remaining units in batched transactions; search limit 10; recall budget mid, max_tokens 2048.',
    '',
    table,
    ...notes,
    '',
    `target: search p50 < 5 ms at ${UNITS.toLocaleString('en')} on SQLite — ${num(sqlite?.searchP50, 2)} ms, ${verdict((sqlite?.searchP50 ?? Number.POSITIVE_INFINITY) < 5)}`,
  ].join('\n');
}
