import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ScopedStorage } from '../../src/async-scope.js';
import { continuationAsyncId } from '../helpers/async-hooks.js';

describe('ScopedStorage', () => {
  it('gives a scope its store across awaits, timers and the promises it starts; overlapping scopes keep their own', async () => {
    const storage = new ScopedStorage<string>();
    const seen: Array<string | undefined> = [];
    const scope = (name: string, ms: number) =>
      storage.run(name, async () => {
        await sleep(ms);
        seen.push(storage.getStore());
        await new Promise<void>((resolve) => setTimeout(resolve, ms));
        seen.push(await Promise.resolve().then(() => storage.getStore()));
        return name;
      });
    await expect(Promise.all([scope('a', 20), scope('b', 5)])).resolves.toEqual(['a', 'b']);
    expect(seen.sort()).toEqual(['a', 'a', 'b', 'b']);
    expect(storage.getStore()).toBeUndefined();
  });

  it('holds the promise hook only while a scope is open: after the last of overlapping scopes settles, none is left', async () => {
    const storage = new ScopedStorage<number>();
    expect(await continuationAsyncId()).toBe(0);
    let finishFirst!: () => void;
    const first = storage.run(1, () => new Promise<void>((resolve) => (finishFirst = resolve)));
    const second = storage.run(2, async () => {
      await sleep(1);
      throw new Error('refused');
    });
    await expect(second).rejects.toThrow('refused');
    // The first scope is still open: its store must still reach the promises it starts.
    expect(await continuationAsyncId()).not.toBe(0);
    finishFirst();
    await first;
    expect(await continuationAsyncId()).toBe(0);
    // A new scope installs it again, and a synchronous throw closes its scope too.
    await storage.run(3, async () => {
      await null;
      expect(storage.getStore()).toBe(3);
    });
    expect(() =>
      storage.run(4, () => {
        throw new Error('at once');
      }),
    ).toThrow('at once');
    expect(await continuationAsyncId()).toBe(0);
  });
});
