/**
 * The list watches' own rules, with the registry and the pool replaced by recorders (their real
 * behaviour is covered end to end in `list-watch.test.ts`): how notifications become refreshes,
 * what a close cancels, and that a store failure never drops a watch.
 */
import { afterEach, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import type { Logger } from '../../src/logging.js';
import { ListWatchers, type ListWatchersOptions } from '../../src/registry/list-watch.js';
import type { ServerStore } from '../../src/registry/records.js';
import type { RefreshTrigger } from '../../src/registry/service.js';
import type { ServerTable } from '../../src/store/schema.js';
import type { ListWatchHandle, UpstreamPool } from '../../src/upstream/index.js';
import { eventually } from '../helpers/eventually.js';

const silent = { warn() {}, debug() {}, info() {}, error() {} } as unknown as Logger;
const row = {
  id: 's',
  enabled: 1,
  transport: 'streamable-http',
  pinned_at: '2026-11-30T00:00:00.000Z',
  auth: '{"type":"none"}',
} as ServerTable;

/** A gate a fake refresh waits on. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

let watchers: ListWatchers | undefined;
afterEach(async () => {
  await watchers?.close();
  watchers = undefined;
});

function make(overrides: Partial<ListWatchersOptions> & { getRow?: (id: string) => Promise<ServerTable> } = {}) {
  const connects: string[] = [];
  const records = {
    all: async () => [{ id: 's' }],
    getRow: overrides.getRow ?? (async () => row),
    connectionOf: () => ({
      transport: 'streamable-http',
      url: 'http://127.0.0.1:9/mcp',
      headers: {},
      privateNetwork: false,
    }),
  } as unknown as ServerStore;
  const pool = {
    async watchLists(): Promise<ListWatchHandle> {
      connects.push('s');
      return { ended: new Promise(() => {}), ping: async () => {}, close: async () => {} };
    },
  } as unknown as UpstreamPool;
  watchers = new ListWatchers({
    records,
    poolFor: () => pool,
    refresh: async () => undefined,
    logger: silent,
    timings: { debounceMs: 5, retryBaseMs: 10, retryMaxMs: 20, minRefreshIntervalMs: 0 },
    ...overrides,
  });
  return { watchers, connects };
}

it('makes one refresh of a burst, and one more for what arrived while it ran', async () => {
  const runs: RefreshTrigger[] = [];
  const first = gate();
  const { watchers } = make({
    refresh: async (_id, trigger) => {
      runs.push(trigger);
      if (runs.length === 1) await first.opened;
    },
  });
  for (let i = 0; i < 20; i++) watchers.schedule('s', 'list_changed');
  await eventually(() => expect(runs).toHaveLength(1));
  for (let i = 0; i < 20; i++) watchers.schedule('s', 'reconnected');
  first.open();
  await eventually(() => expect(runs).toEqual(['list_changed', 'reconnected']));
});

it('starts no second refresh within the minimum interval, however often the upstream says so', async () => {
  let runs = 0;
  const { watchers } = make({
    refresh: async () => {
      runs += 1;
    },
    timings: { debounceMs: 5, minRefreshIntervalMs: 10 * 60_000 },
  });
  watchers.schedule('s', 'list_changed');
  await eventually(() => expect(runs).toBe(1));
  for (let i = 0; i < 50; i++) watchers.schedule('s', 'list_changed');
  // The next one is due ten minutes after the first: nothing else can have started.
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(runs).toBe(1);
});

it('aborts the refreshes in flight when it closes, and schedules nothing after', async () => {
  let seen: AbortSignal | undefined;
  let runs = 0;
  const { watchers } = make({
    refresh: (_id, _trigger, signal) => {
      runs += 1;
      seen = signal;
      return new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined)));
    },
  });
  watchers.schedule('s', 'list_changed');
  await eventually(() => expect(seen).toBeDefined());
  await watchers.close();
  expect(seen?.aborted).toBe(true);
  watchers.schedule('s', 'list_changed');
  expect(runs).toBe(1);
});

it('keeps a watch when the store fails to read its server, and drops it only when the server is gone', async () => {
  let mode: 'ok' | 'failing' | 'gone' = 'ok';
  const { watchers, connects } = make({
    getRow: async () => {
      if (mode === 'failing') throw new Error('SQLITE_BUSY: database is locked');
      if (mode === 'gone') throw new GatehouseError('mcp.not_found');
      return row;
    },
  });
  await watchers.sync('s');
  await eventually(() => expect(connects).toHaveLength(1));
  expect(watchers.watched()).toEqual(['s']);

  mode = 'failing';
  const retrying = watchers.sync('s');
  await new Promise((resolve) => setTimeout(resolve, 30));
  expect(watchers.watched()).toEqual(['s']);
  mode = 'ok';
  await retrying;
  expect(watchers.watched()).toEqual(['s']);
  expect(connects).toHaveLength(1); // the same watch all along, never restarted

  mode = 'gone';
  await watchers.sync('s');
  expect(watchers.watched()).toEqual([]);
});
