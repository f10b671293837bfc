/**
 * A 2025-era upstream that answers a call with an SSE stream it ends at once, having given its event an
 * id and asked (`retry: 0`) to be resumed at once — and ends every resumed stream the same way. The
 * direct path resumes such streams as the SDK path does: never sooner than the SDK path's floor, and not
 * without end when they bring nothing for the call.
 */
import type http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createEgressGuard } from '../../src/egress/index.js';
import { listen, readBody } from '../fixtures/http.js';
import { Cleanup, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const HOST = '127.0.0.2';

interface LoopingUpstream {
  url: string;
  /** GETs carrying `Last-Event-ID`: resumed streams. */
  readonly resumes: number;
  close(): Promise<void>;
}

/**
 * Sessionful 2025-era over raw HTTP: `initialize` answers JSON with a session id; a `tools/call` gets an SSE
 * stream with one event (an id, `retry`, and `data`), then the end; so does each resuming GET. After
 * `answerAfter` resumes, the resumed stream carries the response instead.
 */
async function startLoopingUpstream(options: {
  retry: string;
  /** What each stream's event carries: a notification, a ping request, or nothing (a priming event). */
  data: 'notification' | 'ping' | 'empty';
  answerAfter?: number;
}): Promise<LoopingUpstream> {
  let resumes = 0;
  let ids = 0;
  let callId: unknown;
  const event = (res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const id = `e${++ids}`;
    if (options.answerAfter !== undefined && resumes > options.answerAfter) {
      const response = { jsonrpc: '2.0', id: callId, result: { content: [{ type: 'text', text: 'done' }] } };
      res.end(`id: ${id}\ndata: ${JSON.stringify(response)}\n\n`);
      return;
    }
    const data =
      options.data === 'notification'
        ? '{"jsonrpc":"2.0","method":"notifications/x"}'
        : options.data === 'ping'
          ? `{"jsonrpc":"2.0","id":"ping-${id}","method":"ping"}`
          : '';
    res.end(`id: ${id}\nretry: ${options.retry}\ndata: ${data}\n\n`);
  };
  const listening = await listen((req, res) => {
    void readBody(req).then((body) => {
      if (req.method === 'GET') {
        if (!req.headers['last-event-id']) return void res.writeHead(405).end();
        resumes += 1;
        return event(res);
      }
      if (req.method === 'DELETE') return void res.writeHead(200).end();
      const message = JSON.parse(body.toString('utf8')) as { id?: unknown; method?: string };
      if (message.id === undefined || message.method === undefined) return void res.writeHead(202).end();
      if (message.method === 'initialize') {
        const result = {
          protocolVersion: '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: { name: 'l', version: '1' },
        };
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
        return void res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
      }
      if (message.method === 'tools/call') {
        callId = message.id;
        return event(res);
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } }));
    });
  }, HOST);
  return {
    url: `${listening.origin}/mcp`,
    get resumes() {
      return resumes;
    },
    close: () => listening.close(),
  };
}

/** A pool whose 2025-era calls take the direct path (the guard's `exchange` given). */
function directPool(callTimeoutMs: number) {
  const guard = cleanup.add(createEgressGuard({ allowHttp: true, testPublicAddresses: [HOST] }));
  return cleanup.add(makePool({ fetch: guard.fetch, exchange: guard.exchange, callTimeoutMs }));
}

describe('resuming a call’s SSE stream on the direct path', () => {
  it('waits at least the floor between resumes, whatever the upstream’s `retry:`', async () => {
    const upstream = cleanup.add(await startLoopingUpstream({ retry: '0', data: 'notification' }));
    const pool = directPool(1_500);
    const error = await pool.callTool({ url: upstream.url }, 'x', {}).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    // Its deadline, or the resume limit first: either way a typed error, not an answer.
    expect(['upstream_timeout', 'upstream_protocol_error']).toContain(error?.code);
    expect(pool.stats().directCalls).toBe(1);
    // 1.5 s at the 250 ms floor: about 6. Without it, over a thousand.
    expect(upstream.resumes).toBeGreaterThan(0);
    expect(upstream.resumes).toBeLessThanOrEqual(10);
  });

  it('is not hurried by a `retry:` too large for a timer (which would fire at once)', async () => {
    const upstream = cleanup.add(await startLoopingUpstream({ retry: '99999999999', data: 'empty' }));
    const pool = directPool(1_000);
    await expectFailure(pool.callTool({ url: upstream.url }, 'x', {}), 'upstream_timeout');
    expect(upstream.resumes).toBeLessThanOrEqual(5);
  });

  it('gives up with a clear error when resumed streams keep ending with nothing for the call', async () => {
    const upstream = cleanup.add(await startLoopingUpstream({ retry: '0', data: 'notification' }));
    const pool = directPool(20_000);
    const started = Date.now();
    await expectFailure(pool.callTool({ url: upstream.url }, 'x', {}), 'upstream_protocol_error', {
      reason: 'resume_limit',
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(upstream.resumes).toBeLessThanOrEqual(10);
  });

  it('keeps resuming while the upstream asks for something during the call', async () => {
    // Each stream carries a server→client request (answered): the call goes on, and is answered.
    const upstream = cleanup.add(await startLoopingUpstream({ retry: '0', data: 'ping', answerAfter: 12 }));
    const pool = directPool(20_000);
    const result = await pool.callTool({ url: upstream.url }, 'x', {});
    expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
    expect(upstream.resumes).toBe(13);
    expect(pool.stats().directCalls).toBe(1);
  });
});
