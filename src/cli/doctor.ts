/**
 * `gatehouse doctor`: one row per check — `ok`, `warn` or `fail`, each with a hint — and a non-zero exit when any
 * check fails.
 *
 * It is a bootstrap command that opens the store directly, and it only reads: the SQLite file is opened read-only and
 * never created, migrations are compared, not applied, and the key file is never created or re-moded (`serve` does
 * both at start). Checks: the store is reachable; it is migrated to this version's schema; the secret key is present
 * (GATEHOUSE_SECRET_KEY, or `secret.key` in the data folder), private, and the key this store's secrets were sealed
 * with (its fingerprint); live tokens exist; each enabled server's last handshake status; the stored settings are
 * valid.
 *
 * A key file other users may read or write is a `fail`, not a `warn`: `serve` tightens it to 0600 at its next start,
 * but until then (and for as long as it was so) anyone on the machine could open every sealed upstream secret.
 */

import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import type { Command } from 'commander';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import type { Config } from '../config.js';
import { configuredSealKey, keyFilePath } from '../secrets/key.js';
import { isSettingName, SETTING_KEYS } from '../settings/keys.js';
import { redactUrl } from '../store/db.js';
import { LATEST_MIGRATION } from '../store/migrations.js';
import type { Database } from '../store/schema.js';
import { issuerCheck, signingKeysCheck } from './doctor-oauth.js';
import { oidcCheck } from './doctor-oidc.js';
import { sandboxCheck } from './doctor-sandbox.js';

export type Level = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: Level;
  detail: string;
  /** What to do about it (also given for `ok` rows when there is something worth knowing). */
  hint?: string;
}

const FINGERPRINT_KEY = 'secret_key_fingerprint';
const SQLITE_FILE = 'gatehouse.db';

interface ReadOnlyStore {
  kind: 'sqlite' | 'postgres';
  db: Kysely<Database>;
  location: string;
  close(): Promise<void>;
}

function reason(error: unknown): string {
  const e = error as { code?: string; message?: string };
  return e.message ?? e.code ?? String(error);
}

async function openReadOnly(config: Config): Promise<ReadOnlyStore | Check> {
  if (config.databaseUrl) {
    const location = redactUrl(config.databaseUrl);
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 1, connectionTimeoutMillis: 5_000 });
    pool.on('error', () => {});
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    try {
      await sql`select 1`.execute(db);
    } catch (error) {
      await db.destroy();
      return {
        name: 'store',
        status: 'fail',
        detail: `cannot reach PostgreSQL at ${location} (${reason(error)})`,
        hint: 'Check GATEHOUSE_DATABASE_URL (or --database-url) and that the database is up and accepts this user.',
      };
    }
    return { kind: 'postgres', db, location, close: () => db.destroy() };
  }
  const file = join(config.dataDir, SQLITE_FILE);
  if (!existsSync(file)) {
    return {
      name: 'store',
      status: 'fail',
      detail: `no store at ${file}`,
      hint: 'Point --data-dir (or GATEHOUSE_DATA_DIR) at the data folder; `gatehouse serve` creates the store at first start.',
    };
  }
  let raw: SqliteDatabase.Database;
  try {
    raw = new SqliteDatabase(file, { readonly: true, fileMustExist: true, timeout: 5_000 });
    raw.pragma('schema_version'); // reads the header: fails on a file that is not SQLite
  } catch (error) {
    return {
      name: 'store',
      status: 'fail',
      detail: `cannot open ${file} (${reason(error)})`,
      hint: 'Is it a Gatehouse data folder? Run doctor as the user that runs `gatehouse serve`.',
    };
  }
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: raw }) });
  return { kind: 'sqlite', db, location: file, close: () => db.destroy() };
}

function decodeKey(text: string): Buffer {
  const trimmed = text.trim();
  return /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
}

const octal = (mode: number) => `0${(mode & 0o777).toString(8).padStart(3, '0')}`;

/** The secret key's rows; answers the key's fingerprint when a key was found. */
function keyChecks(config: Config, kind: 'sqlite' | 'postgres', checks: Check[]): string[] | undefined {
  const ring = () => {
    const key = configuredSealKey(config);
    return key ? [key, ...key.previous].map((k) => k.fingerprint) : undefined;
  };
  if (config.secretKey) {
    checks.push({ name: 'secret key', status: 'ok', detail: 'from GATEHOUSE_SECRET_KEY (32 bytes)' });
    return ring();
  }
  if (kind === 'postgres') {
    checks.push({
      name: 'secret key',
      status: 'fail',
      detail: 'GATEHOUSE_SECRET_KEY is not set; it is required with PostgreSQL',
      hint: 'Set GATEHOUSE_SECRET_KEY to the key every replica of this gateway uses.',
    });
    return undefined;
  }
  const file = keyFilePath(config.dataDir);
  let text: string;
  let info: ReturnType<typeof statSync>;
  try {
    info = statSync(file);
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    checks.push({
      name: 'secret key',
      status: missing ? 'warn' : 'fail',
      detail: missing ? `no key file at ${file}` : `cannot read ${file} (${reason(error)})`,
      hint: missing
        ? '`gatehouse serve` creates it at first start; if this store already holds sealed secrets, restore the key from a backup.'
        : 'Run doctor as the user that runs `gatehouse serve`.',
    });
    return undefined;
  }
  const key = decodeKey(text.trim().split('\n')[0] ?? '');
  if (key.length !== 32) {
    checks.push({
      name: 'secret key',
      status: 'fail',
      detail: `${file} does not hold 32 bytes as hex or base64`,
      hint: 'Restore the original key file; a new key cannot open the secrets sealed with the old one.',
    });
    return undefined;
  }
  checks.push({ name: 'secret key', status: 'ok', detail: `${file} (32 bytes)` });

  const mode = Number(info.mode) & 0o777;
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  if (mode & 0o077) {
    checks.push({
      name: 'secret key permissions',
      status: 'fail',
      detail: `${file} is mode ${octal(mode)}: users other than its owner can ${mode & 0o022 ? 'change' : 'read'} it`,
      hint:
        `chmod 600 ${file} (\`gatehouse serve\` also tightens it at start). If untrusted users could read it, ` +
        'treat the sealed upstream secrets as exposed and rotate them.',
    });
  } else if (uid !== undefined && Number(info.uid) !== uid) {
    checks.push({
      name: 'secret key permissions',
      status: 'warn',
      detail: `${file} is owned by uid ${info.uid}, not by you (uid ${uid})`,
      hint: 'Run doctor as the user that runs `gatehouse serve`, or chown the data folder to it.',
    });
  } else {
    checks.push({ name: 'secret key permissions', status: 'ok', detail: `mode ${octal(mode)}, owned by you` });
  }
  return ring();
}

function dataDirCheck(config: Config): Check | undefined {
  let mode: number;
  try {
    mode = Number(statSync(config.dataDir).mode) & 0o777;
  } catch {
    return undefined;
  }
  if ((mode & 0o077) === 0) return undefined;
  return {
    name: 'data folder permissions',
    status: 'warn',
    detail: `${config.dataDir} is mode ${octal(mode)}: other users can list${mode & 0o044 ? ' and read' : ''} the store`,
    hint: `chmod 700 ${config.dataDir}`,
  };
}

async function migrationCheck(store: ReadOnlyStore): Promise<{ check: Check; behind: boolean }> {
  let version: number;
  try {
    const row = await store.db
      .selectFrom('gatehouse_migrations')
      .select((eb) => eb.fn.max('version').as('version'))
      .executeTakeFirst();
    version = Number(row?.version ?? 0);
  } catch {
    return {
      check: {
        name: 'migrations',
        status: 'fail',
        detail: `${store.location} has no Gatehouse schema`,
        hint: 'Point --data-dir/--database-url at a Gatehouse store; `gatehouse serve` creates the schema at first start.',
      },
      behind: true,
    };
  }
  if (version === LATEST_MIGRATION) {
    return {
      check: { name: 'migrations', status: 'ok', detail: `schema version ${version} (current)` },
      behind: false,
    };
  }
  if (version > LATEST_MIGRATION) {
    return {
      check: {
        name: 'migrations',
        status: 'fail',
        detail: `schema version ${version} is newer than this gatehouse knows (${LATEST_MIGRATION})`,
        hint: 'A newer Gatehouse migrated this store: upgrade this one before running it against the store.',
      },
      behind: false,
    };
  }
  return {
    check: {
      name: 'migrations',
      status: 'warn',
      detail: `schema version ${version}; this gatehouse expects ${LATEST_MIGRATION}`,
      hint: '`gatehouse serve` applies the missing migrations at its next start (back the store up first).',
    },
    behind: true,
  };
}

async function fingerprintCheck(store: ReadOnlyStore, fingerprints: string[] | undefined): Promise<Check> {
  const fingerprint = fingerprints?.[0];
  const row = await store.db
    .selectFrom('gatehouse_meta')
    .select('value')
    .where('key', '=', FINGERPRINT_KEY)
    .executeTakeFirst();
  if (!row) {
    return {
      name: 'secret key fingerprint',
      status: 'warn',
      detail: 'no fingerprint stored yet',
      hint: '`gatehouse serve` records the key’s fingerprint at its first start.',
    };
  }
  const stored = `${row.value.slice(0, 12)}…`;
  if (!fingerprint) {
    return {
      name: 'secret key fingerprint',
      status: 'fail',
      detail: `this store's secrets were sealed with key ${stored}, and no key was found to open them`,
      hint: 'Restore that key (secret.key or GATEHOUSE_SECRET_KEY); without it sealed headers and env values are lost.',
    };
  }
  if (row.value !== fingerprint && fingerprints?.includes(row.value)) {
    return {
      name: 'secret key fingerprint',
      status: 'ok',
      detail: `the store names a previous key of this ring (${stored}); \`serve\` records the current one at start`,
      hint: 'After every replica runs with the new key: `gatehouse secrets rotate`, then retire the old key.',
    };
  }
  if (row.value !== fingerprint) {
    return {
      name: 'secret key fingerprint',
      status: 'fail',
      detail: `the key (${fingerprint.slice(0, 12)}…) is not the one this store was sealed with (${stored})`,
      hint: 'Use the original key; every replica must start with the same GATEHOUSE_SECRET_KEY. `serve` refuses to start.',
    };
  }
  return { name: 'secret key fingerprint', status: 'ok', detail: `matches the store (${stored})` };
}

async function tokenCheck(store: ReadOnlyStore, config: Config): Promise<Check> {
  const rows = await store.db
    .selectFrom('tokens')
    .select(['role', (eb) => eb.fn.countAll<number>().as('count')])
    .where('revoked_at', 'is', null)
    .groupBy('role')
    .execute();
  const counts = Object.fromEntries(rows.map((r) => [r.role, Number(r.count)])) as Record<string, number>;
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const detail = rows.length === 0 ? 'no live tokens' : rows.map((r) => `${r.count} ${r.role}`).join(', ');
  if (total === 0) {
    const bootstrapped = await store.db
      .selectFrom('gatehouse_meta')
      .select('value')
      .where('key', '=', 'bootstrap_admin')
      .executeTakeFirst();
    return bootstrapped
      ? {
          name: 'tokens',
          status: 'fail',
          detail: 'every token is revoked: nobody can manage or use this gateway',
          hint: 'gatehouse token create --role admin --name <you>',
        }
      : {
          name: 'tokens',
          status: 'warn',
          detail,
          hint: '`gatehouse serve` creates an admin token at first start (or: gatehouse token create --role admin --name <you>).',
        };
  }
  if (!counts.admin && !counts.operator) {
    return {
      name: 'tokens',
      status: 'warn',
      detail: `${detail}; no admin or operator can manage the gateway or decide approvals`,
      hint: 'gatehouse token create --role admin --name <you>',
    };
  }
  if (!counts.agent && config.hubAuth === 'token') {
    return {
      name: 'tokens',
      status: 'warn',
      detail: `${detail}; no agent can use the hub`,
      hint: 'gatehouse connect --client <client> --token-name <name> (or gatehouse token create --role agent --name <name>)',
    };
  }
  return { name: 'tokens', status: 'ok', detail };
}

async function serverChecks(store: ReadOnlyStore): Promise<Check[]> {
  const rows = await store.db
    .selectFrom('servers')
    .select(['id', 'status', 'last_error', 'last_tested_at', 'latency_ms', 'discovered_tools'])
    .where('enabled', '=', 1)
    .orderBy('id')
    .execute();
  if (rows.length === 0) {
    return [
      {
        name: 'servers',
        status: 'warn',
        detail: 'no enabled MCP servers: agents see no tools',
        hint: 'gatehouse servers add … (or install one from the dashboard)',
      },
    ];
  }
  return rows.map((row) => {
    const name = `server ${row.id}`;
    if (row.status === 'connected') {
      let tools = 0;
      try {
        tools = (JSON.parse(row.discovered_tools) as unknown[]).length;
      } catch {
        // counted as 0
      }
      const latency = row.latency_ms === null ? '' : `, ${row.latency_ms} ms`;
      return {
        name,
        status: 'ok' as const,
        detail: `connected: ${tools} tool${tools === 1 ? '' : 's'}${latency}, tested ${row.last_tested_at ?? 'never'}`,
      };
    }
    if (row.status === 'failed') {
      return {
        name,
        status: 'fail' as const,
        detail: `failed at its last handshake (${row.last_tested_at ?? 'unknown time'}): ${row.last_error ?? 'no error recorded'}`,
        hint:
          `Fix the server or its config, then: gatehouse servers test ${row.id}. Or disable it ` +
          `(PATCH /api/mcp/servers/${row.id}/config {"enabled": false}).`,
      };
    }
    return {
      name,
      status: 'warn' as const,
      detail: 'not tested since it was installed or changed',
      hint: `gatehouse servers test ${row.id}`,
    };
  });
}

async function settingsCheck(store: ReadOnlyStore): Promise<Check> {
  const rows = await store.db.selectFrom('settings').select(['key', 'value']).orderBy('key').execute();
  const invalid: string[] = [];
  const unknown: string[] = [];
  const values: Record<string, unknown> = {};
  for (const row of rows) {
    if (!isSettingName(row.key)) {
      unknown.push(row.key);
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(row.value);
    } catch {
      invalid.push(`${row.key} (not JSON)`);
      continue;
    }
    const parsed = SETTING_KEYS[row.key].schema.safeParse(value);
    if (parsed.success) values[row.key] = parsed.data;
    else invalid.push(`${row.key} = ${row.value} (${parsed.error.issues.map((i) => i.message).join('; ')})`);
  }
  const on = (key: keyof typeof SETTING_KEYS) => (values[key] ?? SETTING_KEYS[key].default) === true;
  const summary = `${rows.length} set; hub ${on('mcp.hubEnabled') ? 'on' : 'off'}, admin surface ${on('mcp.adminEnabled') ? 'on' : 'off'}`;
  if (invalid.length > 0) {
    return {
      name: 'settings',
      status: 'fail',
      detail: `not in force (the default applies instead): ${invalid.join(', ')}`,
      hint: 'Set a valid value: PATCH /api/settings with an admin token (or the dashboard).',
    };
  }
  if (unknown.length > 0) {
    return {
      name: 'settings',
      status: 'warn',
      detail: `${summary}; ignored unknown key${unknown.length === 1 ? '' : 's'}: ${unknown.join(', ')}`,
      hint: 'Written by a newer Gatehouse, or a typo: this version ignores them.',
    };
  }
  return { name: 'settings', status: 'ok', detail: summary };
}

/** Runs every check; never throws for what it finds (an unexpected failure of one check is that check's `fail`). */
export async function runDoctor(config: Config): Promise<{ location: string; checks: Check[] }> {
  const checks: Check[] = [];
  const opened = await openReadOnly(config);
  const kind = config.databaseUrl ? 'postgres' : 'sqlite';
  const location = config.databaseUrl ? redactUrl(config.databaseUrl) : join(config.dataDir, SQLITE_FILE);
  if ('name' in opened) {
    checks.push(opened);
    keyChecks(config, kind, checks);
    return { location, checks };
  }
  const store = opened;
  try {
    checks.push({
      name: 'store',
      status: 'ok',
      detail: `${store.kind === 'sqlite' ? 'SQLite' : 'PostgreSQL'} at ${store.location}`,
    });
    checks.push(sandboxCheck(config));
    const migrations = await migrationCheck(store);
    checks.push(migrations.check);
    if (kind === 'sqlite') {
      const dir = dataDirCheck(config);
      if (dir) checks.push(dir);
    }
    const fingerprints = keyChecks(config, kind, checks);
    if (migrations.behind) {
      checks.push({
        name: 'store contents',
        status: 'warn',
        detail: 'not checked: the store is not at this version’s schema',
        hint: 'Run doctor again after `gatehouse serve` has migrated it.',
      });
      return { location, checks };
    }
    const guarded = async (name: string, run: () => Promise<Check | Check[]>) => {
      try {
        const result = await run();
        checks.push(...(Array.isArray(result) ? result : [result]));
      } catch (error) {
        checks.push({ name, status: 'fail', detail: `could not check: ${reason(error)}` });
      }
    };
    await guarded('secret key fingerprint', () => fingerprintCheck(store, fingerprints));
    await guarded('tokens', () => tokenCheck(store, config));
    await guarded('servers', () => serverChecks(store));
    await guarded('settings', () => settingsCheck(store));
    checks.push(issuerCheck(config));
    await guarded('oauth signing keys', () => signingKeysCheck(store.db, config));
    await guarded('oidc issuer', async () => (await oidcCheck(config)) ?? []);
  } finally {
    await store.close().catch(() => {});
  }
  return { location, checks };
}

/** The rows as a table; a hint goes on the line under its row. */
export function formatChecks(checks: readonly Check[]): string {
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines: string[] = [];
  for (const check of checks) {
    lines.push(`${check.status.padEnd(4)}  ${check.name.padEnd(width)}  ${check.detail}`);
    if (check.hint && check.status !== 'ok') lines.push(`${' '.repeat(6 + width)}  hint: ${check.hint}`);
  }
  const count = (level: Level) => checks.filter((c) => c.status === level).length;
  lines.push('', `${count('fail')} fail, ${count('warn')} warn, ${count('ok')} ok`);
  return lines.join('\n');
}

export function addDoctorCommand(program: Command, configOf: (flags: Record<string, unknown>) => Config): void {
  program
    .command('doctor')
    .description(
      'Check a Gatehouse installation (opens the store read-only): store, migrations, secret key, tokens, servers, ' +
        'settings. Exits 1 when a check fails.',
    )
    .option('--data-dir <dir>', 'data folder of the SQLite store (env GATEHOUSE_DATA_DIR)')
    .option('--database-url <url>', 'PostgreSQL URL (env GATEHOUSE_DATABASE_URL)')
    .option('--json', 'print {ok, checks: [{name, status, detail, hint}]}')
    .action(async (flags: { dataDir?: string; databaseUrl?: string; json?: boolean }) => {
      const config = configOf({ dataDir: flags.dataDir, databaseUrl: flags.databaseUrl });
      const { location, checks } = await runDoctor(config);
      const ok = !checks.some((c) => c.status === 'fail');
      if (flags.json) process.stdout.write(`${JSON.stringify({ ok, store: location, checks }, null, 2)}\n`);
      else process.stdout.write(`${formatChecks(checks)}\n`);
      if (!ok) process.exitCode = 1;
    });
}
