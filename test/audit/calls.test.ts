import { createHash } from 'node:crypto';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ArgumentFacts, argsDigest } from '../../src/audit/calls.js';
import type { StreamEvent } from '../../src/audit/stream.js';
import type { Store } from '../../src/store/db.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';
import { type AuditRig, auditRig, callEvent, until } from './helpers.js';

const SENTINEL = 'SENTINEL-c0ffee-7731';

async function auditRows(store: Store) {
  return store.db.selectFrom('audit_events').selectAll().where('kind', '=', 'call').orderBy('id').execute();
}

describeEachStore('call audit', (target) => {
  let base: Awaited<ReturnType<typeof freshStore>>;
  let rig: AuditRig;
  beforeEach(async () => {
    base = await freshStore(target);
    rig = await auditRig(base.store, { retryMs: 50 });
  });
  afterEach(async () => {
    rig.close();
    await base.cleanup();
  });

  it('measures the sizes of arguments and result as JSON when the caller gives none', async () => {
    const args = { text: 'héllo' }; // 2 bytes for é: sizes are UTF-8 bytes, not characters
    const result = { content: [{ type: 'text', text: 'héllo' }] };
    // The size comes from the digest's canonical text: keys out of order, escapes, numbers JSON writes long.
    const mixed = { z: [1e21, 9e20, -0, 0.1, 'a"\\\n\u0001/'], a: { ü: '😀', n: null } };
    const notJson = { s: 'lone \ud800' }; // no canonical form (no digest); still measured
    rig.auditor.record(callEvent({ arguments: args, result, requestBytes: undefined, responseBytes: undefined }));
    rig.auditor.record(
      callEvent({ arguments: undefined, result: undefined, requestBytes: undefined, responseBytes: undefined }),
    );
    rig.auditor.record(callEvent({ arguments: mixed, requestBytes: undefined }));
    rig.auditor.record(callEvent({ arguments: notJson, requestBytes: undefined }));
    await rig.auditor.flush();

    const rows = await auditRows(rig.store);
    expect(rows.slice(0, 2).map((row) => [Number(row.request_bytes), Number(row.response_bytes)])).toEqual([
      [Buffer.byteLength(JSON.stringify(args)), Buffer.byteLength(JSON.stringify(result))],
      [2, 0], // missing arguments are `{}`, a missing result nothing
    ]);
    expect(rows.slice(2).map((row) => [Number(row.request_bytes), row.args_digest])).toEqual([
      [Buffer.byteLength(JSON.stringify(mixed)), argsDigest(mixed)],
      [Buffer.byteLength(JSON.stringify(notJson)), null],
    ]);
    expect(argsDigest(mixed)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('reports a row it cannot make (after the call has returned) and still writes the others', async () => {
    const failures: unknown[] = [];
    const own = await auditRig(rig.store, { onError: (error) => failures.push(error) });
    try {
      // A client without an id cannot become a row; the call that recorded it has long returned.
      own.auditor.record(callEvent({ client: undefined as never, tool: 'broken' }));
      own.auditor.record(callEvent({ tool: 'fine' }));
      await own.auditor.flush();
      expect(failures).toHaveLength(1);
      expect((await auditRows(rig.store)).map((row) => row.tool)).toEqual(['fine']);
    } finally {
      own.close();
    }
  });

  it('in metadata mode stores no arguments or results, only their digest', async () => {
    expect((await rig.settings.current())['audit.payloads']).toBe('metadata');
    const args = { query: SENTINEL, password: `pw-${SENTINEL}`, b: [true, null], a: 1 };
    rig.auditor.record(callEvent({ arguments: args, result: { content: [{ type: 'text', text: SENTINEL }] } }));
    await rig.auditor.flush();

    const rows = await auditRows(rig.store);
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(JSON.stringify(row)).not.toContain(SENTINEL);
    expect(row.data).toBeNull();
    expect(row).toMatchObject({
      kind: 'call',
      action: 'hub.call',
      actor_id: 'tok_agent',
      actor_name: 'agent-one',
      server_id: 'files',
      tool: 'read_file',
      verdict: 'allow',
      outcome: 'ok',
    });
    expect(Number(row.latency_ms)).toBe(12);
    expect(Number(row.request_bytes)).toBe(100);
    expect(Number(row.response_bytes)).toBe(200);
    // RFC 8785: keys sorted, no whitespace — computed here by hand, not with the library under test.
    const canonical = `{"a":1,"b":[true,null],"password":"pw-${SENTINEL}","query":"${SENTINEL}"}`;
    expect(row.args_digest).toBe(createHash('sha256').update(canonical).digest('hex'));

    // The live stream carries ids and outcome, never payloads.
    const stream = await rig.events.since(0);
    expect(stream.map((e) => e.type)).toEqual(['tool.called']);
    expect(JSON.stringify(stream)).not.toContain(SENTINEL);
  });

  it('in data mode stores arguments and results redacted, from the next call on', async () => {
    await rig.settings.patch({ 'audit.payloads': 'data' }, 'test');
    rig.auditor.record(
      callEvent({
        arguments: {
          query: 'visible-query',
          password: `pw-${SENTINEL}`,
          api_key: `key-${SENTINEL}`,
          nested: { Authorization: `Bearer ${SENTINEL}`, keep: 'kept', list: [{ clientSecret: SENTINEL, n: 3 }] },
        },
        result: { content: [{ type: 'text', text: 'result-text' }], structuredContent: { accessToken: SENTINEL } },
      }),
    );
    await rig.auditor.flush();

    const [row] = await auditRows(rig.store);
    expect(row).toBeDefined();
    expect(JSON.stringify(row)).not.toContain(SENTINEL);
    const data = JSON.parse(row!.data as string);
    expect(data.arguments).toEqual({
      query: 'visible-query',
      password: '[redacted]',
      api_key: '[redacted]',
      nested: { Authorization: '[redacted]', keep: 'kept', list: [{ clientSecret: '[redacted]', n: 3 }] },
    });
    expect(data.result).toEqual({
      content: [{ type: 'text', text: 'result-text' }],
      structuredContent: { accessToken: '[redacted]' },
    });
    const stream = await rig.events.since(0);
    expect(JSON.stringify(stream)).not.toContain('visible-query');

    // Back to metadata: the very next call keeps nothing.
    await rig.settings.patch({ 'audit.payloads': 'metadata' }, 'test');
    rig.auditor.record(callEvent({ arguments: { query: 'second-call' } }));
    await rig.auditor.flush();
    const rows = await auditRows(rig.store);
    expect(rows[1]?.data).toBeNull();
    expect(JSON.stringify(rows[1])).not.toContain('second-call');
  });

  it('takes the payload mode from the caller when given, without reading settings', async () => {
    rig.auditor.record(callEvent({ payloads: 'data', arguments: { q: 'from-caller' } }));
    await rig.auditor.flush();
    const [row] = await auditRows(rig.store);
    expect(JSON.parse(row!.data as string).arguments).toEqual({ q: 'from-caller' });
  });

  it('commits a burst in one statement, and each call learns when its row is committed', async () => {
    const received: StreamEvent[] = [];
    rig.events.subscribe((event) => received.push(event));
    const committed = [0, 1, 2].map((i) => rig.auditor.record(callEvent({ tool: `t${i}` })));
    expect(rig.counter.insertsInto('audit_events')).toBe(0); // nothing written on the caller's turn
    // Once every promise resolved, every row is in the store, without an explicit flush: an answer sent
    // after awaiting its record is never ahead of its audit row.
    await Promise.all(committed);
    expect(await auditRows(rig.store)).toHaveLength(3);
    // The calls of one turn share one group: one statement.
    expect(rig.counter.insertsInto('audit_events')).toBe(1);
    // The stream's rows follow the batch's (their own write, after it).
    await until(() => received.length === 3);
    expect(rig.counter.insertsInto('stream_events')).toBe(1);
    expect(received.map((e) => e.type)).toEqual(['tool.called', 'tool.called', 'tool.called']);
    expect(received[0]?.data).toMatchObject({
      clientId: 'tok_agent',
      clientName: 'agent-one',
      server: 'files',
      tool: 't0',
      verdict: 'allow',
      outcome: 'ok',
      latencyMs: 12,
      surface: 'hub',
    });
  });

  it('writes many events in few statements and publishes every one as tool.called', async () => {
    const received: StreamEvent[] = [];
    rig.events.subscribe((event) => received.push(event));
    for (let i = 0; i < 1200; i++) {
      rig.auditor.record(callEvent({ tool: `tool-${i}`, verdict: i % 3 === 0 ? 'blocked' : 'allow' }));
    }
    await until(async () => (await auditRows(rig.store)).length === 1200, 5000);
    // Batches of 500: 500 + 500 + 200.
    expect(rig.counter.insertsInto('audit_events')).toBeLessThanOrEqual(3);
    expect(rig.counter.insertsInto('stream_events')).toBeLessThanOrEqual(3);
    await until(() => received.length === 1200, 5000);
    expect(new Set(received.map((e) => e.data.tool)).size).toBe(1200);
    expect(received.every((e) => e.type === 'tool.called')).toBe(true);
    const rows = await auditRows(rig.store);
    expect(rows.filter((r) => r.verdict === 'blocked')).toHaveLength(400);
  });

  it('keeps events through a failed write and retries them', async () => {
    const errors: unknown[] = [];
    rig.close();
    rig = await auditRig(base.store, { retryMs: 30, onError: (error) => errors.push(error) });
    rig.counter.failNext('audit_events', 2);
    rig.auditor.record(callEvent({ tool: 'survivor' }));
    await expect(rig.auditor.flush()).rejects.toThrow(/injected failure/);
    expect(await auditRows(rig.store)).toHaveLength(0);
    // The retry timer writes it without anyone calling flush (after one more injected failure).
    await until(async () => (await auditRows(rig.store)).length === 1, 3000);
    expect(errors).toHaveLength(2);
    expect((await auditRows(rig.store))[0]?.tool).toBe('survivor');
  });

  it('counts calls in the metrics by surface, verdict and outcome', async () => {
    rig.auditor.record(callEvent());
    rig.auditor.record(callEvent({ latencyMs: 2500 }));
    rig.auditor.record(callEvent({ verdict: 'blocked', outcome: 'tool.blocked', latencyMs: 0 }));
    rig.auditor.record(callEvent({ surface: 'admin', serverId: null, tool: 'mcp_server_list' }));
    rig.auditor.record(
      callEvent({ verdict: 'unknown_server', serverId: 'made-up-by-agent', outcome: 'unknown_tool' as never }),
    );
    const text = await rig.metrics.text();
    expect(text).toContain('gatehouse_tool_calls_total{surface="hub",verdict="allow",outcome="ok"} 2');
    expect(text).toContain('gatehouse_tool_calls_total{surface="hub",verdict="blocked",outcome="tool.blocked"} 1');
    expect(text).toContain('gatehouse_tool_calls_total{surface="admin",verdict="allow",outcome="ok"} 1');
    expect(text).toContain('gatehouse_tool_call_duration_seconds_count{server="files"} 2');
    expect(text).toContain('gatehouse_tool_call_duration_seconds_bucket{le="2.5",server="files"} 2');
    expect(text).toContain('gatehouse_tool_call_duration_seconds_bucket{le="1",server="files"} 1');
    // Refused calls never reach an upstream: no server label for a name the agent made up.
    expect(text).not.toContain('made-up-by-agent');
    await rig.auditor.flush();
  });

  it('updates the counters after the turn in which calls were noted, without a scrape', async () => {
    const counted = async () => (await rig.metrics.toolCalls.get()).values.reduce((sum, v) => sum + v.value, 0);
    rig.auditor.record(callEvent());
    rig.auditor.record(callEvent());
    expect(await counted()).toBe(0); // noted only: the call's answer does not wait for the counters
    await new Promise((resolve) => setImmediate(resolve));
    expect(await counted()).toBe(2);
    await rig.auditor.flush();
  });
});

it('digests arguments independently of key order, and tolerates non-JSON arguments', () => {
  expect(argsDigest({ a: 1, b: { d: 2, c: 3 } })).toBe(argsDigest({ b: { c: 3, d: 2 }, a: 1 }));
  expect(argsDigest(undefined)).toBe(argsDigest({}));
  expect(argsDigest({ a: 1 })).not.toBe(argsDigest({ a: 2 }));
  expect(argsDigest({ bad: '\ud800' })).toBeNull();
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  expect(argsDigest(cyclic)).toBeNull();
});

it('computes the facts about arguments once, early when warmed, as the row would', async () => {
  const args: Record<string, unknown> = { b: 'héllo', a: [1e21, 0.1] };
  const early = new ArgumentFacts(args);
  early.warmSoon();
  // Two checks of the event loop: after an upstream request started with it has been written.
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  args.b = 'changed later';
  expect(early.compute()).toEqual({
    digest: argsDigest({ b: 'héllo', a: [1e21, 0.1] }),
    bytes: Buffer.byteLength(JSON.stringify({ b: 'héllo', a: [1e21, 0.1] })),
  });
  expect(new ArgumentFacts(undefined).compute()).toEqual({ digest: argsDigest({}), bytes: 2 });
  // No canonical form: no digest, still measured.
  expect(new ArgumentFacts({ s: 'lone \ud800' }).compute()).toEqual({
    digest: null,
    bytes: Buffer.byteLength(JSON.stringify({ s: 'lone \ud800' })),
  });
});
