/**
 * The separate-process fixture the benchmark spawns: it prints its URL as one JSON line, serves
 * real MCP, and reports its counters when told to stop.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { Cleanup, makePool } from './helpers.js';

const cleanup = new Cleanup();
const children: ChildProcess[] = [];
afterEach(async () => {
  await cleanup.run();
  // SIGTERM, not SIGKILL: tsx passes it on to the node process that actually serves.
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGTERM');
});

/** Spawns the fixture with the tsx binary directly (npx does not pass SIGTERM on to it). */
function spawnFixture(...args: string[]) {
  const child = spawn('node_modules/.bin/tsx', ['test/fixtures/upstream-process.ts', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const nextLine = async () => JSON.parse((await lines.next()).value as string) as Record<string, unknown>;
  return { child, nextLine, stderr: () => stderr };
}

describe('upstream-process fixture', () => {
  it.each(['legacy', 'modern'])('serves the %s era from its own process', async (era) => {
    const { child, nextLine } = spawnFixture(era);
    const hello = await nextLine();
    expect(hello).toMatchObject({ era, url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/) });
    // The serving process (tsx runs it as its child): the pid a benchmark reads CPU time from.
    expect(hello.pid).toEqual(expect.any(Number));

    const pool = cleanup.add(makePool());
    const url = hello.url as string;
    expect((await pool.listTools({ url })).tools.map((t) => t.name)).toContain('echo');
    for (let i = 0; i < 3; i++) await pool.callTool({ url }, 'echo', { text: `${i}` });
    await pool.close();

    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const bye = await nextLine();
    expect(bye).toMatchObject({ stopped: true, requests: { 'tools/call': 3, 'server/discover': 1 } });
    expect(bye.sessionsOpened).toBe(era === 'legacy' ? 1 : 0);
    expect(await exited).toEqual([0, null]);
  });

  it('refuses an unknown era', async () => {
    const { child, stderr } = spawnFixture('nonsense');
    expect(await once(child, 'exit')).toEqual([2, null]);
    expect(stderr()).toContain('usage: upstream-process.ts <modern|legacy|dual>');
  });
});
