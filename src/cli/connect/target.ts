/**
 * The file `--write` names: where it really is (a symlinked dotfile is written through its link), what it holds,
 * whether it sits in a git work tree, and an atomic write that keeps its permissions (or tightens them to 0600 when
 * it will hold a token).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, lstat, mkdir, readFile, realpath, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { GatehouseError } from '../../errors.js';

const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

export interface Target {
  /** As given, for messages. */
  path: string;
  /** The file written: the path with every symlink resolved (the parent folders may not exist yet). */
  realPath: string;
  exists: boolean;
  /** Permission bits of the existing file. */
  mode: number | undefined;
  text: string;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** The nearest folder at or above `dir` that exists, with symlinks resolved. */
async function nearestExisting(dir: string): Promise<{ real: string; missing: string[] }> {
  const missing: string[] = [];
  let current = resolve(dir);
  for (;;) {
    try {
      return { real: await realpath(current), missing };
    } catch {
      const parent = dirname(current);
      if (parent === current) return { real: current, missing };
      missing.unshift(basename(current));
      current = parent;
    }
  }
}

export async function readTarget(path: string): Promise<Target> {
  const absolute = resolve(path);
  let realPath: string;
  try {
    realPath = await realpath(absolute);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    if (await exists(absolute)) {
      throw new GatehouseError('validation_error', `Refusing to write ${path}: it is a symlink to a missing file.`);
    }
    const parent = await nearestExisting(dirname(absolute));
    realPath = join(parent.real, ...parent.missing, basename(absolute));
  }
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(realPath);
  } catch {
    return { path, realPath, exists: false, mode: undefined, text: '' };
  }
  if (!info.isFile())
    throw new GatehouseError('validation_error', `Refusing to write ${path}: it is not a regular file.`);
  if (info.size > MAX_CONFIG_BYTES) {
    throw new GatehouseError(
      'validation_error',
      `Refusing to write ${path}: ${info.size} bytes is not a client config.`,
    );
  }
  let text: string;
  try {
    text = await readFile(realPath, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new GatehouseError('validation_error', `Cannot read ${path} (${reason}).`);
  }
  return { path, realPath, exists: true, mode: info.mode & 0o777, text };
}

/** The root of the git work tree holding `file`, if any (a `.git` folder or file in it or above it). */
export async function gitWorkTreeOf(file: string): Promise<string | undefined> {
  let dir = (await nearestExisting(dirname(file))).real;
  for (;;) {
    if (await exists(join(dir, '.git'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** Whether git ignores `file` in `workTree`: true, false, or undefined when git cannot say. */
export function gitIgnores(file: string, workTree: string): Promise<boolean | undefined> {
  return new Promise((resolvePromise) => {
    execFile('git', ['check-ignore', '-q', '--', file], { cwd: workTree, timeout: 5_000 }, (error) => {
      if (!error) resolvePromise(true);
      else resolvePromise(typeof error.code === 'number' && error.code === 1 ? false : undefined);
    });
  });
}

/**
 * Replaces the file in one rename (a reader never sees half a file). An existing file keeps its permission bits;
 * `secret` makes them 0600 (the file holds a token).
 */
export async function writeTarget(target: Target, text: string, secret: boolean): Promise<void> {
  const dir = dirname(target.realPath);
  await mkdir(dir, { recursive: true });
  const temp = join(dir, `.${basename(target.realPath)}.gatehouse-${process.pid}-${randomBytes(4).toString('hex')}`);
  const mode = secret ? 0o600 : target.mode;
  try {
    // Created with its final mode (a new, token-free file gets the umask's), so a token is never readable by others.
    await writeFile(temp, text, {
      flag: constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY,
      mode: mode ?? 0o666,
    });
    if (mode !== undefined) await chmod(temp, mode);
    await rename(temp, target.realPath);
  } catch (error) {
    await unlink(temp).catch(() => {});
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new GatehouseError('validation_error', `Cannot write ${target.path} (${reason}); it was not changed.`);
  }
}
