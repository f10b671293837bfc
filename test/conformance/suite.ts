/**
 * Runs the official conformance suite (`@modelcontextprotocol/conformance`, pinned in devDependencies) against a
 * server URL for one requirement set (a spec revision), in one child process, and reads back which scenarios
 * passed. Node 20 lacks `fs.globSync`, which the package imports; `fs-glob-register.mjs` supplies it.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export type Revision = '2025-11-25' | '2026-07-28';

export interface ScenarioOutcome {
  passed: boolean;
  /** Ids of the checks that failed, with their messages (cut), for a readable test failure. */
  failures: string[];
}

const require = createRequire(import.meta.url);
export const BIN = path.join(
  path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json')),
  'dist',
  'index.js',
);
export const SHIM = fileURLToPath(new URL('./fs-glob-register.mjs', import.meta.url));
/** `server-<scenario>-<ISO timestamp with dashes>` */
const RESULT_DIR = /^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/;

interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

/**
 * The suite's start-up (schema compilation) is CPU-heavy and counts against its first scenario's timeout, so at
 * most two runs go at once, whoever asks.
 */
const MAX_RUNNING = 2;
let running = 0;
const waiting: (() => void)[] = [];

async function slot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= MAX_RUNNING) await new Promise<void>((resolve) => waiting.push(resolve));
  running += 1;
  try {
    return await work();
  } finally {
    running -= 1;
    waiting.shift()?.();
  }
}

/**
 * Runs the suite's command line (`args` after the binary) in `cwd`; answers everything it printed. The exit code
 * is 1 whenever a scenario fails: callers read the verdicts from the result files instead.
 */
export function runSuite(args: readonly string[], cwd: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', SHIM, BIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', () => resolve(text));
  });
}

/**
 * Runs every scenario `revision` names (scored and not) against `url`, or only `scenario` at that revision;
 * answers each scenario's outcome.
 */
export function runConformance(
  url: string,
  revision: Revision,
  scenario?: string,
): Promise<Map<string, ScenarioOutcome>> {
  return slot(() => run(url, revision, scenario));
}

async function run(url: string, revision: Revision, scenario?: string): Promise<Map<string, ScenarioOutcome>> {
  const out = await mkdtemp(path.join(tmpdir(), 'gatehouse-conformance-'));
  try {
    const output = await runSuite(
      [
        'server',
        '--url',
        url,
        ...(scenario ? ['--scenario', scenario, '--spec-version', revision] : ['--requirements', revision]),
        '-o',
        out,
        '--timeout',
        '60000',
      ],
      out,
    );
    const outcomes = new Map<string, ScenarioOutcome>();
    for (const entry of await readdir(out)) {
      const scenario = RESULT_DIR.exec(entry)?.[1];
      if (!scenario) continue;
      // A scenario cut off by its timeout may leave a folder without checks: that is a failure too.
      const raw = await readFile(path.join(out, entry, 'checks.json'), 'utf8').catch(
        () => '[{"id":"no-checks","status":"FAILURE"}]',
      );
      const checks = JSON.parse(raw) as Check[];
      const failures = checks
        .filter((c) => c.status === 'FAILURE')
        .map((c) => `${c.id}: ${(c.errorMessage ?? '').slice(0, 200)}`);
      outcomes.set(scenario, { passed: failures.length === 0, failures });
    }
    if (outcomes.size === 0) throw new Error(`the conformance suite produced no results:\n${output.slice(-2000)}`);
    return outcomes;
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/** The scenarios that did not pass, sorted. */
export function failing(outcomes: Map<string, ScenarioOutcome>): string[] {
  return [...outcomes]
    .filter(([, o]) => !o.passed)
    .map(([name]) => name)
    .sort();
}
