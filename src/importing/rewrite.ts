/**
 * After an import: the client's config rewritten to reach its servers through the hub — the imported entries
 * (registered now, or already installed) removed, the hub's entry merged in by `gatehouse connect`'s writer
 * (`mergeEntry`), every other entry, comment and the layout kept.
 *
 * `rewriteConfig` computes the new text (REST answers it; nothing is written by the gateway). `rewriteFile`
 * (the CLI's `import --rewrite`) first copies the original beside it as a backup, then writes the new text
 * atomically; if that write fails, the backup is copied back, so the client never keeps a half-written file.
 */
import { copyFile, stat } from 'node:fs/promises';
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

/** A backup path beside `file` that does not exist yet. */
async function freeBackupPath(file: string): Promise<string> {
  const plain = `${file}.gatehouse-backup`;
  const taken = async (p: string) =>
    stat(p).then(
      () => true,
      () => false,
    );
  if (!(await taken(plain))) return plain;
  return `${plain}-${new Date().toISOString().replace(/[:.]/g, '-')}`;
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
  const backup = await freeBackupPath(target.realPath);
  await copyFile(target.realPath, backup);
  try {
    await write(target, rewrite.text, CLIENTS[client].secret === 'clear' && input.token !== undefined);
  } catch (error) {
    await copyFile(backup, target.realPath).catch(() => undefined);
    throw new GatehouseError(
      'internal_error',
      `Could not rewrite ${file} (${(error as Error).message}); the original is back in place (backup: ${backup}).`,
      undefined,
      { cause: error },
    );
  }
  return { ...rewrite, backup };
}
