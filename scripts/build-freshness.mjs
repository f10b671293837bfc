/**
 * Which parts of the build are stale: the server (src → dist, by tsc) and the dashboard (src/web → dist/web, by
 * Vite). A part is stale when its output is missing or older than any of its inputs. Shared by `npm run build`
 * (so `npm start` with nothing changed rebuilds nothing) and the tests' global setup (which builds the dashboard).
 * Plain JavaScript, so `node` runs it before anything is compiled.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const WEB_SRC = join(ROOT, 'src/web');
/** tsc's incremental state; touched after every successful server build, so its time is the build's. */
export const SERVER_BUILD_INFO = join(ROOT, 'dist/.tsbuildinfo');
const SERVER_INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];

function mtimeOf(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** The newest modification time of a file, or of any file under a folder (skipping `skip`). */
export function newestMtime(path, skip = []) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const child = join(path, entry.name);
    if (skip.includes(child)) continue;
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(child, skip) : statSync(child).mtimeMs);
  }
  return newest;
}

/** The dashboard's build (of the package at `root`) is missing or older than a file of src/web. */
export function dashboardIsStale(root = ROOT) {
  const built = mtimeOf(join(root, 'dist/web/index.html'));
  return built === undefined || newestMtime(join(root, 'src/web')) > built;
}

/** The server's build is missing or older than a file of src (src/web aside) or a config it depends on. */
export function serverIsStale(root = ROOT) {
  const built = mtimeOf(join(root, 'dist/.tsbuildinfo'));
  if (built === undefined) return true;
  const skip = [join(root, 'src/web')];
  return SERVER_INPUTS.some((input) => {
    const path = join(root, input);
    return mtimeOf(path) !== undefined && newestMtime(path, skip) > built;
  });
}
