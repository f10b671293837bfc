/**
 * Every hostile upstream maps to a bounded result or the right catalogue code, quickly, without
 * repeating what the upstream said.
 *
 * Decision: a socket closed mid-response is `upstream_unreachable` (reason `network`), for JSON and
 * SSE answers alike and at connect as at call time: the upstream went away, it did not say anything
 * wrong; its retry advice is that of an unreachable server, not of a broken one.
 */
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type HostileMode, startHostileServer } from '../fixtures/hostile-servers.js';
import { Cleanup, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

async function hostile(mode: HostileMode, options: { fromStart?: boolean; pageSize?: number } = {}) {
  const server = cleanup.add(await startHostileServer({ mode, ...options }));
  return { server, target: { url: server.url } };
}

describe('bounded results from hostile upstreams', () => {
  it('keeps 100 blocks of a 10,000-block flood', async () => {
    const { target } = await hostile('flood');
    const pool = cleanup.add(makePool());
    const result = await pool.callTool(target, 'x', {});
    expect(result.content).toHaveLength(100);
    expect(result.content[99]).toEqual({ type: 'text', text: 'b99' });
    expect(result.truncated).toBe(true);
  });

  it('keeps 1000 tools of a 1,500-tool page', async () => {
    const { target } = await hostile('flood');
    const pool = cleanup.add(makePool());
    const { tools, truncated } = await pool.listTools(target);
    expect(tools).toHaveLength(1000);
    expect(tools.at(-1)!.name).toBe('t999');
    expect(truncated).toBe(true);
  });

  it('truncates 10 MB strings at 200k characters instead of failing', async () => {
    const { target } = await hostile('huge-string');
    const pool = cleanup.add(makePool());
    const result = await pool.callTool(target, 'x', {});
    expect((result.content[0] as { text: string }).text).toHaveLength(200_000);
    expect((result._meta as { note: string }).note).toHaveLength(200_000);
    expect(result.truncated).toBe(true);
  });

  it('stops infinite pagination at 1000 tools', async () => {
    const { server, target } = await hostile('infinite-pages', { pageSize: 25 });
    const pool = cleanup.add(makePool());
    const { tools, truncated } = await pool.listTools(target);
    expect(tools).toHaveLength(1000);
    expect(truncated).toBe(true);
    expect(server.pagesServed).toBe(40);
  });

  it('stops infinite pagination at 50 pages', async () => {
    const { server, target } = await hostile('infinite-pages', { pageSize: 5 });
    const pool = cleanup.add(makePool());
    const { tools, truncated } = await pool.listTools(target);
    expect(tools).toHaveLength(250);
    expect(truncated).toBe(true);
    expect(server.pagesServed).toBe(50);
  });

  it('fails a repeated cursor as a protocol error, and keeps the connection', async () => {
    const { server, target } = await hostile('repeat-cursor');
    const pool = cleanup.add(makePool());
    await expectFailure(pool.listTools(target), 'upstream_protocol_error', { reason: 'repeated_cursor' });
    expect(server.pagesServed).toBe(3);
    expect(pool.stats().open).toBe(1);
  });
});

type Case = [label: string, mode: HostileMode, fromStart: boolean, code: string, details: Record<string, unknown>];

const failures: Case[] = [
  ['HTML page at connect', 'html', true, 'upstream_protocol_error', { reason: 'unexpected_content_type' }],
  ['HTML page for a call', 'html', false, 'upstream_protocol_error', { reason: 'unexpected_content_type' }],
  ['non-JSON body at connect', 'not-json', true, 'upstream_protocol_error', { reason: 'invalid_json' }],
  ['non-JSON body for a call', 'not-json', false, 'upstream_protocol_error', { reason: 'invalid_json' }],
  [
    'JSON that is not JSON-RPC at connect',
    'not-jsonrpc',
    true,
    'upstream_protocol_error',
    { reason: 'invalid_message' },
  ],
  [
    'JSON that is not JSON-RPC for a call',
    'not-jsonrpc',
    false,
    'upstream_protocol_error',
    { reason: 'invalid_message' },
  ],
  ['JSON-RPC error at connect', 'rpc-error', true, 'upstream_protocol_error', { reason: 'rpc_error', rpcCode: -32603 }],
  [
    'JSON-RPC error for a call',
    'rpc-error',
    false,
    'upstream_protocol_error',
    { reason: 'rpc_error', rpcCode: -32603 },
  ],
  ['HTTP 500 at connect', 'status-500', true, 'upstream_protocol_error', { reason: 'http_status', status: 500 }],
  ['HTTP 500 for a call', 'status-500', false, 'upstream_protocol_error', { reason: 'http_status', status: 500 }],
  ['socket closed mid-JSON at connect', 'close-mid-json', true, 'upstream_unreachable', { reason: 'network' }],
  ['socket closed mid-JSON for a call', 'close-mid-json', false, 'upstream_unreachable', { reason: 'network' }],
  ['socket closed mid-SSE at connect', 'close-mid-sse', true, 'upstream_unreachable', { reason: 'network' }],
  ['socket closed mid-SSE for a call', 'close-mid-sse', false, 'upstream_unreachable', { reason: 'network' }],
];

describe('failures from hostile upstreams', () => {
  it.each(failures)('%s', async (_, mode, fromStart, code, details) => {
    const { target } = await hostile(mode, { fromStart });
    // A generous deadline: every case must fail on its own merits, long before it.
    const pool = cleanup.add(makePool({ callTimeoutMs: 10_000 }));
    const started = performance.now();
    const error = await expectFailure(pool.callTool(target, 'x', {}), code as never, details);
    expect(performance.now() - started).toBeLessThan(5_000);
    // Nothing the upstream said is repeated to our caller.
    const body = JSON.stringify(error.toBody());
    for (const said of ['nginx', 'internal server error', 'upstream exploded', 'hello', 'this is not json']) {
      expect(body).not.toContain(said);
    }
    // A connection that failed at transport level is not reused.
    if (!fromStart && mode !== 'rpc-error') expect(pool.stats().open).toBe(0);
  });

  it('maps a refused connection to upstream_unreachable', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const pool = cleanup.add(makePool());
    await expectFailure(pool.listTools({ url: `http://127.0.0.1:${port}/mcp` }), 'upstream_unreachable', {
      reason: 'network',
    });
  });
});
