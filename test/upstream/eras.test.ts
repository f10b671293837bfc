/**
 * Both protocol eras against real SDK servers: list and call, the era negotiated once per URL and
 * remembered, and a remembered era that stops working (the server was replaced by the other era).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type McpFixture, startDualServer, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { STANDARD_TOOLS } from '../fixtures/tools.js';
import { Cleanup, eventually, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const MODERN = '2026-07-28';

/** The era the pool spoke to a fixture, read off what the fixture received. */
function eraSeen(fixture: McpFixture): 'modern' | 'legacy' {
  const call = fixture.log.withMethod('tools/call').at(-1) ?? fixture.log.withMethod('tools/list').at(-1);
  return call?.headers['mcp-protocol-version'] === MODERN ? 'modern' : 'legacy';
}

// `streams`: the server can deliver progress while a call runs (a JSON-only answer cannot).
const servers = [
  { label: 'modern (2026-07-28, stateless)', start: () => startModernServer(), era: 'modern', streams: true },
  { label: '2025-era sessionful, SSE answers', start: () => startLegacyServer(), era: 'legacy', streams: true },
  {
    label: '2025-era sessionful, JSON answers',
    start: () => startLegacyServer({ jsonResponse: true }),
    era: 'legacy',
    streams: false,
  },
  { label: 'dual (both eras on one endpoint)', start: () => startDualServer(), era: 'modern', streams: true },
] as const;

describe.each(servers)('$label', ({ start, era, streams }) => {
  it('lists the tools as the upstream gave them', async () => {
    const fixture = cleanup.add(await start());
    const pool = cleanup.add(makePool());
    const { tools, truncated } = await pool.listTools({ url: fixture.url });
    expect(truncated).toBeUndefined();
    expect(tools.map((t) => t.name).sort()).toEqual([...STANDARD_TOOLS].sort());
    const echo = tools.find((t) => t.name === 'echo')!;
    expect(echo).toMatchObject({ title: 'Echo', description: 'Returns its text.' });
    expect(echo.inputSchema).toMatchObject({ type: 'object', properties: { text: { type: 'string' } } });
    const add = tools.find((t) => t.name === 'add')!;
    expect(add.annotations).toEqual({ readOnlyHint: true });
    expect(add.outputSchema).toMatchObject({ type: 'object', properties: { sum: { type: 'number' } } });
    expect(eraSeen(fixture)).toBe(era);
  });

  it('calls tools: text, structured output, tool errors as normal results, progress', async () => {
    const fixture = cleanup.add(await start());
    const pool = cleanup.add(makePool());
    const target = { url: fixture.url };

    expect(await pool.callTool(target, 'echo', { text: 'hello' })).toMatchObject({
      isError: false,
      content: [{ type: 'text', text: 'hello' }],
    });
    expect((await pool.callTool(target, 'add', { a: 2, b: 3 })).structuredContent).toEqual({ sum: 5 });

    const failed = await pool.callTool(target, 'fail', undefined);
    expect(failed).toMatchObject({ isError: true, content: [{ type: 'text', text: 'failed on purpose' }] });

    const structured = await pool.callTool(target, 'structured', {});
    expect(structured.structuredContent).toEqual({
      greeting: 'hello',
      nested: { list: ['a', 'b'], deep: { text: 'deep text', n: 3 } },
    });
    expect(structured._meta).toMatchObject({ 'fixture/trace': 'structured-1' });

    const steps: number[] = [];
    const progress = await pool.callTool(
      target,
      'progress',
      { steps: 3 },
      { onProgress: (p) => steps.push(p.progress) },
    );
    expect(progress.content).toEqual([{ type: 'text', text: '3 steps done' }]);
    expect(steps).toEqual(streams ? [1, 2, 3] : []);

    expect(eraSeen(fixture)).toBe(era);
    expect(fixture.stats.calls).toMatchObject({ echo: 1, add: 1, fail: 1, structured: 1, progress: 1 });
  });

  it('reports an unknown tool as the upstream protocol error it is', async () => {
    const fixture = cleanup.add(await start());
    const pool = cleanup.add(makePool());
    await expectFailure(pool.callTool({ url: fixture.url }, 'no-such-tool', {}), 'upstream_protocol_error', {
      reason: 'rpc_error',
      rpcCode: -32602,
    });
    // A JSON-RPC error leaves the connection sound: the next call reuses it.
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'still fine' });
    expect(fixture.log.count('initialize')).toBeLessThanOrEqual(1);
  });
});

describe('methods an upstream does not have', () => {
  it('reports a modern "method not found" (HTTP 404 + -32601) as the JSON-RPC error it is, without retrying', async () => {
    const fixture = cleanup.add(await startModernServer());
    const pool = cleanup.add(makePool());
    await expectFailure(
      pool.withClient({ url: fixture.url }, 5_000, (client, signal) =>
        client.request({ method: 'prompts/list', params: {} }, { signal }),
      ),
      'upstream_protocol_error',
      { reason: 'rpc_error', rpcCode: -32601, status: 404 },
    );
    expect(fixture.log.count('prompts/list')).toBe(1);
    expect(fixture.log.count('server/discover')).toBe(1);
    expect(pool.stats().open).toBe(1);
  });

  it.each([
    ['modern', () => startModernServer({ tools: [] })],
    ['2025-era', () => startLegacyServer({ tools: [] })],
  ])('%s: lists no tools instead of failing', async (_, start) => {
    const fixture = cleanup.add(await start());
    const pool = cleanup.add(makePool());
    expect(await pool.listTools({ url: fixture.url })).toEqual({ tools: [] });
  });
});

describe('era memory', () => {
  it('probes a modern upstream once; later connects send no server/discover', async () => {
    const fixture = cleanup.add(await startModernServer());
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    for (let i = 0; i < 3; i++) await pool.callTool({ url: fixture.url }, 'echo', { text: `${i}` });
    expect(fixture.log.count('server/discover')).toBe(1);
    expect(fixture.log.count('tools/call')).toBe(3);
    expect(pool.stats().eraByUrl).toBe(1);
  });

  it('probes a 2025-era upstream once; later connects go straight to initialize', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    for (let i = 0; i < 3; i++) await pool.callTool({ url: fixture.url }, 'echo', { text: `${i}` });
    expect(fixture.log.count('server/discover')).toBe(1);
    expect(fixture.log.count('initialize')).toBe(3);
  });

  it('remembers the era across a pooled connection closing for idleness', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ poolIdleMs: 50 }));
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'a' });
    await eventually(() => pool.stats().open === 0);
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'b' });
    expect(fixture.sessionsOpened).toBe(2);
    expect(fixture.log.count('server/discover')).toBe(1);
  });

  it('renegotiates once when a remembered modern server was replaced by a 2025-era one', async () => {
    const modern = await startModernServer();
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    await pool.callTool({ url: modern.url }, 'echo', { text: 'modern' });
    const port = Number(new URL(modern.url).port);
    await modern.close();

    const legacy = cleanup.add(await startLegacyServer({ port }));
    expect(legacy.url).toBe(modern.url);
    expect(await pool.callTool({ url: legacy.url }, 'echo', { text: 'legacy now' })).toMatchObject({
      content: [{ text: 'legacy now' }],
    });
    await pool.callTool({ url: legacy.url }, 'echo', { text: 'and again' });
    // One failed modern-era request, one probe, then the new verdict is remembered.
    expect(legacy.log.count('server/discover')).toBe(1);
    expect(legacy.log.count('initialize')).toBe(2);
    expect(legacy.log.count('tools/call')).toBe(3);
  });

  it('renegotiates once when a remembered 2025-era server was replaced by a modern-only one', async () => {
    const legacy = await startLegacyServer();
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    await pool.callTool({ url: legacy.url }, 'echo', { text: 'legacy' });
    const port = Number(new URL(legacy.url).port);
    await legacy.close();

    const modern = cleanup.add(await startModernServer({ port }));
    await pool.callTool({ url: modern.url }, 'echo', { text: 'modern now' });
    await pool.callTool({ url: modern.url }, 'echo', { text: 'and again' });
    // The remembered `initialize` is refused (-32022), then one probe; the new verdict sticks.
    expect(modern.log.count('initialize')).toBe(1);
    expect(modern.log.count('server/discover')).toBe(1);
    expect(modern.log.count('tools/call')).toBe(2);
  });

  it('recovers a pooled modern connection whose server became 2025-era', async () => {
    const modern = await startModernServer();
    const pool = cleanup.add(makePool());
    await pool.callTool({ url: modern.url }, 'echo', { text: 'modern' });
    const port = Number(new URL(modern.url).port);
    await modern.close();

    const legacy = cleanup.add(await startLegacyServer({ port }));
    await pool.callTool({ url: legacy.url }, 'echo', { text: 'legacy now' });
    await pool.callTool({ url: legacy.url }, 'echo', { text: 'pooled again' });
    expect(legacy.sessionsOpened).toBe(1);
    expect(legacy.log.count('server/discover')).toBe(1);
  });

  it('reuses a private discover result only for the key that received it', async () => {
    const fixture = cleanup.add(await startModernServer());
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    const alice = { url: fixture.url, headers: { authorization: 'Bearer alice' } };
    const bob = { url: fixture.url, headers: { authorization: 'Bearer bob' } };
    for (const target of [alice, bob, alice, bob, alice]) await pool.callTool(target, 'echo', { text: 'x' });
    const probes = fixture.log.withMethod('server/discover').map((r) => r.headers.authorization);
    expect(probes).toEqual(['Bearer alice', 'Bearer bob']);
    expect(pool.stats().eraByUrl).toBe(1);
  });

  it('shares a discover result the server marked public across keys', async () => {
    const fixture = cleanup.add(
      await startModernServer({ serverOptions: { cacheHints: { 'server/discover': { cacheScope: 'public' } } } }),
    );
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    for (const token of ['alice', 'bob', 'carol']) {
      await pool.callTool({ url: fixture.url, headers: { authorization: `Bearer ${token}` } }, 'echo', { text: 'x' });
    }
    expect(fixture.log.count('server/discover')).toBe(1);
  });

  it('shares a 2025-era verdict across keys (it carries nothing of the key)', async () => {
    const fixture = cleanup.add(await startLegacyServer());
    const pool = cleanup.add(makePool({ sessionMode: 'fresh' }));
    for (const token of ['alice', 'bob']) {
      await pool.callTool({ url: fixture.url, headers: { authorization: `Bearer ${token}` } }, 'echo', { text: 'x' });
    }
    expect(fixture.log.count('server/discover')).toBe(1);
  });
});
