/**
 * Start and stop stdio servers over and over, in every way they end (stopped while starting,
 * stopped after a call, closed through the client, crashed, killed past a SIGTERM they ignore),
 * then look for anything left: no process may carry the soak's marker, and the spawner may not
 * think any child is still alive.
 */
import { describe, expect, it } from 'vitest';
import { connectStdio, liveStdioChildren, type StdioChild, spawnStdio } from '../../src/upstream/stdio/index.js';
import { cleanUp, fixtureSpec, newMarker } from '../fixtures/stdio/index.js';

const CYCLES = 50;
const CONCURRENCY = 5;

async function cycle(marker: string, i: number): Promise<void> {
  const spec = fixtureSpec(marker, i % 5 === 4 ? ['--grandchild', '--ignore-sigterm'] : ['--grandchild'], {
    label: `soak-${i}`,
  });
  switch (i % 5) {
    case 0: {
      // Stopped before it even finished starting.
      const child = await spawnStdio(spec);
      await child.stop(1000);
      return;
    }
    case 1: {
      const { client, child } = await connectStdio(spec, { timeoutMs: 20_000 });
      await client.callTool({ name: 'echo', arguments: { text: String(i) } });
      await child.stop(1000);
      return;
    }
    case 2: {
      const { client, child } = await connectStdio(spec, { timeoutMs: 20_000 });
      await client.close();
      await child.exited;
      return;
    }
    case 3: {
      const { client, child } = await connectStdio(spec, { timeoutMs: 20_000 });
      await client.callTool({ name: 'crash', arguments: { code: 1 } }).catch(() => {});
      await child.exited;
      return;
    }
    default: {
      let child: StdioChild | undefined;
      try {
        ({ child } = await connectStdio(spec, { timeoutMs: 20_000 }));
      } finally {
        await child?.stop(100);
      }
    }
  }
}

describe('soak', () => {
  it(`${CYCLES} start/stop cycles leave no process behind`, { timeout: 180_000 }, async () => {
    const marker = newMarker();
    let next = 0;
    const failures: unknown[] = [];
    let leftovers: Record<string, number[]>;
    try {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (let i = next++; i < CYCLES; i = next++) {
            await cycle(marker, i).catch((error: unknown) => failures.push(error));
          }
        }),
      );
    } finally {
      // Everything should be gone already; this waits briefly, then kills (and reports) what is not.
      leftovers = await cleanUp([], [marker]);
    }
    expect(failures).toEqual([]);
    expect(leftovers).toEqual({});
    expect(liveStdioChildren().filter((c) => c.label.startsWith('soak-'))).toEqual([]);
  });
});
