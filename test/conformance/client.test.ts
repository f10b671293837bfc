/**
 * The conformance suite's client scenarios with Gatehouse as the client (its upstream side; issues 18 and 19): the
 * suite starts each scenario's MCP server (and, for `auth/*`, its authorization server) and runs
 * `gatehouse-client.ts`, which drives a real gateway as an operator and an agent would: install, handshake (for
 * `auth/*`: the 401, discovery, registration, consent, the callback) and calls through `/mcp/s/{id}`.
 * Scenarios listed in `expected-client-failures.yaml` (with the reason) may fail or warn; any other failure or
 * warning fails this test, and so does a listed scenario that starts passing.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runSuite } from './suite.js';

const require = createRequire(import.meta.url);
const CLIENT = fileURLToPath(new URL('./gatehouse-client.ts', import.meta.url));
/** tsx by absolute URL: the suite runs the command in its own working folder. */
const TSX = pathToFileURL(require.resolve('tsx')).href;
const COMMAND = `"${process.execPath}" --import ${TSX} "${CLIENT}"`;
/** `<scenario>-<ISO timestamp with dashes>` */
const RESULT_DIR = /^(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/;
/** The client scenarios outside authorization (the suite's `list`), each run on its own. */
const CORE_SCENARIOS = [
  'initialize',
  'tools_call',
  'request-metadata',
  'sse-retry',
  'elicitation-sep1034-client-defaults',
];

interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

/** Runs the suite with `args` (plus the client command and an output folder); answers each scenario's problems. */
async function problemsOf(args: readonly string[]): Promise<{ problems: Record<string, string[]>; ran: string[] }> {
  const out = await mkdtemp(path.join(tmpdir(), 'gatehouse-conformance-client-'));
  try {
    const output = await runSuite(['client', '--command', COMMAND, ...args, '-o', out, '--timeout', '90000'], out);
    const problems: Record<string, string[]> = {};
    const ran: string[] = [];
    // Results land in `<out>/<scenario>-<time>`, an `auth/` scenario's in `<out>/auth/<name>-<time>`.
    for (const folder of ['', 'auth']) {
      for (const entry of await readdir(path.join(out, folder)).catch(() => [] as string[])) {
        const name = RESULT_DIR.exec(entry)?.[1];
        if (!name) continue;
        const scenario = folder ? `${folder}/${name}` : name;
        ran.push(scenario);
        const raw = await readFile(path.join(out, folder, entry, 'checks.json'), 'utf8').catch(
          () => '[{"id":"no-checks","status":"FAILURE"}]',
        );
        const found = (JSON.parse(raw) as Check[])
          .filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')
          .map((c) => `${c.id} ${c.status}: ${(c.errorMessage ?? '').slice(0, 200)}`);
        if (found.length > 0) problems[scenario] = found;
      }
    }
    if (ran.length === 0) throw new Error(`the conformance suite produced no results:\n${output.slice(-3000)}`);
    return { problems, ran };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

describe('the conformance suite’s client scenarios with Gatehouse as the client', { timeout: 600_000 }, () => {
  let expected: Record<string, string>;
  beforeAll(async () => {
    expected = parse(await readFile(new URL('./expected-client-failures.yaml', import.meta.url), 'utf8')) as Record<
      string,
      string
    >;
  });
  const expectedIn = (scenarios: readonly string[]) => scenarios.filter((s) => s in expected).sort();

  it('passes the authorization scenarios', async () => {
    const { problems, ran } = await problemsOf(['--suite', 'auth']);
    expect(ran.length).toBeGreaterThan(10);
    expect(Object.keys(problems).sort(), JSON.stringify(problems, null, 2)).toEqual(expectedIn(ran));
  });

  it('passes the other client scenarios: initialize, tool calls, request metadata, SSE retry, elicitation defaults', async () => {
    const runs = await Promise.all(CORE_SCENARIOS.map((scenario) => problemsOf(['--scenario', scenario])));
    const problems = Object.assign({}, ...runs.map((r) => r.problems));
    expect(runs.flatMap((r) => r.ran).sort()).toEqual([...CORE_SCENARIOS].sort());
    expect(Object.keys(problems).sort(), JSON.stringify(problems, null, 2)).toEqual(expectedIn(CORE_SCENARIOS));
  });
});
