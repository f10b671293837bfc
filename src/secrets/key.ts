/**
 * Where the sealing key comes from: `GATEHOUSE_SECRET_KEY`, or a 0600 key file
 * in the data folder created on first start (SQLite only). The key's
 * fingerprint is stored in the database, so a process with another key refuses
 * to start instead of writing values nobody can open.
 *
 * Rotation: the new key becomes `GATEHOUSE_SECRET_KEY` (or the key file's first
 * line) and the old one moves to `GATEHOUSE_SECRET_KEY_PREVIOUS` (or a later
 * line of the key file), where it only opens what it sealed. A process whose
 * ring holds the stored key records its current key as the store's; one whose
 * ring does not refuses to start. `reseal.ts` then moves every sealed value to
 * the current key, after which the old key can be retired.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GatehouseError } from '../errors.js';
import type { Store } from '../store/db.js';
import { ringOf, type SealKey, sealKeyFrom } from './seal.js';

const FINGERPRINT_KEY = 'secret_key_fingerprint';
export const KEY_FILE_NAME = 'secret.key';

export function decodeKey(text: string): Buffer {
  const trimmed = text.trim();
  return /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
}

/** The keys of a comma- or newline-separated list (the previous-keys setting, the key file's lines). */
export function decodeKeys(text: string | undefined): Buffer[] {
  return (text ?? '')
    .split(/[\n,]/)
    .map((k) => k.trim())
    .filter(Boolean)
    .map(decodeKey);
}

/** Reads (or, for SQLite on first start, creates) the key ring and checks it against the stored fingerprint. */
export async function loadSealKey(
  store: Store,
  options: { secretKey?: string | undefined; secretKeyPrevious?: string | undefined; dataDir: string },
): Promise<SealKey> {
  let key: SealKey;
  if (options.secretKey) key = sealKeyFrom(decodeKey(options.secretKey), decodeKeys(options.secretKeyPrevious));
  else if (store.kind === 'postgres') {
    throw new GatehouseError(
      'validation_error',
      'GATEHOUSE_SECRET_KEY is required with PostgreSQL, so every replica seals and opens with the same key.',
    );
  } else {
    const [current, ...older] = readOrCreateKeyFile(options.dataDir);
    key = sealKeyFrom(current as Buffer, [...older, ...decodeKeys(options.secretKeyPrevious)]);
  }

  // First writer wins; everyone compares against what is stored.
  await store.db
    .insertInto('gatehouse_meta')
    .values({ key: FINGERPRINT_KEY, value: key.fingerprint })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const stored = await store.db
    .selectFrom('gatehouse_meta')
    .select('value')
    .where('key', '=', FINGERPRINT_KEY)
    .executeTakeFirstOrThrow();
  if (stored.value === key.fingerprint) return key;
  if (!ringOf(key).some((k) => k.fingerprint === stored.value)) {
    throw new GatehouseError(
      'validation_error',
      'The secret key does not match the one this database was sealed with (fingerprint mismatch). ' +
        'Start every replica with the same GATEHOUSE_SECRET_KEY; after a rotation, give the old key in ' +
        'GATEHOUSE_SECRET_KEY_PREVIOUS until `gatehouse secrets rotate` has re-sealed everything.',
    );
  }
  // A rotation: the stored key is one of our previous ones, so ours is now the store's current key
  // (compare-and-set: a replica that recorded another key meanwhile is not overwritten blindly).
  await store.db
    .updateTable('gatehouse_meta')
    .set({ value: key.fingerprint })
    .where('key', '=', FINGERPRINT_KEY)
    .where('value', '=', stored.value)
    .execute();
  return key;
}

export function keyFilePath(dataDir: string): string {
  return join(dataDir, KEY_FILE_NAME);
}

/** The key file's keys: the first line is the current key, later lines previous keys (a rotation). */
function readOrCreateKeyFile(dataDir: string): Buffer[] {
  const file = keyFilePath(dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const mode = statSync(file).mode & 0o777;
  if (mode & 0o077) chmodSync(file, 0o600);
  const keys = readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map(decodeKey);
  if (keys.length === 0) throw new GatehouseError('validation_error', `The key file ${file} holds no key.`);
  return keys;
}

/**
 * The key ring a process with these settings would use, read without creating anything (for `doctor`);
 * `undefined` when there is no key (no setting, no key file) or it cannot be read.
 */
export function configuredSealKey(options: {
  secretKey?: string | undefined;
  secretKeyPrevious?: string | undefined;
  dataDir: string;
}): SealKey | undefined {
  try {
    const keys = options.secretKey
      ? [decodeKey(options.secretKey)]
      : readFileSync(keyFilePath(options.dataDir), 'utf8')
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean)
          .map(decodeKey);
    const [current, ...older] = keys;
    if (!current) return undefined;
    return sealKeyFrom(current, [...older, ...decodeKeys(options.secretKeyPrevious)]);
  } catch {
    return undefined;
  }
}
