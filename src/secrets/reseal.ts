/**
 * Sealing-key rotation, the store's half: every sealed value at rest is moved to the current key, in
 * batches, and what is left under each key is counted, so an operator retires an old key only when
 * nothing needs it any more.
 *
 * The sealed values at rest, each with the record binding (AAD) it was sealed with:
 * - `servers`: header and env values, the bearer token and the OAuth client secret (server id + URL or command);
 * - `oauth_signing_keys`: the private signing keys of Gatehouse's authorization server (kid);
 * - `upstream_oauth_grants`: upstream access and refresh tokens (server, its URL, subject, issuer);
 * - `upstream_oauth_clients`: client secrets Gatehouse was issued at upstream authorization servers;
 * - `upstream_oauth_flows`: PKCE verifiers of authorizations under way.
 * (Sealed values that live in a browser — the consent page's request, the remembered sign-in — last hours
 * and open with any key of the ring; a retired key ends them, and the person starts again.)
 *
 * Safe beside live traffic on SQLite and PostgreSQL: a row is rewritten only if it still holds what was
 * read (compare-and-set), so a value written meanwhile — already under the current key — is never
 * overwritten; one transaction per batch; one re-seal at a time across replicas (the store's advisory
 * lock). Values are opened and sealed in memory only; no value, plain or sealed, and no key is logged or
 * answered — the report names tables, row ids, fields and kids.
 */
import type { Kysely, Transaction } from 'kysely';
import { GatehouseError } from '../errors.js';
import { bindingOf, type StoredAuth, type Transport } from '../registry/records.js';
import { aad, type StoredValue } from '../registry/secret-values.js';
import type { Store } from '../store/db.js';
import { parseJson } from '../store/json.js';
import type { Database } from '../store/schema.js';
import { aadFor, ringOf, type SealKey, seal, sealedKid, unseal } from './seal.js';

export const RESEAL_BATCH = 100;
const MAX_FAILURES_LISTED = 50;
const LOCK = 'secrets:reseal';

/** Where a sealed value lives, for reports (never the value). */
export interface SealedSite {
  table: string;
  row: string;
  field: string;
}

export interface KeyInventory {
  /** The kid of the key that seals now. */
  current: string;
  /** Every key of this gateway's ring and how many stored values each sealed. */
  keys: { kid: string; current: boolean; values: number }[];
  /** Values sealed with a key this gateway does not have: they do not open (a key retired too early). */
  unknown: { kid: string; values: number }[];
  /** Values sealed before values named their key: re-sealing names it. */
  unlabelled: number;
  /** True when every stored value is under the current key: the previous keys can be retired. */
  retirable: boolean;
}

export interface ResealReport {
  /** Values moved to the current key. */
  resealed: number;
  /** Values already under the current key. */
  alreadyCurrent: number;
  /** Rows changed by someone else between read and write (their new values are sealed with a current key). */
  changedMeanwhile: number;
  /** Values that open with no key of the ring (first few listed): left as they are. */
  failed: number;
  failures: SealedSite[];
  inventory: KeyInventory;
}

type Db = Kysely<Database> | Transaction<Database>;

/** One sealed value to move: its text and the AADs it may have been sealed with (first that opens wins). */
interface Slot {
  site: SealedSite;
  sealed: string;
  aads: Buffer[];
  /** Puts the new sealed text where it came from (in the row copy about to be written). */
  put(sealed: string): void;
}

/** A table's rows in batches: each row's sealed slots and how to write the row back (compare-and-set). */
interface Table<Row> {
  name: string;
  batch(db: Db, offset: number, limit: number): Promise<Row[]>;
  slots(row: Row, urls: Map<string, string | null>): Slot[];
  /** Rewrites the row if it still holds what was read; answers whether it did. */
  write(trx: Transaction<Database>, before: Row, after: Row): Promise<boolean>;
  serverIds?(rows: Row[]): string[];
}

const updated = (result: { numUpdatedRows: bigint }) => Number(result.numUpdatedRows) === 1;

/** A server's URL as the upstream-auth code binds its grants to it (`new URL(url).href`). */
function hrefOf(url: string | null | undefined): string[] {
  if (url === null || url === undefined) return [];
  try {
    const href = new URL(url).href;
    return href === url ? [href] : [href, url];
  } catch {
    return [url];
  }
}

type ServerRow = Pick<Database['servers'], 'id' | 'transport' | 'url' | 'command' | 'headers' | 'env' | 'auth'>;

const servers: Table<ServerRow> = {
  name: 'servers',
  batch: (db, offset, limit) =>
    db
      .selectFrom('servers')
      .select(['id', 'transport', 'url', 'command', 'headers', 'env', 'auth'])
      .orderBy('id')
      .limit(limit)
      .offset(offset)
      .execute(),
  slots(row) {
    const binding = bindingOf(row.id, row.transport as Transport, row.url, row.command);
    const slots: Slot[] = [];
    const maps = { headers: parseJson<Record<string, StoredValue>>(row.headers, {}), env: parseJson(row.env, {}) };
    for (const field of ['headers', 'env'] as const) {
      const map = maps[field] as Record<string, StoredValue>;
      for (const [name, value] of Object.entries(map)) {
        if (!('sealed' in value)) continue;
        slots.push({
          site: { table: 'servers', row: row.id, field: `${field}.${name}` },
          sealed: value.sealed,
          aads: [aad(binding, field, name)],
          put: (sealed) => {
            map[name] = { sealed };
            row[field] = JSON.stringify(map);
          },
        });
      }
    }
    const auth = parseJson<StoredAuth>(row.auth, { type: 'none' });
    const authValue =
      auth.type === 'bearer'
        ? { name: 'token', value: auth.token, set: (v: StoredValue) => Object.assign(auth, { token: v }) }
        : auth.type === 'oauth' && auth.clientSecret !== undefined
          ? { name: 'clientSecret', value: auth.clientSecret, set: (v: StoredValue) => (auth.clientSecret = v) }
          : undefined;
    if (authValue && 'sealed' in authValue.value) {
      slots.push({
        site: { table: 'servers', row: row.id, field: `auth.${authValue.name}` },
        sealed: authValue.value.sealed,
        aads: [aad(binding, 'auth', authValue.name)],
        put: (sealed) => {
          authValue.set({ sealed });
          row.auth = JSON.stringify(auth);
        },
      });
    }
    return slots;
  },
  async write(trx, before, after) {
    return updated(
      await trx
        .updateTable('servers')
        .set({ headers: after.headers, env: after.env, auth: after.auth })
        .where('id', '=', before.id)
        .where('headers', '=', before.headers)
        .where('env', '=', before.env)
        .where('auth', '=', before.auth)
        .executeTakeFirst(),
    );
  },
};

type SigningRow = Pick<Database['oauth_signing_keys'], 'kid' | 'private_sealed'>;

const signingKeys: Table<SigningRow> = {
  name: 'oauth_signing_keys',
  batch: (db, offset, limit) =>
    db
      .selectFrom('oauth_signing_keys')
      .select(['kid', 'private_sealed'])
      .orderBy('kid')
      .limit(limit)
      .offset(offset)
      .execute(),
  slots: (row) => [
    {
      site: { table: 'oauth_signing_keys', row: row.kid, field: 'private_sealed' },
      sealed: row.private_sealed,
      aads: [aadFor(['oauth-signing-key', row.kid])],
      put: (sealed) => {
        row.private_sealed = sealed;
      },
    },
  ],
  async write(trx, before, after) {
    return updated(
      await trx
        .updateTable('oauth_signing_keys')
        .set({ private_sealed: after.private_sealed })
        .where('kid', '=', before.kid)
        .where('private_sealed', '=', before.private_sealed)
        .executeTakeFirst(),
    );
  },
};

type GrantRow = Pick<
  Database['upstream_oauth_grants'],
  'server_id' | 'subject' | 'issuer' | 'access_token' | 'refresh_token'
>;

const grants: Table<GrantRow> = {
  name: 'upstream_oauth_grants',
  batch: (db, offset, limit) =>
    db
      .selectFrom('upstream_oauth_grants')
      .select(['server_id', 'subject', 'issuer', 'access_token', 'refresh_token'])
      .orderBy('server_id')
      .orderBy('subject')
      .orderBy('issuer')
      .limit(limit)
      .offset(offset)
      .execute(),
  serverIds: (rows) => rows.map((r) => r.server_id),
  slots(row, urls) {
    const id = `${row.server_id}/${row.subject}`;
    const bound = (field: string) =>
      hrefOf(urls.get(row.server_id)).map((url) =>
        aadFor(['upstream-oauth', row.server_id, url, row.subject, row.issuer, field]),
      );
    const slots: Slot[] = [
      {
        site: { table: 'upstream_oauth_grants', row: id, field: 'access_token' },
        sealed: row.access_token,
        aads: bound('access_token'),
        put: (sealed) => {
          row.access_token = sealed;
        },
      },
    ];
    if (row.refresh_token !== null) {
      slots.push({
        site: { table: 'upstream_oauth_grants', row: id, field: 'refresh_token' },
        sealed: row.refresh_token,
        aads: bound('refresh_token'),
        put: (sealed) => {
          row.refresh_token = sealed;
        },
      });
    }
    return slots;
  },
  async write(trx, before, after) {
    let query = trx
      .updateTable('upstream_oauth_grants')
      .set({ access_token: after.access_token, refresh_token: after.refresh_token })
      .where('server_id', '=', before.server_id)
      .where('subject', '=', before.subject)
      .where('issuer', '=', before.issuer)
      .where('access_token', '=', before.access_token);
    query =
      before.refresh_token === null
        ? query.where('refresh_token', 'is', null)
        : query.where('refresh_token', '=', before.refresh_token);
    return updated(await query.executeTakeFirst());
  },
};

type ClientRow = Pick<Database['upstream_oauth_clients'], 'server_id' | 'issuer' | 'client_secret'>;

const clients: Table<ClientRow> = {
  name: 'upstream_oauth_clients',
  batch: (db, offset, limit) =>
    db
      .selectFrom('upstream_oauth_clients')
      .select(['server_id', 'issuer', 'client_secret'])
      .where('client_secret', 'is not', null)
      .orderBy('server_id')
      .orderBy('issuer')
      .limit(limit)
      .offset(offset)
      .execute(),
  serverIds: (rows) => rows.map((r) => r.server_id),
  slots: (row, urls) =>
    row.client_secret === null
      ? []
      : [
          {
            site: { table: 'upstream_oauth_clients', row: `${row.server_id} ${row.issuer}`, field: 'client_secret' },
            sealed: row.client_secret,
            aads: hrefOf(urls.get(row.server_id)).map((url) =>
              aadFor(['upstream-oauth-client', row.server_id, url, row.issuer]),
            ),
            put: (sealed) => {
              row.client_secret = sealed;
            },
          },
        ],
  async write(trx, before, after) {
    return updated(
      await trx
        .updateTable('upstream_oauth_clients')
        .set({ client_secret: after.client_secret })
        .where('server_id', '=', before.server_id)
        .where('issuer', '=', before.issuer)
        .where('client_secret', '=', before.client_secret as string)
        .executeTakeFirst(),
    );
  },
};

type FlowRow = Pick<Database['upstream_oauth_flows'], 'state_hash' | 'server_id' | 'code_verifier'>;

const flows: Table<FlowRow> = {
  name: 'upstream_oauth_flows',
  batch: (db, offset, limit) =>
    db
      .selectFrom('upstream_oauth_flows')
      .select(['state_hash', 'server_id', 'code_verifier'])
      .orderBy('state_hash')
      .limit(limit)
      .offset(offset)
      .execute(),
  serverIds: (rows) => rows.map((r) => r.server_id),
  slots: (row, urls) => [
    {
      site: { table: 'upstream_oauth_flows', row: row.state_hash.slice(0, 12), field: 'code_verifier' },
      sealed: row.code_verifier,
      aads: hrefOf(urls.get(row.server_id)).map((url) => aadFor(['upstream-oauth-flow', row.state_hash, url])),
      put: (sealed) => {
        row.code_verifier = sealed;
      },
    },
  ],
  async write(trx, before, after) {
    return updated(
      await trx
        .updateTable('upstream_oauth_flows')
        .set({ code_verifier: after.code_verifier })
        .where('state_hash', '=', before.state_hash)
        .where('code_verifier', '=', before.code_verifier)
        .executeTakeFirst(),
    );
  },
};

type ApprovalRow = Pick<Database['approvals'], 'id' | 'sealed_arguments'>;

/** An admin call's literal arguments, sealed while it waits for approval (the card shows them masked). */
const approvals: Table<ApprovalRow> = {
  name: 'approvals',
  batch: (db, offset, limit) =>
    db
      .selectFrom('approvals')
      .select(['id', 'sealed_arguments'])
      .where('sealed_arguments', 'is not', null)
      .orderBy('id')
      .limit(limit)
      .offset(offset)
      .execute(),
  slots: (row) =>
    row.sealed_arguments === null || row.sealed_arguments === undefined
      ? []
      : [
          {
            site: { table: 'approvals', row: row.id, field: 'sealed_arguments' },
            sealed: row.sealed_arguments,
            aads: [aadFor(['approval-arguments', row.id])],
            put: (sealed) => {
              row.sealed_arguments = sealed;
            },
          },
        ],
  async write(trx, before, after) {
    return updated(
      await trx
        .updateTable('approvals')
        .set({ sealed_arguments: after.sealed_arguments ?? null })
        .where('id', '=', before.id)
        .where('sealed_arguments', '=', before.sealed_arguments ?? '')
        .executeTakeFirst(),
    );
  },
};

// biome-ignore lint/suspicious/noExplicitAny: each table is typed by its own row; the list is heterogeneous
const TABLES: Table<any>[] = [servers, signingKeys, grants, clients, flows, approvals];

async function urlsOf(db: Db, ids: string[]): Promise<Map<string, string | null>> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return new Map();
  const rows = await db.selectFrom('servers').select(['id', 'url']).where('id', 'in', unique).execute();
  return new Map(rows.map((r) => [r.id, r.url]));
}

/** Walks every sealed value at rest, batch by batch. */
async function* everySlot<Row>(
  db: Kysely<Database>,
  table: Table<Row>,
  batchSize: number,
): AsyncGenerator<{ rows: { row: Row; before: Row; slots: Slot[] }[] }> {
  for (let offset = 0; ; offset += batchSize) {
    const batch = await table.batch(db, offset, batchSize);
    if (batch.length === 0) return;
    const urls = table.serverIds ? await urlsOf(db, table.serverIds(batch)) : new Map<string, string | null>();
    yield {
      rows: batch.map((before) => {
        const row = { ...before };
        return { row, before, slots: table.slots(row, urls) };
      }),
    };
    if (batch.length < batchSize) return;
  }
}

/** How many stored values each key sealed (by kid; read from the values, nothing is opened). */
export async function inventory(store: Store, key: SealKey): Promise<KeyInventory> {
  const counts = new Map<string, number>();
  let unlabelled = 0;
  for (const table of TABLES) {
    for await (const { rows } of everySlot(store.db, table, 500)) {
      for (const { slots } of rows) {
        for (const slot of slots) {
          const kid = sealedKid(slot.sealed);
          if (kid === undefined) unlabelled++;
          else counts.set(kid, (counts.get(kid) ?? 0) + 1);
        }
      }
    }
  }
  const ring = ringOf(key);
  const keys = ring.map((k) => ({ kid: k.kid, current: k.kid === key.kid, values: counts.get(k.kid) ?? 0 }));
  const unknown = [...counts]
    .filter(([kid]) => !ring.some((k) => k.kid === kid))
    .map(([kid, values]) => ({ kid, values }));
  const retirable = unlabelled === 0 && unknown.length === 0 && keys.every((k) => k.current || k.values === 0);
  return { current: key.kid, keys, unknown, unlabelled, retirable };
}

/**
 * Re-seals every sealed value at rest with the current key (batches of `batchSize` rows, one transaction
 * each). Idempotent: values already under the current key are left alone, so it can be run again after
 * a failure or to catch values a replica still on the old key wrote meanwhile. One run at a time across
 * replicas: a second one answers `conflict`.
 */
export async function resealAll(store: Store, key: SealKey, batchSize = RESEAL_BATCH): Promise<ResealReport> {
  const outcome = await store.locks.withLock(LOCK, async (signal) => {
    const report = { resealed: 0, alreadyCurrent: 0, changedMeanwhile: 0, failed: 0, failures: [] as SealedSite[] };
    for (const table of TABLES) {
      for await (const { rows } of everySlot(store.db, table, batchSize)) {
        if (signal.aborted) throw new GatehouseError('conflict', 'The re-seal lost its lock; run it again.');
        const changed: { row: unknown; before: unknown; moved: number }[] = [];
        for (const entry of rows) {
          let moved = 0;
          for (const slot of entry.slots) {
            if (sealedKid(slot.sealed) === key.kid) {
              report.alreadyCurrent++;
              continue;
            }
            const plain = openAny(key, slot);
            if (plain === undefined) {
              report.failed++;
              if (report.failures.length < MAX_FAILURES_LISTED) report.failures.push(slot.site);
              continue;
            }
            slot.put(seal(key, plain.text, plain.aad));
            moved++;
          }
          if (moved > 0) changed.push({ row: entry.row, before: entry.before, moved });
          report.resealed += moved;
        }
        if (changed.length === 0) continue;
        await store.db.transaction().execute(async (trx) => {
          for (const { row, before, moved } of changed) {
            if (!(await table.write(trx, before, row))) {
              report.changedMeanwhile++;
              report.resealed -= moved;
            }
          }
        });
      }
    }
    return report;
  });
  if (!outcome.ran) throw new GatehouseError('conflict', 'A re-seal is already running (on this or another replica).');
  return { ...outcome.value, inventory: await inventory(store, key) };
}

function openAny(key: SealKey, slot: Slot): { text: string; aad: Buffer } | undefined {
  for (const candidate of slot.aads) {
    try {
      return { text: unseal(key, slot.sealed, candidate), aad: candidate };
    } catch {
      // another binding, or a key this ring does not have: counted as a failure when none opens
    }
  }
  return undefined;
}
