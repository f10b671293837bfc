/**
 * The argument path sandbox: filesystem-style arguments (per server
 * `pathArgs`, default `path`, `file`, `dir`, `directory`) must resolve inside
 * one of the server's `workspaceRoots`. `..`, an absolute path elsewhere, and a
 * symlink that leads out are all refused — symlinks are followed through the
 * longest part of the path that exists, so a link planted inside a root
 * cannot point the upstream outside it. Without roots there is no sandbox.
 *
 * A relative path (or `~`) means whatever the upstream's working directory makes of it. Gatehouse sets
 * that directory only for the stdio children it starts (their first workspace root), so only there is a
 * relative path resolved (against that root); for every other server it is refused
 * (`policy.relative_path`), and `~` everywhere. Path arguments are found at any depth of the arguments
 * (`{"options": {"path": …}}`, arrays of them), and every `file:` URI anywhere is checked as a path.
 */
import { realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GatehouseError } from '../errors.js';

export const DEFAULT_PATH_ARGS = ['path', 'file', 'dir', 'directory'] as const;

/** The real location of `target`, following links through every part of it that exists. */
function realLocation(target: string): string {
  let existing = target;
  const rest: string[] = [];
  for (;;) {
    try {
      return join(realpathSync(existing), ...rest.reverse());
    } catch {
      const parent = dirname(existing);
      if (parent === existing) return target;
      rest.push(basename(existing));
      existing = parent;
    }
  }
}

function inside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

export interface PathPolicy {
  pathArgs?: readonly string[] | undefined;
  workspaceRoots?: readonly string[] | undefined;
  /** `stdio` servers run in their first workspace root (Gatehouse starts them there); others in a place unknown. */
  transport?: string | undefined;
}

const escapeRefusal = (name: string, message: string) =>
  new GatehouseError('policy.path_escape', `Argument "${name}" ${message}`, { path: name });

/** Checks one path value against the roots; `name` is where it was found (for the message). */
function checkPath(roots: readonly string[], relativeBase: string | undefined, name: string, value: string): void {
  if (value.includes('\0')) throw escapeRefusal(name, 'must be a path string.');
  let path = value;
  if (/^file:/i.test(path)) {
    try {
      path = fileURLToPath(path);
    } catch {
      throw escapeRefusal(name, 'is a file: URI that does not name a local path.');
    }
  }
  if (path.startsWith('~')) {
    throw new GatehouseError(
      'policy.relative_path',
      `Argument "${name}" starts with ~, which only the upstream can expand; give an absolute path inside the workspace.`,
      { path: name },
    );
  }
  if (!isAbsolute(path) && relativeBase === undefined) {
    throw new GatehouseError(
      'policy.relative_path',
      `Argument "${name}" is a relative path, and this server resolves it from a working directory Gatehouse does not set; give an absolute path inside the workspace.`,
      { path: name },
    );
  }
  const target = realLocation(isAbsolute(path) ? resolve(path) : resolve(relativeBase as string, path));
  if (!roots.some((root) => inside(root, target))) throw escapeRefusal(name, 'points outside the allowed workspace.');
}

/**
 * Throws `policy.path_escape` for the first path argument outside every root (at any depth, `file:` URIs
 * included), and `policy.relative_path` for a relative path or `~` the server would resolve on its own.
 */
export function assertPathsInside(policy: PathPolicy, args: Record<string, unknown>): void {
  const roots = (policy.workspaceRoots ?? []).map((r) => realLocation(resolve(r)));
  if (roots.length === 0) return;
  const relativeBase = policy.transport === 'stdio' ? roots[0] : undefined;
  const names = new Set(policy.pathArgs ?? DEFAULT_PATH_ARGS);
  // Iterative, so arguments nested thousands deep cannot overflow the stack.
  const pending: { value: unknown; name: string; isPath: boolean }[] = [{ value: args, name: '', isPath: false }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, name, isPath } = next;
    if (typeof value === 'string') {
      if (isPath || /^file:/i.test(value)) checkPath(roots, relativeBase, name, value);
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push({ value: item, name, isPath });
    } else if (value !== null && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        pending.push({ value: child, name: name ? `${name}.${key}` : key, isPath: names.has(key) });
      }
    } else if (isPath && value !== undefined && value !== null) {
      throw escapeRefusal(name, 'must be a path string.');
    }
  }
}
