import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/identity/index.js';
import { openStore } from '../../src/store/db.js';
import { TEST_SECRET_KEY } from '../helpers/gateway.js';
import { runCli } from './helpers.js';

describe('gatehouse serve on a port already taken', { timeout: 120_000 }, () => {
  let dir: string;
  let taken: Server;
  let port: number;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-serve-port-'));
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    port = (taken.address() as { port: number }).port;
  });
  afterEach(async () => {
    await new Promise<void>((resolve) => taken.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails with one line naming --port and GATEHOUSE_PORT, and still shows the admin token it created', async () => {
    const dataDir = join(dir, 'data');
    const run = await runCli(['serve', '--port', String(port), '--data-dir', dataDir], {
      GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
      GATEHOUSE_LOG_LEVEL: 'silent',
    });
    expect(run.code).toBe(2);
    const lines = run.stderr.trim().split('\n');
    expect(lines.at(-1)).toBe(
      `gatehouse: Port ${port} is already in use on 127.0.0.1; choose another with --port or GATEHOUSE_PORT.`,
    );
    expect(run.stderr).not.toMatch(/\n\s+at /); // no stack trace
    const token = /first admin token[^\n]*\n\n {2}(\S+)\n/.exec(run.stderr)?.[1];
    expect(token).toBeDefined();
    // The token shown is the one the store keeps (so it works on the next start).
    const store = await openStore({ dataDir });
    try {
      const row = await store.db.selectFrom('tokens').selectAll().where('role', '=', 'admin').executeTakeFirstOrThrow();
      expect(row.hash).toBe(hashToken(token as string));
    } finally {
      await store.close();
    }
  });
});
