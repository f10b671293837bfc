/** The guard's lean `exchange`: fetch's checks and answers for an in-memory request, without Request/Response. */
import { describe, expect, it } from 'vitest';
import { rejection } from './helpers.js';
import { closedPort, egressTestBed } from './servers.js';

const PUBLIC = '127.0.0.2'; // the test seam: a loopback address the guard treats as public
const PRIVATE = '127.0.0.1';

const { guard, server } = egressTestBed(PUBLIC);

describe('exchange', () => {
  it('sends method, headers and body and answers status, headers and text', async () => {
    const upstream = await server(PUBLIC, (req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        res.setHeader('x-answer', 'yes');
        res.setHeader('set-cookie', ['a=1', 'b=2']);
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ method: req.method, auth: req.headers.authorization, body }));
      });
    });
    const answer = await guard().exchange(`${upstream.origin}/mcp`, {
      method: 'POST',
      headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    expect(answer.status).toBe(201);
    expect(answer.header('content-type')).toBe('application/json');
    expect(answer.header('x-answer')).toBe('yes');
    expect(answer.header('set-cookie')).toBe('a=1, b=2');
    expect(JSON.parse(await answer.text())).toEqual({ method: 'POST', auth: 'Bearer t', body: '{"a":1}' });
  });

  it('streams the body in chunks as it arrives', async () => {
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: message\ndata: 1\n\n');
      setImmediate(() => res.end('event: message\ndata: 2\n\n'));
    });
    const answer = await guard().exchange(upstream.origin, { method: 'GET', headers: {} });
    let text = '';
    for await (const chunk of answer.chunks()) text += chunk.toString('utf8');
    expect(text).toBe('event: message\ndata: 1\n\nevent: message\ndata: 2\n\n');
  });

  it('refuses a private address under the public policy, before connecting, every time', async () => {
    const upstream = await server(PRIVATE);
    const egress = guard();
    // An admitted URL is kept (admitted once); a refused one is not, so the second attempt is judged again.
    for (let attempt = 0; attempt < 2; attempt++) {
      const error = await rejection(egress.exchange(upstream.origin, { method: 'GET', headers: {} }));
      expect(error.code).toBe('private_network_blocked');
    }
    expect(upstream.connections).toBe(0);
  });

  it('refuses redirects', async () => {
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(307, { location: 'http://127.0.0.1:1/' });
      res.end();
    });
    const error = await rejection(guard().exchange(upstream.origin, { method: 'POST', headers: {}, body: '{}' }));
    expect(error.details).toMatchObject({ reason: 'redirect_refused', status: 307 });
  });

  it('caps the body: a declared length at once, a streamed one when it passes the cap', async () => {
    const declared = await server(PUBLIC, (_req, res) => res.end('x'.repeat(2048)));
    const g = guard({ maxResponseBytes: 1024 });
    const early = await rejection(g.exchange(declared.origin, { method: 'GET', headers: {} }));
    expect(early.details).toMatchObject({ reason: 'response_too_large' });
    const streamed = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      for (let i = 0; i < 8; i++) res.write('y'.repeat(256));
      res.end();
    });
    const answer = await g.exchange(streamed.origin, { method: 'GET', headers: {} });
    const late = await rejection(answer.text());
    expect(late.details).toMatchObject({ reason: 'response_too_large' });
  });

  it('fails a body cut short, or whose request is cancelled while it streams, as a read failure', async () => {
    const cut = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"partial":');
      setImmediate(() => res.socket?.destroy());
    });
    const answer = await guard().exchange(cut.origin, { method: 'GET', headers: {} });
    const failed = await rejection(answer.text());
    expect(failed.code).toBe('upstream_unreachable');
    expect(failed.message).toContain('while reading the response');

    const slow = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"partial":');
    });
    const controller = new AbortController();
    const pending = await guard().exchange(slow.origin, { method: 'GET', headers: {}, signal: controller.signal });
    const text = pending.text();
    controller.abort(new Error('the caller gave up'));
    // The read ends at once (the caller's own deadline says why); the stream's error is a read failure.
    expect((await rejection(text)).code).toBe('upstream_unreachable');
  });

  describe('a reader that stops once it has what it needs', () => {
    /** An SSE answer whose first event is all the reader wants; `rest` decides what the server does next. */
    async function streamThenNext(rest: (res: import('node:http').ServerResponse) => void) {
      let closed!: () => void;
      const firstClosed = new Promise<void>((resolve) => {
        closed = resolve;
      });
      const upstream = await server(PUBLIC, (req, res) => {
        if (req.url !== '/sse') return void res.end('next');
        res.on('close', closed);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: message\ndata: 1\n\n');
        rest(res);
      });
      const g = guard();
      const answer = await g.exchange(`${upstream.origin}/sse`, { method: 'GET', headers: {} });
      for await (const chunk of answer.chunks()) {
        expect(chunk.toString('utf8')).toBe('event: message\ndata: 1\n\n');
        break;
      }
      return { upstream, g, firstClosed };
    }

    it('leaves the rest of the body to be read, so the connection serves the next request', async () => {
      const { upstream, g, firstClosed } = await streamThenNext((res) => {
        setTimeout(() => res.end('event: message\ndata: 2\n\n'), 30);
      });
      await firstClosed;
      // The end is on the wire; give the client a moment to read it and put the socket back in the pool.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const next = await g.exchange(`${upstream.origin}/next`, { method: 'GET', headers: {} });
      expect(await next.text()).toBe('next');
      expect(upstream.connections).toBe(1);
    });

    it('drops the connection when the rest goes on past 64 KiB', async () => {
      const { upstream, g, firstClosed } = await streamThenNext((res) => {
        setTimeout(() => {
          for (let i = 0; i < 80; i++) res.write(`data: ${'x'.repeat(1024)}\n\n`);
        }, 30);
      });
      await firstClosed; // the client dropped the stream it will never finish reading
      const next = await g.exchange(`${upstream.origin}/next`, { method: 'GET', headers: {} });
      expect(await next.text()).toBe('next');
      expect(upstream.connections).toBeGreaterThan(1); // on a new connection
    });

    it('drops the connection when the rest does not come within a second', async () => {
      const { upstream, firstClosed } = await streamThenNext(() => {});
      await firstClosed; // never ended by the server: closed by the client after its grace period
      expect(upstream.connections).toBe(1);
    });
  });

  it('reads a whole body far larger than what it buffers unread as text', async () => {
    const body = 'z'.repeat(4 * 1024 * 1024);
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    const answer = await guard().exchange(upstream.origin, { method: 'GET', headers: {} });
    // The upstream may have sent well past the reader's high-water mark before text() was called.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await answer.text()).toBe(body);
  });

  it('holds the upstream back while the reader falls behind, and hands over every byte once it reads', async () => {
    const CHUNK = 64 * 1024;
    const TOTAL = 96 * 1024 * 1024; // well past what the kernel buffers on loopback (tcp_rmem up to 32 MiB here)
    let written = 0;
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const more = () => {
        while (written < TOTAL) {
          written += CHUNK;
          if (!res.write(Buffer.alloc(CHUNK, 1))) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    const answer = await guard({ maxResponseBytes: TOTAL }).exchange(upstream.origin, { method: 'GET', headers: {} });
    // Nobody reads for a while: the upstream stalls once the socket buffers are full (far short of the body).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stalledAt = written;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(written).toBe(stalledAt);
    expect(written).toBeLessThan(TOTAL / 2);
    let read = 0;
    for await (const chunk of answer.chunks()) read += chunk.byteLength;
    expect(read).toBe(TOTAL);
  });

  it('aborts a request still waiting for its connection: it fails at once and is never sent', async () => {
    const upstream = await server(PUBLIC, (_req, res) => {
      res.setHeader('connection', 'close'); // no idle connection left: the next request must dial
      res.end('ok');
    });
    const g = guard();
    expect(await (await g.exchange(upstream.origin, { method: 'GET', headers: {} })).text()).toBe('ok');
    const controller = new AbortController();
    const pending = g.exchange(upstream.origin, { method: 'GET', headers: {}, signal: controller.signal });
    controller.abort(new Error('the caller gave up'));
    expect((await rejection(pending)).code).toBe('upstream_unreachable');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(upstream.requests).toBe(1);
  });

  it('maps a refused connection like fetch does', async () => {
    const port = await closedPort(PUBLIC);
    const error = await rejection(guard().exchange(`http://${PUBLIC}:${port}/`, { method: 'GET', headers: {} }));
    expect(error.code).toBe('upstream_unreachable');
  });
});
