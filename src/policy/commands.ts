/**
 * Who may run what: a stdio server's command must be in the platform setting
 * `stdio.allowedCommands`. An absolute path in the list matches exactly (the command as written, or
 * what it resolves to on PATH). A bare name matches the same bare name, or a path to the very file
 * that name resolves to on PATH: `/usr/bin/npx` is `npx` when PATH says so, `/tmp/x/npx` is not.
 * Checked at install, at configure (the config route, the config file's apply, an import), and at
 * every start, so a list narrowed later stops what it no longer allows.
 */
import { isAbsolute } from 'node:path';
import { GatehouseError } from '../errors.js';
import { resolveOnPath } from '../upstream/stdio/sandbox.js';

export function commandAllowed(command: string, allowed: readonly string[], path = process.env.PATH ?? ''): boolean {
  const resolved = resolveOnPath(command, path);
  for (const entry of allowed) {
    if (isAbsolute(entry)) {
      if (command === entry || resolved === entry) return true;
      continue;
    }
    if (command === entry) return true;
    if (command.includes('/') && resolved !== undefined && resolved === resolveOnPath(entry, path)) return true;
  }
  return false;
}

export function assertCommandAllowed(command: string, allowed: readonly string[]): void {
  if (commandAllowed(command, allowed)) return;
  throw new GatehouseError(
    'stdio.command_not_allowed',
    `The command "${command}" is not allowed for stdio servers; the platform setting stdio.allowedCommands lists what is (${allowed.join(', ') || 'nothing'}). An admin may add it.`,
    { command, allowed: [...allowed] },
  );
}
