/**
 * Re-sealing beside live traffic, on SQLite and PostgreSQL: while `resealAll` walks 120 upstream grants in
 * batches of one row, a writer keeps replacing grants' tokens (sealed with the current key, as a refresh
 * does). A row rewritten meanwhile is left as the writer wrote it (compare-and-set), never put back to the
 * value the re-seal read; at the end every grant opens to its newest tokens and nothing is left under the
 * old key. A second re-seal started while one runs is refused (one at a time across replicas).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { inventory, resealAll } from '../../src/secrets/reseal.js';
import { sealKeyFrom } from '../../src/secrets/seal.js';
import type { Store } from '../../src/store/db.js';
import { openStore } from '../../src/store/db.js';
import { type GrantKey, GrantStore } from '../../src/upstream-auth/grants.js';
import { describeEachStore, type StoreTarget } from '../helpers/stores.js';

const GRANTS = 120;
const ISSUER = 'https://as.example.com';
const METADATA = { issuer: ISSUER, authorization_endpoint: `${ISSUER}/a`, token_endpoint: `${ISSUER}/t` };
const SERVER_URL = 'https://mcp.example.com/mcp';

describeEachStore('re-sealing beside live writes', (target: StoreTarget) => {
  let place: Awaited<ReturnType<StoreTarget['fresh']>>;
  let store: Store;
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);
  const old = sealKeyFrom(k1);
  const ring = sealKeyFrom(k2, [k1]);
  const keyOf = (i: number): GrantKey => ({ serverId: 'srv', serverUrl: SERVER_URL, subject: `user:u${i}` });

  beforeAll(async () => {
    place = await target.fresh();
    store = await openStore({ dataDir: place.dataDir, databaseUrl: place.databaseUrl });
    const at = new Date().toISOString();
    await store.db
      .insertInto('servers')
      .values({
        id: 'srv',
        name: 'srv',
        description: null,
        transport: 'streamable-http',
        url: SERVER_URL,
        command: null,
        args: '[]',
        headers: '{}',
        env: '{}',
        auth: '{"type":"oauth","mode":"per-user","grant":"authorization_code"}',
        enabled: 1,
        private_network: 0,
        trust_new_tools: 0,
        exposure: '["default"]',
        tool_policy: '{}',
        options: '{}',
        policy_version: 1,
        pinned_at: null,
        status: 'unknown',
        last_error: null,
        last_tested_at: null,
        latency_ms: null,
        protocol_era: null,
        discover: null,
        discovered_tools: '[]',
        discovered_prompts: '[]',
        discovered_resources: '[]',
        spec: null,
        source_kind: 'url',
        source_url: null,
        author: null,
        installed_at: at,
        updated_at: at,
      })
      .execute();
    const grants = new GrantStore(store, old);
    for (let i = 0; i < GRANTS; i++) {
      await grants.save(
        keyOf(i),
        { issuer: ISSUER, clientId: 'c', metadata: METADATA as never, resource: keyOf(i).serverUrl },
        { accessToken: `access-${i}-0`, refreshToken: `refresh-${i}-0`, expiresIn: 3600, scopes: [] },
      );
    }
  });
  afterAll(async () => {
    await store?.close();
    await place?.cleanup();
  });

  it('never overwrites a value written meanwhile, and leaves nothing under the old key', async () => {
    const live = new GrantStore(store, ring);
    const latest = new Map<number, number>();
    let stop = false;
    const writer = (async () => {
      for (let round = 1; !stop; round++) {
        for (let i = round % 7; i < GRANTS && !stop; i += 7) {
          await live.save(
            keyOf(i),
            { issuer: ISSUER, clientId: 'c', metadata: METADATA as never, resource: keyOf(i).serverUrl },
            { accessToken: `access-${i}-${round}`, refreshToken: `refresh-${i}-${round}`, expiresIn: 3600, scopes: [] },
          );
          latest.set(i, round);
        }
      }
    })();
    const running = resealAll(store, ring, 1);
    // One re-seal at a time: a second one while the first holds the lock is refused.
    await expect(resealAll(store, ring, 1)).rejects.toMatchObject({ code: 'conflict' });
    const report = await running;
    stop = true;
    await writer;
    expect(report.failed).toBe(0);
    expect(latest.size).toBeGreaterThan(0);

    // Rows the writer changed after the re-seal read them were left to the writer (they are under K2 anyway).
    const again = await resealAll(store, ring, 50);
    expect(again.failed).toBe(0);
    const counts = await inventory(store, ring);
    expect(counts.keys).toEqual([
      { kid: ring.kid, current: true, values: GRANTS * 2 },
      { kid: old.kid, current: false, values: 0 },
    ]);
    expect(counts.retirable).toBe(true);

    // Every grant holds the newest tokens its writer wrote, opened with K2 alone.
    const only = new GrantStore(store, sealKeyFrom(k2));
    for (let i = 0; i < GRANTS; i++) {
      const round = latest.get(i) ?? 0;
      const grant = await only.open(keyOf(i));
      expect([i, grant?.accessToken, grant?.refreshToken]).toEqual([
        i,
        `access-${i}-${round}`,
        `refresh-${i}-${round}`,
      ]);
    }
  });
});
