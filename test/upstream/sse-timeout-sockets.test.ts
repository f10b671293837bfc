/**
 * A legacy HTTP+SSE upstream that takes a `tools/call` POST and never answers it (no headers, ever): the
 * SDK's transport waits for that POST on the connection's long-lived signal, and the egress guard's agent
 * has no header or body timer, so each call that times out must not leave its socket behind on a pooled
 * connection. Counted at the upstream: sockets opened minus sockets closed.
 */
import type { Socket } from 'node:net';
import { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { createEgressGuard } from '../../src/egress/index.js';
import { findGatehouseError } from '../../src/errors.js';
import { BoundedSseTransport } from '../../src/upstream/sse-transport.js';
import { listen, readBody } from '../fixtures/http.js';
import { eventually } from '../helpers/eventually.js';
import { Cleanup, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const HOST = '127.0.0.2';

interface SilentSse {
  url: string;
  /** Sockets open at the upstream right now. */
  readonly sockets: number;
  /** GET streams opened (one per connection). */
  readonly streams: number;
  readonly calls: number;
  close(): Promise<void>;
}

/**
 * A raw HTTP+SSE upstream: the GET stream names `/messages`; `initialize` and `tools/list` are answered
 * (202, then the response on the stream), notifications get 202. A `tools/call` POST is never answered
 * (`hang`), or accepted with 202 and its response never sent (`accept`, a tool that runs too long).
 */
async function startSilentSse(calls: 'hang' | 'accept'): Promise<SilentSse> {
  const open = new Set<Socket>();
  let stream: import('node:http').ServerResponse | undefined;
  let streams = 0;
  let called = 0;
  const listening = await listen((req, res) => {
    if (req.method === 'GET') {
      streams += 1;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write('event: endpoint\ndata: /messages\n\n');
      stream = res;
      return;
    }
    void readBody(req).then((body) => {
      const message = JSON.parse(body.toString('utf8')) as { id?: number; method?: string };
      if (message.method === 'tools/call') {
        called += 1;
        if (calls === 'hang') return;
      }
      res.writeHead(202).end('Accepted');
      if (message.id === undefined || message.method === 'tools/call') return;
      const result =
        message.method === 'initialize'
          ? { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'silent', version: '1' } }
          : { tools: [] };
      stream?.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result })}\n\n`);
    });
  }, HOST);
  listening.server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  return {
    url: `${listening.origin}/sse`,
    get sockets() {
      return open.size;
    },
    get streams() {
      return streams;
    },
    get calls() {
      return called;
    },
    close: () => listening.close(),
  };
}

function guard() {
  return cleanup.add(createEgressGuard({ allowHttp: true, testPublicAddresses: [HOST] }));
}

describe('HTTP+SSE calls that time out', () => {
  it('leave no socket behind when the upstream never answers the POST', async () => {
    const upstream = cleanup.add(await startSilentSse('hang'));
    const { fetch, exchange } = guard();
    const pool = cleanup.add(makePool({ fetch, exchange, callTimeoutMs: 300, poolIdleMs: 300_000 }));
    const target = { url: upstream.url, transport: 'sse' as const };
    const calls = 8;
    let most = 0;
    for (let i = 0; i < calls; i++) {
      await expectFailure(pool.callTool(target, 'x', {}), 'upstream_timeout', { timeoutMs: 300 });
      most = Math.max(most, upstream.sockets);
    }
    // Each call reconnects within its own budget: on a busy machine one may time out before its POST.
    expect(upstream.calls).toBeGreaterThanOrEqual(calls / 2);
    // Unbounded, it would be one hung POST per call plus the stream (10 after 8 calls); here no more than the
    // connection in use holds: its stream, the hung POST, the agent's idle keep-alive socket.
    expect(most).toBeLessThanOrEqual(4);
    await eventually(() => expect(upstream.sockets).toBeLessThanOrEqual(3), 3_000);
  });

  it('keep the connection when the upstream accepted the POST and only the answer is late', async () => {
    const upstream = cleanup.add(await startSilentSse('accept'));
    const { fetch, exchange } = guard();
    const pool = cleanup.add(makePool({ fetch, exchange, callTimeoutMs: 300, poolIdleMs: 300_000 }));
    const target = { url: upstream.url, transport: 'sse' as const };
    for (let i = 0; i < 4; i++) {
      await expectFailure(pool.callTool(target, 'x', {}), 'upstream_timeout', { timeoutMs: 300 });
    }
    expect(upstream.calls).toBe(4);
    // One connection throughout: a slow tool is no reason to reconnect.
    expect(upstream.streams).toBe(1);
    expect(pool.stats().open).toBe(1);
  });

  it('bound each POST on the transport, whatever the request’s own timeout', async () => {
    const upstream = cleanup.add(await startSilentSse('hang'));
    const { fetch } = guard();
    const transport = new BoundedSseTransport(new URL(upstream.url), { fetch }, 2_000, 300);
    const client = new Client({ name: 'test', version: '1' });
    cleanup.add({ close: () => client.close() });
    await client.connect(transport);
    const started = Date.now();
    const error = await client.callTool({ name: 'x', arguments: {} }, { timeout: 5_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(findGatehouseError(error)).toMatchObject({
      code: 'upstream_timeout',
      details: { reason: 'sse_post_timeout' },
    });
    // The hung POST's socket is gone (the stream's may close too: the transport failed).
    await eventually(() => expect(upstream.sockets).toBeLessThanOrEqual(2), 3_000);
  });
});
