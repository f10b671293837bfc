/**
 * The conformance suite's client authorization scenarios with Gatehouse as the client (issue 18): the suite starts
 * each scenario's MCP server and authorization server and runs `gatehouse-client.ts`, which drives a real gateway
 * through install → 401 → discovery → registration → consent → callback → calls, as an operator and an agent would.
 * Scenarios listed in `expected-client-failures.yaml` (with the reason) may fail; any other failure fails this test,
 * and so does a listed scenario that starts passing.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import { parse } from 'yaml';
import { runSuite } from './suite.js';

const require = createRequire(import.meta.url);
const CLIENT = fileURLToPath(new URL('./gatehouse-client.ts', import.meta.url));
/** tsx by absolute URL: the suite runs the command in its own working folder. */
const TSX = pathToFileURL(require.resolve('tsx')).href;
/** `<scenario>-<ISO timestamp with dashes>` */
const RESULT_DIR = /^(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/;

interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

it('passes the suite’s client authorization scenarios with Gatehouse as the client', { timeout: 600_000 }, async () => {
  const expected = parse(await readFile(new URL('./expected-client-failures.yaml', import.meta.url), 'utf8')) as Record<
    string,
    string
  >;
  const out = await mkdtemp(path.join(tmpdir(), 'gatehouse-conformance-client-'));
  try {
    const command = `"${process.execPath}" --import ${TSX} "${CLIENT}"`;
    const output = await runSuite(
      ['client', '--command', command, '--suite', 'auth', '-o', out, '--timeout', '90000'],
      out,
    );
    const results = path.join(out, 'auth');
    const entries = await readdir(results).catch(() => [] as string[]);
    expect(entries.length, output.slice(-3000)).toBeGreaterThan(10);
    const failing: Record<string, string[]> = {};
    for (const entry of entries) {
      const scenario = RESULT_DIR.exec(entry)?.[1];
      if (!scenario) continue;
      const raw = await readFile(path.join(results, entry, 'checks.json'), 'utf8').catch(
        () => '[{"id":"no-checks","status":"FAILURE"}]',
      );
      const problems = (JSON.parse(raw) as Check[])
        .filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')
        .map((c) => `${c.id} ${c.status}: ${(c.errorMessage ?? '').slice(0, 200)}`);
      if (problems.length > 0) failing[`auth/${scenario}`] = problems;
    }
    expect(Object.keys(failing).sort(), JSON.stringify(failing, null, 2)).toEqual(Object.keys(expected).sort());
  } finally {
    await rm(out, { recursive: true, force: true });
  }
});
