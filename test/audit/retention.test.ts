/**
 * Audit retention: rows older than `audit.retentionDays` are deleted in bounded batches (the audit's
 * group commit gets through between two), 0 keeps everything, and `/metrics` shows the table's size.
 */
import { afterEach, expect, it } from 'vitest';
import { AuditLog, type AuditRow } from '../../src/audit/log.js';
import { AuditRetention } from '../../src/audit/retention.js';
import { SettingsService } from '../../src/settings/service.js';
import type { Store } from '../../src/store/db.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';

const DAY_MS = 86_400_000;
const NOW = Date.parse('2026-12-01T12:00:00Z');

function row(at: number, action: string): AuditRow {
  return {
    at: new Date(at).toISOString(),
    kind: 'admin',
    action,
    actor_id: null,
    actor_name: null,
    server_id: null,
    tool: null,
    verdict: null,
    approval_id: null,
    outcome: 'ok',
    latency_ms: null,
    request_bytes: null,
    response_bytes: null,
    args_digest: null,
    data: null,
  };
}

async function insert(store: Store, rows: AuditRow[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 500)
    await store.db
      .insertInto('audit_events')
      .values(rows.slice(i, i + 500))
      .execute();
}

const actions = async (store: Store) =>
  (await store.db.selectFrom('audit_events').select('action').execute()).map((r) => r.action);

describeEachStore('audit retention', (target) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it('deletes rows past the retention in bounded batches, letting the group commit through between them', async () => {
    const base = await freshStore(target);
    cleanups.push(() => base.cleanup());
    const { store } = base;
    const settings = new SettingsService(store);
    await settings.patch({ 'audit.retentionDays': 30 }, 'test');
    await insert(store, [
      ...Array.from({ length: 1_250 }, (_, i) => row(NOW - 31 * DAY_MS - i * 1000, 'old')),
      ...Array.from({ length: 20 }, (_, i) => row(NOW - 29 * DAY_MS + i * 1000, 'recent')),
    ]);
    const audit = new AuditLog(store);
    const batches: number[] = [];
    const order: string[] = [];
    let flushed: Promise<void> | undefined;
    const retention = new AuditRetention({
      store,
      settings,
      now: () => NOW,
      batchSize: 300,
      pauseMs: 20,
      onBatch: (deleted) => {
        batches.push(deleted);
        order.push(`batch ${deleted}`);
        if (batches.length === 1) {
          // A call's row arrives while the pass runs: its batch commits before the pass ends.
          audit.enqueue(row(NOW, 'during'));
          flushed = audit.flush().then(() => void order.push('flushed'));
        }
      },
    });
    expect(await retention.runOnce()).toBe(1_250);
    expect(batches).toEqual([300, 300, 300, 300, 50]);
    expect(order.indexOf('flushed')).toBeGreaterThan(-1);
    expect(order.indexOf('flushed')).toBeLessThan(order.length - 1);
    await flushed;
    const left = await actions(store);
    expect(left.filter((a) => a === 'old')).toHaveLength(0);
    expect(left.filter((a) => a === 'recent')).toHaveLength(20);
    expect(left).toContain('during');

    // 0 keeps everything, however old.
    await insert(store, [row(NOW - 3_000 * DAY_MS, 'ancient')]);
    await settings.patch({ 'audit.retentionDays': 0 }, 'test');
    expect(await retention.runOnce()).toBe(0);
    expect(await actions(store)).toContain('ancient');
    await retention.close();
  });

  it('defaults to 90 days, refuses a negative value, and shows the table on /metrics', async () => {
    const gw: TestGateway = await startTestGateway(target);
    cleanups.push(() => gw.close());
    expect((await gw.request('GET', '/api/settings')).json().settings['audit.retentionDays']).toBe(90);
    expect((await gw.request('PATCH', '/api/settings', { body: { 'audit.retentionDays': -1 } })).statusCode).toBe(400);
    await insert(
      gw.gateway.store,
      Array.from({ length: 7 }, (_, i) => row(NOW + i, 'counted')),
    );
    const total = (await actions(gw.gateway.store)).length;
    const metrics = (await gw.request('GET', '/metrics')).body;
    expect(metrics).toMatch(new RegExp(`^gatehouse_audit_events_rows ${total}$`, 'm'));
    expect(metrics).toContain('gatehouse_audit_events_pruned_total');
  });
});
