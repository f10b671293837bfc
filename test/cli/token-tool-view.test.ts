/** `gatehouse token create --tool-view` (issue 22): stored on an agent token, refused when it is not a view or not an agent. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from './helpers.js';

describe('gatehouse token create --tool-view', { timeout: 120_000 }, () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-token-view-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates an agent token in search mode, and refuses a bad view or another role', async () => {
    const create = (...flags: string[]) => runCli(['token', 'create', '--data-dir', dir, ...flags]);
    const created = await create('--role', 'agent', '--name', 'big', '--tool-view', 'search');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ role: 'agent', name: 'big', toolView: 'search' });

    const bad = await create('--role', 'agent', '--name', 'x', '--tool-view', 'everything');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--tool-view must be all, search or toolset:<name>');
    const operator = await create('--role', 'operator', '--name', 'op', '--tool-view', 'search');
    expect(operator.code).not.toBe(0);
    expect(operator.stderr).toContain('Only agent tokens carry a tool view');
  });
});
