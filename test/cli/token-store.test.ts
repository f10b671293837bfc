import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from './helpers.js';

describe('gatehouse token: which store', { timeout: 120_000 }, () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-token-store-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('warns on stderr when it creates a new store, and names the store it opened afterwards', async () => {
    const dataDir = join(dir, 'elsewhere');
    const file = join(dataDir, 'gatehouse.db');
    const first = await runCli(['token', 'create', '--role', 'admin', '--name', 'me', '--data-dir', dataDir]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toBe(
      `gatehouse: warning: there was no store at ${file}; created a new, empty one. ` +
        'If your gateway keeps its data elsewhere, run this where it runs or pass --data-dir (GATEHOUSE_DATA_DIR).\n',
    );
    expect(JSON.parse(first.stdout)).toMatchObject({ role: 'admin', name: 'me' });

    const second = await runCli(['token', 'list', '--data-dir', dataDir]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toBe(`gatehouse: using the store at ${file}\n`);
    expect(second.stdout).toMatch(/\tadmin\tme\t/);
  });
});
