import { describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { rejection, scriptedResolver } from './helpers.js';
import { closedPort, egressTestBed } from './servers.js';

const PUBLIC = '127.0.0.2'; // the test seam: a loopback address the guard treats as public
const PRIVATE = '127.0.0.1';

const { guard, server, tcpServer } = egressTestBed(PUBLIC);

describe('fetch: reaching a public upstream', () => {
  it('fetches from a public-seam address and by a name pinned to it', async () => {
    const upstream = await server(PUBLIC, (req, res) => res.end(`host=${req.headers.host}`));
    const resolver = scriptedResolver({ 'mcp.test': [PUBLIC] });
    const g = guard({ resolver });
    const direct = await g.fetch(`${upstream.origin}/mcp`);
    expect(await direct.text()).toBe(`host=${PUBLIC}:${upstream.port}`);
    const byName = await g.fetch(`http://mcp.test:${upstream.port}/mcp`);
    expect(byName.status).toBe(200);
    expect(byName.url).toBe(`http://mcp.test:${upstream.port}/mcp`);
    expect(await byName.text()).toBe(`host=mcp.test:${upstream.port}`);
    expect(resolver.calls).toEqual(['mcp.test']); // resolved once, at connect
  });

  it('sends method, headers and body, from (url, init) and from a Request', async () => {
    const upstream = await server(PUBLIC, (req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => res.end(JSON.stringify({ method: req.method, auth: req.headers.authorization, body })));
    });
    const g = guard();
    const init = { method: 'POST', headers: { authorization: 'Bearer t' }, body: '{"a":1}' };
    const viaInit = await g.fetch(new URL(`${upstream.origin}/mcp`), init);
    expect(await viaInit.json()).toEqual({ method: 'POST', auth: 'Bearer t', body: '{"a":1}' });
    const viaRequest = await g.fetch(new Request(`${upstream.origin}/mcp`, init));
    expect(await viaRequest.json()).toEqual({ method: 'POST', auth: 'Bearer t', body: '{"a":1}' });
  });

  it('reuses one kept-alive connection for sequential requests', async () => {
    const upstream = await server(PUBLIC);
    const resolver = scriptedResolver({ 'mcp.test': [PUBLIC] });
    const g = guard({ resolver });
    for (let i = 0; i < 3; i++) {
      const res = await g.fetch(`http://mcp.test:${upstream.port}/`);
      expect(await res.text()).toBe('ok');
      // undici frees the connection a tick after the body ends; a caller that does anything in between reuses it.
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(upstream.requests).toBe(3);
    expect(upstream.connections).toBe(1);
    expect(resolver.calls).toHaveLength(1); // one connect, one lookup
  });

  it('does not open a connection per request even back to back', async () => {
    const upstream = await server(PUBLIC);
    const g = guard();
    for (let i = 0; i < 30; i++) await (await g.fetch(upstream.origin)).text();
    expect(upstream.requests).toBe(30);
    // Without a pause undici's pool may add a second connection before the first is marked free; never more.
    expect(upstream.connections).toBeLessThanOrEqual(2);
  });
});

describe('fetch: pinning', () => {
  it('refuses a name that answers public at check and private at connect; the private server sees nothing', async () => {
    const victim = await server(PRIVATE);
    const resolver = scriptedResolver({ 'rebind.test': (asked) => (asked === 0 ? [PUBLIC] : [PRIVATE]) });
    const g = guard({ resolver });
    const url = `http://rebind.test:${victim.port}/`;
    await expect(g.check(url)).resolves.toBeInstanceOf(URL);
    const err = await rejection(g.fetch(url));
    expect(err.code).toBe('private_network_blocked');
    expect(err.message).not.toContain(PRIVATE);
    expect(resolver.calls).toEqual(['rebind.test', 'rebind.test']);
    expect(victim.connections).toBe(0);
  });

  it('pins https connections too (the TLS path uses the same lookup)', async () => {
    const victim = await tcpServer(PRIVATE);
    const resolver = scriptedResolver({ 'rebind.test': (asked) => (asked === 0 ? [PUBLIC] : [PRIVATE]) });
    const g = guard({ resolver, allowHttp: false });
    const url = `https://rebind.test:${victim.port}/`;
    await g.check(url);
    expect((await rejection(g.fetch(url))).code).toBe('private_network_blocked');
    expect(victim.connections).toBe(0);
  });

  it('refuses a name with one public and one private answer at connect; neither server is contacted', async () => {
    const publicSide = await server(PUBLIC);
    const privateSide = await tcpServer(PRIVATE, publicSide.port).catch(() => tcpServer(PRIVATE));
    const resolver = scriptedResolver({ 'mixed.test': [PUBLIC, PRIVATE] });
    const err = await rejection(guard({ resolver }).fetch(`http://mixed.test:${publicSide.port}/`));
    expect(err.code).toBe('private_network_blocked');
    expect(publicSide.connections + privateSide.connections).toBe(0);
  });

  it.each(['http://127.0.0.1:PORT/', 'http://2130706433:PORT/', 'http://[::ffff:7f00:1]:PORT/', 'http://127.1:PORT/'])(
    'refuses the private literal %s without connecting',
    async (template) => {
      const victim = await server(PRIVATE);
      const err = await rejection(guard().fetch(template.replace('PORT', String(victim.port))));
      expect(err.code).toBe('private_network_blocked');
      expect(victim.connections).toBe(0);
    },
  );

  it('never follows a 307 to a private address', async () => {
    const victim = await server(PRIVATE);
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(307, { location: `${victim.origin}/steal` }).end();
    });
    for (const redirect of [undefined, 'follow', 'manual'] as const) {
      const err = await rejection(guard().fetch(`${upstream.origin}/mcp`, redirect ? { redirect } : {}));
      expect(err.code).toBe('upstream_protocol_error');
      expect(err.details).toMatchObject({ reason: 'redirect_refused', status: 307 });
      expect(err.message).not.toContain(victim.origin);
    }
    expect(upstream.requests).toBe(3);
    expect(victim.connections).toBe(0);
  });

  it('refuses a redirect even to another public address', async () => {
    const other = await server(PUBLIC);
    const upstream = await server(PUBLIC, (_req, res) => res.writeHead(302, { location: other.origin }).end());
    const err = await rejection(guard().fetch(upstream.origin));
    expect(err.details).toMatchObject({ reason: 'redirect_refused' });
    expect(other.requests).toBe(0);
  });
});

describe('fetch: policies and schemes', () => {
  it('refuses http to a public upstream without allowHttp, before connecting', async () => {
    const upstream = await server(PUBLIC);
    const err = await rejection(guard({ allowHttp: false }).fetch(upstream.origin));
    expect(err.details).toEqual({ reason: 'insecure_scheme' });
    expect(upstream.connections).toBe(0);
  });

  it('reports a private name as blocked, not as insecure, when http is refused too', async () => {
    const resolver = scriptedResolver({ 'intranet.test': ['10.0.0.5'] });
    const err = await rejection(guard({ allowHttp: false, resolver }).fetch('http://intranet.test/'));
    expect(err.code).toBe('private_network_blocked');
  });

  it('the private policy reaches 127.0.0.1 over http, by literal and by name', async () => {
    const upstream = await server(PRIVATE);
    const resolver = scriptedResolver({ 'box.internal': [PRIVATE] });
    const g = guard({ policy: 'private', allowHttp: false, testPublicAddresses: [], resolver });
    expect(await (await g.fetch(upstream.origin)).text()).toBe('ok');
    expect(await (await g.fetch(`http://box.internal:${upstream.port}/`)).text()).toBe('ok');
  });

  it('the private policy still refuses a name pointing at link-local or metadata addresses', async () => {
    const resolver = scriptedResolver({ 'meta.test': ['169.254.169.254'], 'imds6.test': ['fd00:ec2::254'] });
    const g = guard({ policy: 'private', resolver });
    expect((await rejection(g.fetch('http://meta.test/'))).code).toBe('private_network_blocked');
    expect((await rejection(g.fetch('http://imds6.test/'))).code).toBe('private_network_blocked');
  });

  it('the any policy reaches anything over http, without resolver checks', async () => {
    const upstream = await server(PRIVATE);
    const g = guard({ policy: 'any', allowHttp: false, testPublicAddresses: [] });
    expect(await (await g.fetch(upstream.origin)).text()).toBe('ok');
    expect((await rejection(g.fetch('ftp://127.0.0.1/'))).details).toEqual({ reason: 'unsupported_scheme' });
  });
});

describe('fetch: response bounds', () => {
  it('fails before reading when content-length is over the cap', async () => {
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-length': '2000' }).end('x'.repeat(2000));
    });
    const err = await rejection(guard({ maxResponseBytes: 1000 }).fetch(upstream.origin));
    expect(err.code).toBe('upstream_protocol_error');
    expect(err.details).toMatchObject({ reason: 'response_too_large' });
  });

  it('errors the body stream once a chunked response passes the cap', async () => {
    const upstream = await server(PUBLIC, (_req, res) => {
      for (let i = 0; i < 10; i++) res.write('y'.repeat(500));
      res.end();
    });
    const g = guard({ maxResponseBytes: 1000 });
    const response = await g.fetch(upstream.origin);
    expect(response.headers.get('content-length')).toBeNull();
    const err = await rejection(response.text());
    expect(err.code).toBe('upstream_protocol_error');
    expect(err.details).toMatchObject({ reason: 'response_too_large' });
  });

  it('stops an endless stream at the cap instead of buffering it', async () => {
    let timer: NodeJS.Timeout | undefined;
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let sent = 0; // "endless" for the guard, but bounded so a broken cap fails fast instead of timing out
      timer = setInterval(() => {
        sent += 65_544;
        if (sent > 8 * 1024 * 1024) res.end();
        else res.write(`data: ${'z'.repeat(65_536)}\n\n`);
      }, 0);
      res.on('close', () => clearInterval(timer));
    });
    try {
      const response = await guard({ maxResponseBytes: 64 * 1024 }).fetch(upstream.origin);
      const err = await rejection(response.arrayBuffer());
      expect(err.details).toMatchObject({ reason: 'response_too_large' });
    } finally {
      clearInterval(timer);
    }
  });

  it('caps a long-lived GET event stream per event, and a POST answer in total', async () => {
    // 40 events of 600 bytes (split across writes, CRLF and LF endings): 24 000 bytes, 24 times the cap.
    const events = Array.from(
      { length: 40 },
      (_, i) => `data: ${String(i).padEnd(590, '.')}${i % 2 ? '\r\n\r\n' : '\n\n'}`,
    );
    const upstream = await server(PUBLIC, (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const big = req.url === '/big' ? [`data: ${'x'.repeat(1200)}\n\n`] : [];
      for (const event of [...events, ...big]) {
        res.write(event.slice(0, 300));
        res.write(event.slice(300));
      }
      res.end();
    });
    const g = guard({ maxResponseBytes: 1000 });
    expect(await (await g.fetch(`${upstream.origin}/stream`)).text()).toBe(events.join(''));
    // One event over the cap still ends the stream.
    const tooBig = await rejection((await g.fetch(`${upstream.origin}/big`)).text());
    expect(tooBig.details).toMatchObject({ reason: 'response_too_large' });
    // A POST's event stream is one call's answer: capped in total.
    const post = await rejection((await g.fetch(`${upstream.origin}/stream`, { method: 'POST', body: '{}' })).text());
    expect(post.details).toMatchObject({ reason: 'response_too_large' });
  });

  it('delivers a body of exactly the cap, streamed or declared', async () => {
    const upstream = await server(PUBLIC, (req, res) => {
      if (req.url === '/declared') res.writeHead(200, { 'content-length': '1000' }).end('a'.repeat(1000));
      else {
        res.write('b'.repeat(600));
        res.end('b'.repeat(400));
      }
    });
    const g = guard({ maxResponseBytes: 1000 });
    expect((await (await g.fetch(`${upstream.origin}/declared`)).text()).length).toBe(1000);
    expect((await (await g.fetch(`${upstream.origin}/streamed`)).text()).length).toBe(1000);
  });

  it('keeps status, headers and empty bodies intact', async () => {
    const upstream = await server(PUBLIC, (req, res) => {
      if (req.url === '/empty') res.writeHead(202).end();
      else res.writeHead(404, { 'mcp-session-id': 's1', 'content-type': 'application/json' }).end('{"e":1}');
    });
    const g = guard();
    const missing = await g.fetch(`${upstream.origin}/missing`);
    expect(missing.status).toBe(404);
    expect(missing.ok).toBe(false);
    expect(missing.headers.get('mcp-session-id')).toBe('s1');
    expect(await missing.json()).toEqual({ e: 1 });
    const empty = await g.fetch(`${upstream.origin}/empty`);
    expect(empty.status).toBe(202);
    expect(await empty.text()).toBe('');
  });
});

describe('fetch: failures', () => {
  it('maps a refused connection to upstream_unreachable without revealing the address', async () => {
    const port = await closedPort(PUBLIC);
    const resolver = scriptedResolver({ 'down.test': [PUBLIC] });
    const err = await rejection(guard({ resolver }).fetch(`http://down.test:${port}/`));
    expect(err.code).toBe('upstream_unreachable');
    expect(err.status).toBe(502);
    expect(err.details).toEqual({ reason: 'connection_refused' });
    expect(err.message).toContain('down.test');
    expect(`${err.message} ${JSON.stringify(err.toBody())}`).not.toContain(PUBLIC);
    expect(err.cause).toBeDefined();
  });

  it('maps NXDOMAIN to upstream_unreachable', async () => {
    const err = await rejection(guard({ resolver: scriptedResolver({}) }).fetch('https://nowhere.test/'));
    expect(err.code).toBe('upstream_unreachable');
    expect(err.details).toEqual({ reason: 'dns_failure' });
  });

  it('maps a connection closed mid-response to upstream_unreachable', async () => {
    const upstream = await server(PUBLIC, (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const response = await guard().fetch(upstream.origin);
    const err = await rejection(response.text());
    expect(err.code).toBe('upstream_unreachable');
    expect(err.details).toEqual({ reason: 'connection_reset' });
  });

  it('passes the caller’s abort through untouched', async () => {
    const upstream = await server(PUBLIC, () => {}); // never answers
    const controller = new AbortController();
    const pending = guard().fetch(upstream.origin, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    const err = await pending.catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(GatehouseError);
    expect((err as Error).name).toBe('AbortError');
  });

  it('reports credentials in the URL as validation_error', async () => {
    const upstream = await server(PUBLIC);
    const url = `http://user:secret@${PUBLIC}:${upstream.port}/`;
    const err = await rejection(guard().fetch(url));
    expect(err.code).toBe('validation_error');
    expect(err.message).not.toContain('secret');
    expect(upstream.connections).toBe(0);
  });
});
