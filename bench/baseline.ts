/**
 * The wave's one performance baseline (DESIGN.md, "Second wave"): main as the wave began, commit
 * `404a5b2`. The hub section runs that commit's gateway beside today's, in the same run, so each
 * issue of the wave reports its figures against it rather than against a number from another day.
 *
 * The commit's tree is exported once into a temporary folder (`git archive`, no checkout of this
 * working tree is touched) and shares this repository's `node_modules`. Without git or the commit
 * (a tarball of the package), or with `BENCH_BASELINE=off`, the section runs without it and says so.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BASELINE_COMMIT = '404a5b2';
const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The folder holding the baseline's tree, ready to run `bench/gateway-process.ts` from; undefined when unavailable. */
export function baselineTree(): { dir: string } | { unavailable: string } {
  if (process.env.BENCH_BASELINE === 'off') return { unavailable: 'BENCH_BASELINE=off' };
  const dir = path.join(os.tmpdir(), `gatehouse-baseline-${BASELINE_COMMIT}`);
  if (existsSync(path.join(dir, 'bench', 'gateway-process.ts'))) return { dir };
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
    return { dir };
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return { unavailable: `commit ${BASELINE_COMMIT} could not be exported (${reason})` };
  }
}
