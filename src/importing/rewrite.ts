/**
 * After an import: the client's config rewritten to reach its servers through the hub — the imported entries
 * (registered now, or already installed) removed, the hub's entry merged in by `gatehouse connect`'s writer
 * (`mergeEntry`), every other entry, comment and the layout kept.
 *
 * `rewriteConfig` computes the new text (REST answers it; nothing is written by the gateway). `rewriteFile`
 * (the CLI's `import --rewrite`) first copies the original beside it as a backup, then writes the new text
 * atomically; if that write fails, the original is put back, so the client never keeps a half-written file.
 * The backup holds the secrets the import just sealed, in clear: it is a new file (never one already there, nor
 * through a symlink planted in a cloned repo), readable by the user alone (0600).
 */
import { constants } from 'node:fs';
import { open, readFile, unlink, writeFile } from 'node:fs/promises';
import { CLIENTS, type ClientId, isClientId, type WiringInput } from '../cli/connect/clients.js';
import { nodeAt, parseText, removeValue } from '../cli/connect/jsonc-edit.js';
import { mergeEntry } from '../cli/connect/merge.js';
import { readTarget, writeTarget } from '../cli/connect/target.js';
import { GatehouseError } from '../errors.js';
import type { ImportClient } from './clients.js';

export interface Rewrite {
  text: string;
  /** What changed, e.g. `removed mcpServers.files`, `added mcpServers.gatehouse`. */
  changes: string[];
}

/** The connect writer of an import client (Windsurf has none: its entry shape is not one `connect` writes). */
export function rewritable(client: ImportClient): ClientId {
  if (!isClientId(client)) {
    throw new GatehouseError(
      'validation_error',
      `Rewriting ${client}'s config is not supported; add the hub to it by hand (gatehouse connect --client …).`,
    );
  }
  return client;
}

/** The config text with `moved` entries removed and the hub's entry merged in. */
export function rewriteConfig(
  original: string,
  file: string,
  client: ClientId,
  moved: readonly string[],
  input: WiringInput,
): Rewrite {
  const spec = CLIENTS[client];
  const { errors } = parseText(original, 'jsonc');
  if (errors.length > 0) throw new GatehouseError('validation_error', `${file} is not JSON; nothing was changed.`);
  let text = original;
  const changes: string[] = [];
  for (const name of moved) {
    if (name === input.name) continue; // the hub's own entry is merged below, not removed
    // An entry the file does not hold under this client's key (another client's file shape) is left alone:
    // jsonc-parser throws when asked to delete under a key that is not there.
    if (!nodeAt(parseText(text, 'jsonc').root, [spec.serversKey, name])) continue;
    text = removeValue(text, [spec.serversKey, name]);
    changes.push(`removed ${spec.serversKey}.${name}`);
  }
  const merged = mergeEntry(text, spec, input, file);
  return { text: merged.changes.length === 0 ? text : merged.text, changes: [...changes, ...merged.changes] };
}

/** How many names `createBackup` tries before it gives up. */
const BACKUP_ATTEMPTS = 10;

/**
 * Writes `original` to a new file beside `file` (`<file>.gatehouse-backup`, or a timestamped name when that is
 * taken) and answers its path. Created exclusively with mode 0600, never followed through a symlink: a name that
 * exists in any form, a dangling link included, is taken, so a planted link cannot make the backup land elsewhere.
 */
async function createBackup(file: string, original: Buffer): Promise<string> {
  const plain = `${file}.gatehouse-backup`;
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  for (let attempt = 0; attempt < BACKUP_ATTEMPTS; attempt++) {
    const path = attempt === 0 ? plain : attempt === 1 ? `${plain}-${stamp}` : `${plain}-${stamp}-${attempt}`;
    const refused = (error: unknown) =>
      new GatehouseError(
        'validation_error',
        `Cannot write the backup ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); ${file} was not changed.`,
      );
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(
        path,
        constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW,
        0o600,
      );
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue; // a file, a folder, a link (dangling too)
      throw refused(error);
    }
    try {
      await handle.chmod(0o600); // whatever the umask
      await handle.writeFile(original);
      await handle.close();
    } catch (error) {
      await handle.close().catch(() => undefined);
      await unlink(path).catch(() => undefined); // ours: it was created above
      throw refused(error);
    }
    return path;
  }
  throw new GatehouseError(
    'validation_error',
    `Refusing to rewrite ${file}: ${plain} and the names after it already exist; move them away and run it again.`,
  );
}

/**
 * Rewrites `file` in place with a backup of the original beside it; answers the backup's path and the changes.
 * `write` is the atomic writer (a parameter so a test can make it fail).
 */
export async function rewriteFile(
  file: string,
  client: ClientId,
  moved: readonly string[],
  input: WiringInput,
  write: typeof writeTarget = writeTarget,
): Promise<Rewrite & { backup: string | undefined }> {
  const target = await readTarget(file);
  if (!target.exists) throw new GatehouseError('validation_error', `No file ${file}.`);
  const rewrite = rewriteConfig(target.text, file, client, moved, input);
  if (rewrite.changes.length === 0) return { ...rewrite, backup: undefined };
  // The bytes as they are (the text was read as UTF-8), for the backup and for putting them back.
  const original = await readFile(target.realPath);
  const backup = await createBackup(target.realPath, original);
  try {
    await write(target, rewrite.text, CLIENTS[client].secret === 'clear' && input.token !== undefined);
  } catch (error) {
    // Written in place: the file keeps its own permissions (the backup's are 0600).
    await writeFile(target.realPath, original).catch(() => undefined);
    throw new GatehouseError(
      'internal_error',
      `Could not rewrite ${file} (${(error as Error).message}); the original is back in place (backup: ${backup}).`,
      undefined,
      { cause: error },
    );
  }
  return { ...rewrite, backup };
}
