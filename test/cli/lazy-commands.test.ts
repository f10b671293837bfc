/**
 * `gatehouse` loads only the command it runs (issue 21: a restart with nothing changed serves in under 3 s):
 * main.ts reaches no command module and not the gateway through static imports, and `--help` still lists
 * every command with its summary.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { buildCli, COMMAND_SUMMARIES } from '../../src/cli/commands.js';
import { runCli } from './helpers.js';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

/** Every source file `entry` loads through static imports and re-exports (type-only ones load nothing). */
function staticGraph(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    const statements = /^\s*(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s+)?'([^']+)'/gm;
    for (const [, specifier] of text.matchAll(statements)) {
      if (!specifier?.startsWith('.')) continue;
      visit(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
    }
  };
  visit(entry);
  return new Set([...seen].map((file) => relative(SRC, file)));
}

it('main.ts imports neither the gateway nor any command module statically', () => {
  const graph = staticGraph(join(SRC, 'cli/main.ts'));
  expect(graph).toContain('cli/commands.ts');
  expect(graph).toContain('config.ts');
  for (const heavy of [
    'gateway.ts',
    'app.ts',
    'conduit.ts',
    'store/db.ts',
    'cli/serve.ts',
    'cli/conduit.ts',
    'cli/token.ts',
    'cli/users.ts',
    'cli/servers.ts',
    'cli/approvals.ts',
    'cli/admin.ts',
    'cli/connect/index.ts',
    'cli/stdio-bridge.ts',
    'cli/doctor.ts',
    'cli/toolsets.ts',
    'cli/import.ts',
  ])
    expect(graph, heavy).not.toContain(heavy);
});

it('adds only the command being run; every other is listed by its summary, which is its own description', async () => {
  const all = await buildCli();
  const loaded = all.commands.map((c) => [c.name(), c.description()]);
  expect(loaded).toEqual(Object.entries(COMMAND_SUMMARIES));

  const token = await buildCli(['node', 'gatehouse', 'token', 'create', '--role', 'admin']);
  expect(token.commands.map((c) => [c.name(), c.description()])).toEqual(loaded);
  const sub = (name: string) => token.commands.find((c) => c.name() === name)?.commands.map((c) => c.name());
  expect(sub('token')).toContain('create');
  expect(sub('servers')).toEqual([]); // listed, not loaded
  const help = await buildCli(['node', 'gatehouse', 'help', 'servers']);
  expect(help.commands.find((c) => c.name() === 'servers')?.commands.length).toBeGreaterThan(0);
});

it('`gatehouse --help` lists every command', async () => {
  const { code, stdout } = await runCli(['--help']);
  expect(code).toBe(0);
  for (const name of Object.keys(COMMAND_SUMMARIES)) expect(stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
});
