/**
 * The argument path sandbox: filesystem-style arguments (per server
 * `pathArgs`, default `path`, `file`, `dir`, `directory`) must resolve inside
 * one of the server's `workspaceRoots`. `..`, an absolute path elsewhere, and a
 * symlink that leads out are all refused — symlinks are followed through the
 * longest part of the path that exists, so a link planted inside a root
 * cannot point the upstream outside it. Without roots there is no sandbox.
 */
import { realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
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
}

/** Throws `policy.path_escape` for the first path argument outside every root. */
export function assertPathsInside(policy: PathPolicy, args: Record<string, unknown>): void {
  const roots = (policy.workspaceRoots ?? []).map((r) => realLocation(resolve(r)));
  if (roots.length === 0) return;
  for (const name of policy.pathArgs ?? DEFAULT_PATH_ARGS) {
    const value = args[name];
    const values = Array.isArray(value) ? value : value === undefined ? [] : [value];
    for (const item of values) {
      if (typeof item !== 'string' || item.includes('\0')) {
        throw new GatehouseError('policy.path_escape', `Argument "${name}" must be a path string.`, { path: name });
      }
      const target = realLocation(isAbsolute(item) ? resolve(item) : resolve(roots[0] as string, item));
      if (!roots.some((root) => inside(root, target))) {
        throw new GatehouseError('policy.path_escape', `Argument "${name}" points outside the allowed workspace.`, {
          path: name,
        });
      }
    }
  }
}
