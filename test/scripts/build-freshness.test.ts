import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dashboardIsStale, serverIsStale } from '../../scripts/build-freshness.mjs';

describe('npm run build: what is stale', () => {
  let root: string;
  // Explicit times, one minute apart, so the order does not depend on the clock's resolution.
  const at = (minutes: number) => new Date(Date.UTC(2026, 0, 1, 12, minutes));
  const write = (path: string, minutes: number) => {
    const file = join(root, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, path);
    utimesSync(file, at(minutes), at(minutes));
    utimesSync(dirname(file), at(0), at(0));
  };
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'gatehouse-build-'));
    write('package.json', 1);
    write('tsconfig.json', 1);
    write('src/cli/main.ts', 2);
    write('src/web/src/App.tsx', 2);
    for (const dir of ['', 'src', 'src/web']) utimesSync(join(root, dir), at(0), at(0));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('builds both the first time, neither when nothing changed, and only the part whose inputs changed', () => {
    expect([serverIsStale(root), dashboardIsStale(root)]).toEqual([true, true]);

    write('dist/.tsbuildinfo', 10);
    write('dist/web/index.html', 10);
    expect([serverIsStale(root), dashboardIsStale(root)]).toEqual([false, false]);

    write('src/web/src/App.tsx', 11); // a dashboard file: the server's build stays current
    expect([serverIsStale(root), dashboardIsStale(root)]).toEqual([false, true]);

    write('dist/web/index.html', 12);
    write('src/registry/catalog.ts', 13);
    expect([serverIsStale(root), dashboardIsStale(root)]).toEqual([true, false]);

    write('dist/.tsbuildinfo', 14);
    write('package.json', 15); // a dependency changed
    expect(serverIsStale(root)).toBe(true);
  });
});
