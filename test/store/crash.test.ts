/** `kill -9` during a burst of writes leaves a database that opens and holds every acknowledged write. */
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { NODE_TS } from '../helpers/processes.js';
import { describeEachStore } from '../helpers/stores.js';

const WRITER = new URL('../helpers/write-burst-process.ts', import.meta.url).pathname;

describeEachStore('crash safety', (target) => {
  it('keeps every acknowledged write after kill -9 mid-burst', async () => {
    const place = await target.fresh();
    try {
      const [node, ...flags] = NODE_TS;
      const child = spawn(node, [...flags, WRITER, place.dataDir, ...(place.databaseUrl ? [place.databaseUrl] : [])], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const acknowledged: string[] = [];
      let buffer = '';
      await new Promise<void>((resolve, reject) => {
        child.on('error', reject);
        child.on('exit', (code, signal) =>
          signal === 'SIGKILL' ? resolve() : reject(new Error(`writer exited ${code}`)),
        );
        child.stdout.on('data', (chunk: Buffer) => {
          buffer += chunk.toString();
          const lines = buffer.split('\n');
          buffer = lines.pop() ?? '';
          for (const line of lines) if (line.startsWith('burst-')) acknowledged.push(line);
          // Kill in the middle of the burst, not between bursts.
          if (acknowledged.length >= 200 && !child.killed) child.kill('SIGKILL');
        });
      });
      expect(acknowledged.length).toBeGreaterThanOrEqual(200);

      const store = await openStore(place);
      try {
        const keys = new Set((await store.db.selectFrom('settings').select('key').execute()).map((r) => r.key));
        const events = new Set(
          (await store.db.selectFrom('server_events').select('message').execute()).map((r) => r.message),
        );
        for (const key of acknowledged) {
          expect(keys.has(key)).toBe(true);
          expect(events.has(key)).toBe(true);
        }
        // Each transaction is all or nothing: no setting without its event.
        for (const key of keys) if (key.startsWith('burst-')) expect(events.has(key)).toBe(true);
      } finally {
        await store.close();
      }
    } finally {
      await place.cleanup();
    }
  });
});
