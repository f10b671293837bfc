/**
 * A server record's change ends the pooled upstream connections it no longer wants at once, not after the
 * pool's idle time (five minutes by default): changed headers (a rotated key), disabling, uninstalling. A
 * change that keeps the connection (a tool policy) ends nothing. Seen from a real 2025-era upstream, which
 * hears its session ended (DELETE) and the session's GET stream stop.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listen, parseJson, readBody, sendJson } from '../fixtures/http.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

type Rpc = { id?: unknown; method?: string; params?: { protocolVersion?: string } };

/** A 2025-era upstream: one session per `initialize`, named after the `x-key` header it was opened with. */
async function startSessionUpstream() {
  const seen = { deleted: [] as string[], openStreams: new Set<string>() };
  let sessions = 0;
  const listening = await listen(async (req, res) => {
    const session = String(req.headers['mcp-session-id'] ?? '');
    if (req.method === 'GET') {
      // The session's event stream, held open until the gateway lets go of it.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
      seen.openStreams.add(session);
      res.on('close', () => seen.openStreams.delete(session));
      return;
    }
    if (req.method === 'DELETE') {
      seen.deleted.push(session);
      res.writeHead(200).end();
      return;
    }
    const message = parseJson(await readBody(req)) as Rpc | undefined;
    if (message?.id === undefined) {
      res.writeHead(202).end();
      return;
    }
    if (message.method === 'initialize') {
      sessions += 1;
      res.setHeader('mcp-session-id', `${req.headers['x-key']}-${sessions}`);
      return sendJson(res, 200, {
        jsonrpc: '2.0',
        id: message.id,
        result: {
          protocolVersion: message.params?.protocolVersion ?? '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: { name: 'sessions', version: '1' },
        },
      });
    }
    res.setHeader('mcp-session-id', session);
    if (message.method === 'tools/list') {
      return sendJson(res, 200, {
        jsonrpc: '2.0',
        id: message.id,
        result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] },
      });
    }
    // `server/discover` included: a 2025-only server.
    return sendJson(res, 200, { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'no' } });
  }, PUBLIC_TEST_HOST);
  return { seen, url: `${listening.origin}/mcp`, close: () => listening.close() };
}

describe('pooled upstream connections of a changed server', () => {
  let gw: TestGateway;
  let upstream: Awaited<ReturnType<typeof startSessionUpstream>>;

  beforeEach(async () => {
    upstream = await startSessionUpstream();
    // A long idle time, so that only the change can end a connection here.
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_POOL_IDLE_MS: '600000' });
  });
  afterEach(async () => {
    await gw.close();
    await upstream.close();
  });

  const handshake = async () => {
    const test = await gw.request('POST', '/api/mcp/servers/janitor/test');
    expect(test.json()).toMatchObject({ ok: true });
  };

  it('end when the headers change, when it is disabled and when it is uninstalled; a tool policy keeps them', async () => {
    const installed = await gw.request('POST', '/api/mcp/install', {
      body: { url: upstream.url, id: 'janitor' },
    });
    expect(installed.statusCode, installed.body).toBe(201);
    const keyed = await gw.request('PATCH', '/api/mcp/servers/janitor/config', {
      body: { headers: { 'x-key': 'one' } },
    });
    expect(keyed.statusCode).toBe(200);
    await handshake();
    await eventually(() => expect([...upstream.seen.openStreams]).toEqual(['one-1']));

    // A change that keeps the connection ends nothing.
    const policy = await gw.request('PATCH', '/api/mcp/servers/janitor/tools', { body: { allow: ['echo'] } });
    expect(policy.statusCode).toBe(200);
    await sleep(300);
    expect(upstream.seen.deleted).toEqual([]);
    expect([...upstream.seen.openStreams]).toEqual(['one-1']);

    // A rotated key: the session opened with the old one ends now.
    const rotated = await gw.request('PATCH', '/api/mcp/servers/janitor/config', {
      body: { headers: { 'x-key': 'two' } },
    });
    expect(rotated.statusCode).toBe(200);
    await eventually(() => {
      expect(upstream.seen.deleted).toEqual(['one-1']);
      expect(upstream.seen.openStreams.size).toBe(0);
    });

    await handshake();
    await eventually(() => expect([...upstream.seen.openStreams]).toEqual(['two-2']));
    const disabled = await gw.request('PATCH', '/api/mcp/servers/janitor/config', { body: { enabled: false } });
    expect(disabled.statusCode).toBe(200);
    await eventually(() => {
      expect(upstream.seen.deleted).toEqual(['one-1', 'two-2']);
      expect(upstream.seen.openStreams.size).toBe(0);
    });

    // Enabled again and used, then uninstalled.
    expect((await gw.request('PATCH', '/api/mcp/servers/janitor/config', { body: { enabled: true } })).statusCode).toBe(
      200,
    );
    await handshake();
    await eventually(() => expect([...upstream.seen.openStreams]).toEqual(['two-3']));
    expect((await gw.request('DELETE', '/api/mcp/servers/janitor')).statusCode).toBe(200);
    await eventually(() => {
      expect(upstream.seen.deleted).toEqual(['one-1', 'two-2', 'two-3']);
      expect(upstream.seen.openStreams.size).toBe(0);
    });
  });
});
