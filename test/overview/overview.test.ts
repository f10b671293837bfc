/** `GET /api/overview`: the Overview page's numbers, aggregated in SQL on both stores. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { quantileOf } from '../../src/overview/aggregate.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

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
    ) => ({
      at,
      kind: 'call',
      action: 'tool.call',
      actor_id: 'tok',
      actor_name: 'agent',
      server_id: server,
      tool,
      verdict,
      outcome,
      latency_ms: latency,
    });
    await gw.gateway.store.db
      .insertInto('audit_events')
      .values([
        call(ago(5 * MIN), 'alpha', 'echo', 'allow', 'ok', 3),
        call(ago(5 * MIN), 'alpha', 'echo', 'allow', 'ok', 3),
        call(ago(30 * MIN), 'alpha', 'add', 'allow', 'upstream_timeout', 40),
        call(ago(31 * MIN), 'alpha', 'echo', 'allow', 'tool_error', 900),
        call(ago(31 * MIN), 'beta', 'write', 'gated', 'pending_approval', null),
        call(ago(120 * MIN), 'beta', 'write', 'allow', 'ok', 12), // in the day, not the hour
        call(ago(3 * 24 * 60 * MIN), 'beta', 'write', 'allow', 'ok', 12), // in neither
        { ...call(ago(MIN), 'alpha', 'x', 'allow', 'ok', 1), kind: 'admin' }, // not a call
      ])
      .execute();
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
