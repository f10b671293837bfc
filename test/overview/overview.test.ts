/** `GET /api/overview`: the Overview page's numbers, aggregated in SQL on both stores. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AuditLog, type AuditRow } from '../../src/audit/log.js';
import { AuditRetention } from '../../src/audit/retention.js';
import { overview, quantileOf } from '../../src/overview/aggregate.js';
import { rebuildRollup } from '../../src/overview/rollup.js';
import { SettingsService } from '../../src/settings/service.js';
import type { Store } from '../../src/store/db.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';

describeEachStore('the overview route', (target) => {
  let gw: TestGateway;
  const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
  const MIN = 60_000;

  beforeAll(async () => {
    gw = await startTestGateway(target);
    const call = (
      at: string,
      server: string,
      tool: string,
      verdict: string,
      outcome: string,
      latency: number | null,
    ): AuditRow => ({
      at,
      kind: 'call',
      action: 'tool.call',
      actor_id: 'tok',
      actor_name: 'agent',
      server_id: server,
      tool,
      verdict,
      approval_id: null,
      outcome,
      latency_ms: latency,
      request_bytes: null,
      response_bytes: null,
      args_digest: null,
      data: null,
    });
    // Through the audit's group commit, which keeps the day's rollups.
    const { audit } = gw.gateway;
    for (const row of [
      call(ago(5 * MIN), 'alpha', 'echo', 'allow', 'ok', 3),
      call(ago(5 * MIN), 'alpha', 'echo', 'allow', 'ok', 3),
      call(ago(30 * MIN), 'alpha', 'add', 'allow', 'upstream_timeout', 40),
      call(ago(31 * MIN), 'alpha', 'echo', 'allow', 'tool_error', 900),
      call(ago(31 * MIN), 'beta', 'write', 'gated', 'pending_approval', null),
      call(ago(120 * MIN), 'beta', 'write', 'allow', 'ok', 12), // in the day, not the hour
      call(ago(3 * 24 * 60 * MIN), 'beta', 'write', 'allow', 'ok', 12), // in neither
      { ...call(ago(MIN), 'alpha', 'x', 'allow', 'ok', 1), kind: 'admin' }, // not a call
    ])
      void audit.enqueue(row);
    await audit.flush();
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('counts the last hour by minute, verdict and outcome; latency percentiles and errors per server', async () => {
    const response = await gw.request('GET', '/api/overview');
    expect(response.statusCode, response.body).toBe(200);
    const hour = response.json();
    expect(hour).toMatchObject({ window: 'hour', bucketMinutes: 1 });
    expect(hour.series.reduce((n: number, b: { total: number }) => n + b.total, 0)).toBe(5);
    const first = hour.series.at(-1);
    expect(first.at).toMatch(/:00\.000Z$/);
    expect(first).toMatchObject({ total: 2, verdicts: { allow: 2 }, outcomes: { ok: 2 } });
    expect(hour.servers).toEqual([
      { id: 'alpha', calls: 4, errors: 2, p50Ms: 5, p95Ms: 1000 },
      { id: 'beta', calls: 1, errors: 0, p50Ms: null, p95Ms: null },
    ]);
    expect(hour.topTools[0]).toEqual({ server: 'alpha', tool: 'echo', calls: 3 });
    expect(hour.approvals).toEqual({ pending: 0, oldest: [] });
    expect(hour.quarantined).toEqual({ total: 0, items: [] });

    const day = (await gw.request('GET', '/api/overview?window=day')).json();
    expect(day).toMatchObject({ window: 'day', bucketMinutes: 10 });
    expect(day.series.reduce((n: number, b: { total: number }) => n + b.total, 0)).toBe(6);
    expect(day.servers.find((s: { id: string }) => s.id === 'beta')).toMatchObject({ calls: 2, p50Ms: 20 });
    expect((await gw.request('GET', '/api/overview?window=week')).json().error.code).toBe('validation_error');
  });

  it('takes percentiles from the histogram counts', () => {
    expect(quantileOf([], 0.5)).toBeNull();
    expect(quantileOf([0, 0, 2, 0, 0, 1, 0, 0, 0, 1], 0.5)).toBe(5);
    expect(quantileOf([0, 0, 2, 0, 0, 1, 0, 0, 0, 1], 0.95)).toBe(1000);
  });
});

describeEachStore('the day overview from its rollups', (target) => {
  // Ragged on purpose: the window runs from 2026-11-30T12:30 (ten-minute rows to 13:00), whole hours to
  // 12:00 today (hour rows), then ten-minute rows again.
  const NOW = new Date('2026-12-01T12:34:56.789Z');
  const HOUR = 3_600_000;
  let base: Awaited<ReturnType<typeof freshStore>>;
  afterAll(async () => {
    await base?.cleanup();
  });

  /** Deterministic pseudo-random numbers (a seeded LCG), so a failure replays. */
  function random(seed: number): () => number {
    let x = seed;
    return () => {
      x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
      return x / 2_147_483_648;
    };
  }
  const pick = <T>(r: () => number, items: readonly T[]): T => items[Math.floor(r() * items.length)] as T;

  function callRow(r: () => number, at: number): AuditRow {
    return {
      at: new Date(at).toISOString(),
      kind: r() < 0.05 ? 'admin' : 'call',
      action: 'hub.call',
      actor_id: 'tok',
      actor_name: 'agent',
      server_id: pick(r, ['alpha', 'beta', 'gamma', 'delta', null]),
      tool: pick(r, ['echo', 'add', 'write', 'read', null]),
      verdict: pick(r, ['allow', 'allow', 'allow', 'gated', 'blocked', 'unknown_tool', null]),
      approval_id: null,
      outcome: pick(r, ['ok', 'ok', 'ok', 'ok', 'pending_approval', 'upstream_timeout', 'tool_error', null]),
      latency_ms: r() < 0.1 ? null : Math.floor(r() ** 3 * 70_000),
      request_bytes: null,
      response_bytes: null,
      args_digest: null,
      data: null,
    };
  }

  const dump = async (store: Store) => ({
    calls: await store.db
      .selectFrom('audit_rollup_calls')
      .selectAll()
      .orderBy('period')
      .orderBy('verdict')
      .orderBy('outcome')
      .execute(),
    servers: await store.db
      .selectFrom('audit_rollup_servers')
      .selectAll()
      .orderBy('grain_minutes')
      .orderBy('period')
      .orderBy('server_id')
      .execute(),
    tools: await store.db
      .selectFrom('audit_rollup_tools')
      .selectAll()
      .orderBy('grain_minutes')
      .orderBy('period')
      .orderBy('server_id')
      .orderBy('tool')
      .execute(),
  });

  it('agrees with the rows (kept by the group commit, rebuilt by the backfill, cut by retention)', async () => {
    base = await freshStore(target);
    const { store } = base;
    const r = random(21);
    const audit = new AuditLog(store);
    // 600 rows over the last 26 hours, in group commits of random sizes; the window's edges exactly.
    const since = Date.parse('2026-11-30T12:30:00.000Z');
    const times = [
      ...Array.from({ length: 600 }, () => NOW.getTime() - Math.floor(r() * 26 * HOUR)),
      since,
      since - 1,
      NOW.getTime(),
    ];
    while (times.length > 0) {
      for (const at of times.splice(0, 1 + Math.floor(r() * 40))) void audit.enqueue(callRow(r, at));
      await audit.flush();
    }

    const fromRollup = await overview(store.db, 'day', NOW);
    expect(fromRollup.since).toBe('2026-11-30T12:30:00.000Z');
    expect(fromRollup.servers.length).toBe(5);
    expect(fromRollup.series.reduce((n, b) => n + b.total, 0)).toBeGreaterThan(450);
    expect(fromRollup).toEqual(await overview(store.db, 'day', NOW, 'rows'));

    // The migration's backfill counts the same rows into the same rollup rows.
    const kept = await dump(store);
    await rebuildRollup(store.db);
    expect(await dump(store)).toEqual(kept);

    // Retention (1 day) deletes rows before 2026-11-30T12:00 and the rollups of those hours, nothing else.
    const settings = new SettingsService(store);
    await settings.patch({ 'audit.retentionDays': 1 }, 'test');
    const deleted = await new AuditRetention({ store, settings, now: () => NOW.getTime() }).runOnce();
    expect(deleted).toBeGreaterThan(0);
    const after = await dump(store);
    expect(after.servers.some((s) => s.period < '2026-11-30T12')).toBe(false);
    expect(after.servers.some((s) => s.period === '2026-11-30T12')).toBe(true);
    await rebuildRollup(store.db);
    expect(await dump(store)).toEqual(after);
    expect(await overview(store.db, 'day', NOW)).toEqual(fromRollup);
  });
});
