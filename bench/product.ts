/**
 * Where the benchmark's gateway and conduit processes load the product from: its build, the `dist/` folder
 * that `npm start` runs, so the figures are those of the product as it is run. The orchestrator builds it
 * (`buildProduct`, the same incremental build as `npm run build`) before the first section, and tells each
 * child which build to load (`BENCH_PRODUCT_DIR`: this repository's, or the wave's baseline's, see
 * `baseline.ts`).
 *
 * `BENCH_FROM_SOURCE=1` loads `src/` through tsx instead, as `npm run dev` does. tsx compiles with esbuild's
 * `keepNames`, which gives every closure its name as it is created: a few per cent of a call's CPU that the
 * build does not spend.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const fromSource = process.env.BENCH_FROM_SOURCE === '1';
/** A build blocks the orchestrator's event loop (no section limit can fire meanwhile): bounded on its own. */
const BUILD_TIMEOUT_MS = 10 * 60_000;

/** Builds this repository's product (only what is stale, as `npm run build`); nothing with `BENCH_FROM_SOURCE=1`. */
export function buildProduct(): void {
  if (fromSource) return;
  execFileSync(process.execPath, [path.join(REPO_DIR, 'scripts/build.mjs')], {
    cwd: REPO_DIR,
    stdio: ['ignore', 'ignore', 'inherit'],
    timeout: BUILD_TIMEOUT_MS,
  });
}

/**
 * Builds the server of another tree (the baseline's) into its own `dist/` with this repository's TypeScript.
 * Type errors against today's dependencies do not matter: tsc emits the same JavaScript either way.
 */
export function buildTree(dir: string): void {
  const tsc = path.join(REPO_DIR, 'node_modules/typescript/bin/tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
      cwd: dir,
      stdio: 'ignore',
      timeout: BUILD_TIMEOUT_MS,
    });
  } catch (error) {
    // Stopped by its timeout, tsc may have emitted part of the build: none of it is kept (an earlier run's build
    // is reused when `dist/gateway.js` exists).
    if ((error as { signal?: unknown }).signal) {
      rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
      throw error;
    }
    if (!existsSync(path.join(dir, 'dist', 'gateway.js'))) throw error;
  }
}

/** The environment that makes a gateway or conduit process load the build in `dir` (a `dist/` folder). */
export function productEnv(dir = path.join(REPO_DIR, 'dist')): Record<string, string> {
  return fromSource ? {} : { BENCH_PRODUCT_DIR: dir };
}

/**
 * A module of the product, as the child was told to load it: `name` is its path under `src/` with the `.js`
 * extension (`gateway.js`); `fallback` imports it from the source (a literal import, so tsx resolves it).
 */
export async function productModule<T>(name: string, fallback: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_PRODUCT_DIR;
  if (!dir) return fallback();
  return (await import(pathToFileURL(path.join(dir, name)).href)) as T;
}
