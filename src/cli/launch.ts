/**
 * How to start this very CLI from anywhere, PATH or not: Node's own absolute path and the absolute path of the
 * CLI's entry file. Written into client configs that launch Gatehouse (Claude Desktop runs `gatehouse stdio`), so
 * they work without `gatehouse` on the PATH of a GUI app, and keep working with the Node that wrote them.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Launch {
  command: string;
  /** Arguments before the command's own (the entry file, and a loader when run from sources). */
  args: string[];
}

export function selfLaunch(): Launch {
  const here = dirname(fileURLToPath(import.meta.url));
  // Built (dist/cli/launch.js, also in an installed package): the entry is beside this file.
  const beside = join(here, 'main.js');
  if (existsSync(beside)) return { command: process.execPath, args: [beside] };
  // From sources (src/cli/launch.ts under tsx): the build of this clone when there is one, else tsx's loader.
  const built = resolve(here, '../../dist/cli/main.js');
  if (existsSync(built)) return { command: process.execPath, args: [built] };
  return {
    command: process.execPath,
    args: ['--import', import.meta.resolve('tsx'), join(here, 'main.ts')],
  };
}
