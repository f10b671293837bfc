/**
 * Builds the dashboard (src/web → dist/web) with Vite's JS API before the tests run, when the build is
 * missing or older than any file of src/web, so `npm install && npm test` works from a fresh clone.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WEB_SRC = join(ROOT, 'src/web');
const WEB_INDEX = join(ROOT, 'dist/web/index.html');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

export function dashboardIsStale(): boolean {
  let built: number;
  try {
    built = statSync(WEB_INDEX).mtimeMs;
  } catch {
    return true;
  }
  return newestMtime(WEB_SRC) > built;
}

export default async function setup(): Promise<void> {
  if (!dashboardIsStale()) return;
  const { build } = await import('vite');
  await build({ configFile: join(WEB_SRC, 'vite.config.ts'), logLevel: 'warn' });
}
