/**
 * `gatehouse doctor` as a real process on real stores: a healthy data folder made by a real gateway (key file,
 * bootstrap admin, an agent, a tested server), then one fault at a time — a key file others can read, another key,
 * a failed or untested server, bad settings, an unmigrated or missing store — each turning its row and the exit code.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Check } from '../../src/cli/doctor.js';
import { openStore } from '../../src/store/db.js';
import { LATEST_MIGRATION } from '../../src/store/migrations.js';
import { gatehouse, type Run } from '../cli-connect/run.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_SECRET_KEY, type TestGateway } from '../helpers/gateway.js';
import { POSTGRES_AVAILABLE, postgresTarget, sqliteTarget } from '../helpers/stores.js';

interface Report {
  ok: boolean;
  store: string;
  checks: Check[];
}

function report(run: Run): Report {
  try {
    return JSON.parse(run.stdout) as Report;
  } catch {
    throw new Error(`doctor printed no JSON (exit ${run.code}):\n${run.stdout}\n${run.stderr}`);
  }
}

const row = (r: Report, name: string) => r.checks.find((c) => c.name === name);
const levels = (r: Report) => Object.fromEntries(r.checks.map((c) => [c.name, c.status]));

/** A real gateway on a fresh SQLite folder with its own key file; closed before doctor runs. */
async function healthyDataDir(): Promise<{ gw: TestGateway; upstream: McpFixture }> {
  // An empty GATEHOUSE_SECRET_KEY counts as unset: the gateway creates secret.key in the data folder.
  const gw = await startTestGateway(sqliteTarget, { GATEHOUSE_SECRET_KEY: '' });
  const upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
  try {
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'fix' } });
    const tested = (await gw.request('POST', '/api/mcp/servers/fix/test')).json();
    expect(tested.ok, JSON.stringify(tested)).toBe(true);
    await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'claude' } });
    // Publishing the JWKS makes the first OAuth signing key (sealed with this folder's key).
    expect((await gw.request('GET', '/oauth/jwks', { token: null })).json().keys).toHaveLength(1);
    await gw.gateway.app.close();
  } catch (error) {
    await upstream.close();
    await gw.close();
    throw error;
  }
  return { gw, upstream };
}

describe('gatehouse doctor', { timeout: 90_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let dataDir: string;
  const doctor = (...extra: string[]) => gatehouse(['doctor', '--data-dir', dataDir, '--json', ...extra]);

  beforeEach(async () => {
    ({ gw, upstream } = await healthyDataDir());
    dataDir = gw.dataDir;
  });
  afterEach(async () => {
    await upstream?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers ok on every row of a healthy data folder, and exits 0', async () => {
    const run = await doctor();
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const r = report(run);
    expect(r.ok).toBe(true);
    expect(levels(r)).toEqual({
      store: 'ok',
      'stdio sandbox': 'ok',
      migrations: 'ok',
      'secret key': 'ok',
      'secret key permissions': 'ok',
      'secret key fingerprint': 'ok',
      tokens: 'ok',
      'server fix': 'ok',
      settings: 'ok',
      'oauth issuer': 'ok',
      'oauth signing keys': 'ok',
    });
    expect(row(r, 'oauth signing keys')?.detail).toMatch(/1 stored, newest .* opens with this key/);
    // bubblewrap is installed here; as root each server gets a uid of its own, without /etc/passwd.
    expect(row(r, 'stdio sandbox')?.detail).toContain('bubblewrap at');
    expect(row(r, 'migrations')?.detail).toContain(`schema version ${LATEST_MIGRATION}`);
    expect(row(r, 'tokens')?.detail).toMatch(/1 admin.*1 agent|1 agent.*1 admin/);
    expect(row(r, 'server fix')?.detail).toMatch(/connected: 2 tools/);

    const text = await gatehouse(['doctor', '--data-dir', dataDir]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^ok {4}store {2,}SQLite at /m);
    expect(text.stdout).toMatch(/0 fail, 0 warn, 11 ok/);
  });

  it('fails a key file other users can read, with the fix as hint, and leaves the mode alone', async () => {
    const keyFile = join(dataDir, 'secret.key');
    chmodSync(keyFile, 0o644);
    const run = await doctor();
    expect(run.code).toBe(1);
    const r = report(run);
    expect(r.ok).toBe(false);
    expect(row(r, 'secret key permissions')).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('mode 0644: users other than its owner can read it'),
      hint: expect.stringContaining(`chmod 600 ${keyFile}`),
    });
    expect(statSync(keyFile).mode & 0o777).toBe(0o644); // doctor only reads
    const text = await gatehouse(['doctor', '--data-dir', dataDir]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^fail {2}secret key permissions/m);
    expect(text.stdout).toMatch(/hint: chmod 600/);
  });

  it('fails a key that is not the one the store was sealed with', async () => {
    writeFileSync(join(dataDir, 'secret.key'), `${'b2'.repeat(32)}\n`, { mode: 0o600 });
    const run = await doctor();
    expect(run.code).toBe(1);
    expect(row(report(run), 'secret key fingerprint')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/is not the one this store was sealed with/),
    });
    expect(row(report(run), 'oauth signing keys')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/does not open with this secret key/),
    });
    // A lost key file is a warning about the file, and a failure: the sealed secrets cannot be opened.
    rmSync(join(dataDir, 'secret.key'));
    const missing = report(await doctor());
    expect(row(missing, 'secret key')).toMatchObject({ status: 'warn', detail: expect.stringMatching(/no key file/) });
    expect(row(missing, 'secret key fingerprint')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/no key was found to open them/),
    });
  });

  it('reports each enabled server’s last status: failed fails, untested warns, disabled is skipped', async () => {
    const store = await openStore({ dataDir });
    await store.db.updateTable('servers').set({ status: 'failed', last_error: 'connect ECONNREFUSED' }).execute();
    await store.db
      .insertInto('servers')
      .values({
        ...(await store.db.selectFrom('servers').selectAll().executeTakeFirstOrThrow()),
        id: 'later',
        status: 'unknown',
      })
      .execute();
    await store.db
      .insertInto('servers')
      .values({
        ...(await store.db.selectFrom('servers').selectAll().where('id', '=', 'fix').executeTakeFirstOrThrow()),
        id: 'off',
        enabled: 0,
      })
      .execute();
    await store.close();
    const run = await doctor();
    expect(run.code).toBe(1);
    const r = report(run);
    expect(row(r, 'server fix')).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('connect ECONNREFUSED'),
      hint: expect.stringContaining('gatehouse servers test fix'),
    });
    expect(row(r, 'server later')).toMatchObject({ status: 'warn', hint: 'gatehouse servers test later' });
    expect(row(r, 'server off')).toBeUndefined();
  });

  it('fails a stored setting that is not in force, warns on an unknown one', async () => {
    const store = await openStore({ dataDir });
    const at = new Date().toISOString();
    await store.db
      .insertInto('settings')
      .values({ key: 'mcp.future', value: '1', updated_at: at, updated_by: null })
      .execute();
    const unknown = await doctor();
    expect(unknown.code).toBe(0);
    expect(row(report(unknown), 'settings')).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('mcp.future'),
    });
    await store.db
      .insertInto('settings')
      .values({ key: 'mcp.scope.audit', value: '"write"', updated_at: at, updated_by: null })
      .execute();
    await store.close();
    const invalid = await doctor();
    expect(invalid.code).toBe(1);
    expect(row(report(invalid), 'settings')).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('mcp.scope.audit = "write"'),
    });
  });

  it('warns on a store behind this version’s schema and checks no further', async () => {
    const store = await openStore({ dataDir });
    await sql`delete from gatehouse_migrations where version = ${LATEST_MIGRATION}`.execute(store.db);
    await store.close();
    const run = await doctor();
    const r = report(run);
    expect(run.code).toBe(0);
    expect(row(r, 'migrations')).toMatchObject({ status: 'warn', hint: expect.stringContaining('gatehouse serve') });
    expect(row(r, 'store contents')?.status).toBe('warn');
    expect(row(r, 'tokens')).toBeUndefined();
  });
});

describe('gatehouse doctor without a store', { timeout: 60_000 }, () => {
  it('fails, creates nothing, and still looks at the key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-doctor-'));
    try {
      const run = await gatehouse(['doctor', '--data-dir', dir, '--json']);
      expect(run.code).toBe(1);
      const r = report(run);
      expect(levels(r)).toEqual({ store: 'fail', 'secret key': 'warn' });
      expect(row(r, 'store')?.detail).toBe(`no store at ${join(dir, 'gatehouse.db')}`);
      expect(readdirSync(dir)).toEqual([]);
      const absent = join(dir, 'absent');
      expect((await gatehouse(['doctor', '--data-dir', absent])).code).toBe(1);
      expect(existsSync(absent)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails an unreachable database without printing its password', async () => {
    const run = await gatehouse(['doctor', '--database-url', 'postgres://gh:s3cret@127.0.0.1:9/none', '--json']);
    expect(run.code).toBe(1);
    expect(row(report(run), 'store')).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('cannot reach PostgreSQL'),
    });
    expect(run.stdout).not.toContain('s3cret');
  });
});

describe.skipIf(!POSTGRES_AVAILABLE)('gatehouse doctor [postgres]', { timeout: 90_000 }, () => {
  it('checks a PostgreSQL store with the key from GATEHOUSE_SECRET_KEY', async () => {
    const gw = await startTestGateway(postgresTarget);
    try {
      await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'claude' } });
      const url = gw.databaseUrl as string;
      const good = await gatehouse(['doctor', '--database-url', url, '--json'], {
        GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
      });
      const r = report(good);
      expect(levels(r)).toMatchObject({
        store: 'ok',
        migrations: 'ok',
        'secret key': 'ok',
        'secret key fingerprint': 'ok',
        tokens: 'ok',
        servers: 'warn',
        settings: 'ok',
      });
      expect(good.code).toBe(0);
      expect(r.store).not.toContain('password');

      const noKey = await gatehouse(['doctor', '--database-url', url, '--json']);
      expect(noKey.code).toBe(1);
      expect(row(report(noKey), 'secret key')).toMatchObject({
        status: 'fail',
        detail: expect.stringMatching(/required with PostgreSQL/),
      });

      const wrong = await gatehouse(['doctor', '--database-url', url, '--json'], {
        GATEHOUSE_SECRET_KEY: 'c3'.repeat(32),
      });
      expect(wrong.code).toBe(1);
      expect(row(report(wrong), 'secret key fingerprint')?.status).toBe('fail');
    } finally {
      await gw.close();
    }
  });
});
