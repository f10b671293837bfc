/** The pure parts: the line splitter, `/proc/<pid>/stat` parsing, group and tree listing. */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  descendantsOf,
  listGroupPids,
  parseProcStat,
  processAlive,
  processGroupAlive,
  procStartTime,
  readProcStat,
} from '../../src/upstream/stdio/index.js';
import { LineSplitter } from '../../src/upstream/stdio/lines.js';
import { waitFor } from '../fixtures/stdio/index.js';

function split(chunks: string[], maxLineBytes: number, mode: 'strict' | 'truncate') {
  const lines: Array<[string, boolean]> = [];
  const overflows: number[] = [];
  const splitter = new LineSplitter({
    maxLineBytes,
    mode,
    onLine: (line, truncated) => lines.push([line, truncated]),
    onOverflow: (bytes) => overflows.push(bytes),
  });
  for (const chunk of chunks) splitter.push(Buffer.from(chunk));
  splitter.end();
  return { lines, overflows, splitter };
}

describe('LineSplitter', () => {
  it('splits across chunk boundaries, strips CR, keeps empty lines, flushes the tail', () => {
    const { lines } = split(['ab', 'c\nde', 'f\r\n\n', 'gh\n', 'tail'], 100, 'strict');
    expect(lines.map(([l]) => l)).toEqual(['abc', 'def', '', 'gh', 'tail']);
  });

  it('strict: a line over the limit is an overflow and nothing more is delivered', () => {
    const { lines, overflows, splitter } = split(['ok\n', '12345', '6789\n', 'after\n'], 8, 'strict');
    expect(lines).toEqual([['ok', false]]);
    expect(overflows).toEqual([9]);
    expect(splitter.finished).toBe(true);
  });

  it('strict: a line of exactly the limit passes', () => {
    const { lines, overflows } = split(['12345678\n'], 8, 'strict');
    expect(lines).toEqual([['12345678', false]]);
    expect(overflows).toEqual([]);
  });

  it('truncate: a long line is cut, flagged, and the next line is whole', () => {
    const { lines } = split(['abcdefghij', 'klm\nnext\n'], 4, 'truncate');
    expect(lines).toEqual([
      ['abcd', true],
      ['next', false],
    ]);
  });

  it('does not copy a huge line chunk by chunk (linear time)', () => {
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let got = 0;
    const splitter = new LineSplitter({ maxLineBytes: 64 << 20, mode: 'strict', onLine: (l) => (got = l.length) });
    const started = Date.now();
    for (let i = 0; i < 512; i++) splitter.push(chunk);
    splitter.push(Buffer.from('\n'));
    expect(got).toBe(512 * 64 * 1024);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe('/proc', () => {
  it('parses a stat line whose command name has spaces and parentheses', () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    fields[0] = 'S';
    fields[1] = '77'; // ppid (field 4)
    fields[2] = '1234'; // pgrp (field 5)
    fields[3] = '1234'; // session (field 6)
    fields[19] = '987654'; // starttime (field 22)
    const stat = parseProcStat(`1234 (my (weird) name) ${fields.join(' ')}`);
    expect(stat).toEqual({ pid: 1234, state: 'S', ppid: 77, pgrp: 1234, session: 1234, startTime: 987654 });
    expect(parseProcStat('garbage')).toBeUndefined();
  });

  it('reads this process, and tells a reused pid apart by its start time', () => {
    const self = readProcStat(process.pid);
    expect(self?.pid).toBe(process.pid);
    expect(self?.ppid).toBe(process.ppid);
    expect(procStartTime(process.pid)).toBe(self?.startTime);
    expect(processAlive(process.pid)).toBe(true);
    expect(processAlive(process.pid, self!.startTime)).toBe(true);
    expect(processAlive(process.pid, self!.startTime + 1)).toBe(false);
  });

  it('lists a group and a tree, and sees them go', async () => {
    const leader = spawn('sh', ['-c', 'sleep 30 & sleep 30 & wait'], { detached: true, stdio: 'ignore' });
    const pgid = leader.pid!;
    try {
      expect(await waitFor(() => listGroupPids(pgid).length === 3, 3000)).toBe(true);
      expect(descendantsOf(pgid).map((s) => s.pgrp)).toEqual([pgid, pgid]);
      expect(processGroupAlive(pgid)).toBe(true);
    } finally {
      process.kill(-pgid, 'SIGKILL');
    }
    // Zombies count as gone (where nothing reaps orphans, they stay zombies).
    expect(await waitFor(() => !processGroupAlive(pgid), 3000)).toBe(true);
    expect(listGroupPids(pgid)).toEqual([]);
  });
});
