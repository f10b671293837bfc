/**
 * The wave's one performance baseline (DESIGN.md, "Second wave"): main as the wave began, commit
 * `404a5b2`. The hub section runs that commit's gateway beside today's, in the same run, so each
 * issue of the wave reports its figures against it rather than against a number from another day.
 *
 * The commit's tree is exported once into a temporary folder (`git archive`, no checkout of this
 * working tree is touched), shares this repository's `node_modules`, and its server is built there
 * (`dist/`), so that its gateway runs as today's does (`product.ts`). Without git or the commit (a
 * tarball of the package), or with `BENCH_BASELINE=off`, the section runs without it and says so.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildTree, fromSource, productEnv, REPO_DIR } from './product.js';

export const BASELINE_COMMIT = '404a5b2';

/**
 * The folder holding the baseline's tree, with its server built in `dist/` (or, with `BENCH_FROM_SOURCE=1`, its
 * own `bench/gateway-process.ts` to run from source); unavailable when it cannot be had.
 */
export function baselineTree(): { dir: string } | { unavailable: string } {
  if (process.env.BENCH_BASELINE === 'off') return { unavailable: 'BENCH_BASELINE=off' };
  const dir = path.join(os.tmpdir(), `gatehouse-baseline-${BASELINE_COMMIT}`);
  if (existsSync(path.join(dir, 'bench', 'gateway-process.ts'))) return built(dir);
  const partial = `${dir}.partial-${process.pid}`;
  try {
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    const archive = execFileSync('git', ['-C', REPO_DIR, 'archive', '--format=tar', BASELINE_COMMIT], {
      maxBuffer: 256 * 1024 * 1024,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    execFileSync('tar', ['-x', '-C', partial], { input: archive });
    symlinkSync(path.join(REPO_DIR, 'node_modules'), path.join(partial, 'node_modules'));
    renameSync(partial, dir);
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return { unavailable: `commit ${BASELINE_COMMIT} could not be exported (${reason})` };
  }
  return built(dir);
}

/** The tree, its server built once (an earlier run's build is kept with the tree). */
function built(dir: string): { dir: string } | { unavailable: string } {
  if (fromSource || existsSync(path.join(dir, 'dist', 'gateway.js'))) return { dir };
  try {
    buildTree(dir);
    return { dir };
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return { unavailable: `the server of commit ${BASELINE_COMMIT} could not be built (${reason})` };
  }
}

/** The gateway process file and environment that run the baseline's gateway (see `product.ts`). */
export function baselineGateway(dir: string): { file: string; env: Record<string, string> } {
  if (fromSource) return { file: path.join(dir, 'bench/gateway-process.ts'), env: {} };
  return { file: 'bench/gateway-process.ts', env: productEnv(path.join(dir, 'dist')) };
}
