/**
 * Who may run what: a stdio server's command must be in the platform setting
 * `stdio.allowedCommands`. An absolute path in the list matches exactly (the command as written, or
 * what it resolves to on PATH). A bare name matches the same bare name, or a path to the very file
 * that name resolves to on PATH: `/usr/bin/npx` is `npx` when PATH says so, `/tmp/x/npx` is not.
 * PATH is the gateway's own: a record may set its child's `PATH`, so a start also checks the program
 * that `PATH` finds (`allowedProgram`), and the child runs exactly that file.
 * Checked at install, at configure (the config route, the config file's apply, an import), and at
 * every start, so a list narrowed later stops what it no longer allows.
 */
import { isAbsolute, resolve } from 'node:path';
import { GatehouseError } from '../errors.js';
import { resolveOnPath, sameFile } from '../upstream/stdio/sandbox.js';

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

function notAllowed(command: string, allowed: readonly string[], program?: string): GatehouseError {
  const found =
    program === undefined ? '' : `: on the PATH this server is given it is ${program}, not a file the list names`;
  return new GatehouseError(
    'stdio.command_not_allowed',
    `The command "${command}" is not allowed for stdio servers${found}; the platform setting stdio.allowedCommands lists what is (${allowed.join(', ') || 'nothing'}). An admin may add it.`,
    { command, allowed: [...allowed], ...(program !== undefined && { program }) },
  );
}

export function assertCommandAllowed(command: string, allowed: readonly string[]): void {
  if (commandAllowed(command, allowed)) return;
  throw notAllowed(command, allowed);
}

/** Whether an absolute program is a file the list names: an absolute entry, or the file a bare one resolves to. */
function programListed(program: string, allowed: readonly string[], path: string): boolean {
  return allowed.some((entry) => sameFile(program, isAbsolute(entry) ? resolve(entry) : resolveOnPath(entry, path)));
}

/**
 * The program a stdio child runs, decided once: the command (allowed by name, as at install) resolved on
 * the PATH the child gets (`childPath`: the record's own `PATH` when it sets one), and that very file held
 * to the list, bare names read on the gateway's PATH. A record's `PATH` can thus pick among allowed files
 * only. The caller spawns the absolute path returned, so no second lookup can land elsewhere. Undefined
 * when nothing on `childPath` is executable by that name: the spawn reports it missing.
 */
export function allowedProgram(
  command: string,
  allowed: readonly string[],
  childPath: string,
  path = process.env.PATH ?? '',
): string | undefined {
  if (!commandAllowed(command, allowed, path)) throw notAllowed(command, allowed);
  const program = resolveOnPath(command, childPath);
  if (program === undefined || programListed(program, allowed, path)) return program;
  throw notAllowed(command, allowed, program);
}
