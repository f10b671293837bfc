/**
 * Where the sealing key comes from: `GATEHOUSE_SECRET_KEY`, or a 0600 key file
 * in the data folder created on first start (SQLite only). The key's
 * fingerprint is stored in the database, so a process with another key refuses
 * to start instead of writing values nobody can open.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GatehouseError } from '../errors.js';
import type { Store } from '../store/db.js';
import { type SealKey, sealKeyFrom } from './seal.js';

const FINGERPRINT_KEY = 'secret_key_fingerprint';
export const KEY_FILE_NAME = 'secret.key';

function decodeKey(text: string): Buffer {
  const trimmed = text.trim();
  return /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
}

/** Reads (or, for SQLite on first start, creates) the key and checks it against the stored fingerprint. */
export async function loadSealKey(
  store: Store,
  options: { secretKey?: string | undefined; dataDir: string },
): Promise<SealKey> {
  let key: SealKey;
  if (options.secretKey) key = sealKeyFrom(decodeKey(options.secretKey));
  else if (store.kind === 'postgres') {
    throw new GatehouseError(
      'validation_error',
      'GATEHOUSE_SECRET_KEY is required with PostgreSQL, so every replica seals and opens with the same key.',
    );
  } else key = sealKeyFrom(readOrCreateKeyFile(options.dataDir));

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
  if (stored.value !== key.fingerprint) {
    throw new GatehouseError(
      'validation_error',
      'The secret key does not match the one this database was sealed with (fingerprint mismatch). ' +
        'Start every replica with the same GATEHOUSE_SECRET_KEY.',
    );
  }
  return key;
}

export function keyFilePath(dataDir: string): string {
  return join(dataDir, KEY_FILE_NAME);
}

function readOrCreateKeyFile(dataDir: string): Buffer {
  const file = keyFilePath(dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const mode = statSync(file).mode & 0o777;
  if (mode & 0o077) chmodSync(file, 0o600);
  return decodeKey(readFileSync(file, 'utf8'));
}
