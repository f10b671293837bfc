/**
 * An upstream that ends the session's GET event stream at once, saying `retry: 0`, gets it reopened at a
 * bounded pace (the SDK alone reopens it in a tight loop, hundreds of times a second), and calls still work.
 */
import type http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { listen, parseJson, readBody, sendJson } from '../fixtures/http.js';
import { Cleanup, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

type Rpc = { id?: unknown; method?: string; params?: { protocolVersion?: string } };

/** Enough of a 2025-era Streamable HTTP server to hold a session; every GET stream ends after one event. */
async function startDroppingUpstream() {
  const seen = { gets: 0 };
  const reply = (res: http.ServerResponse, id: unknown, result: unknown) =>
    sendJson(res, 200, { jsonrpc: '2.0', id, result });
  const listening = await listen(async (req, res) => {
    if (req.method === 'GET') {
      seen.gets += 1;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('id: 1\nretry: 0\n\n');
      return;
    }
    if (req.method === 'DELETE') {
      res.writeHead(200).end();
      return;
    }
    const message = parseJson(await readBody(req)) as Rpc | undefined;
    if (message?.id === undefined) {
      res.writeHead(202).end();
      return;
    }
    res.setHeader('mcp-session-id', 'dropping-session');
    switch (message.method) {
      case 'initialize':
        return reply(res, message.id, {
          protocolVersion: message.params?.protocolVersion ?? '2025-06-18',
          capabilities: { tools: { listChanged: true } },
          serverInfo: { name: 'dropping', version: '1' },
        });
      case 'tools/list':
        return reply(res, message.id, { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] });
      case 'tools/call':
        return reply(res, message.id, { content: [{ type: 'text', text: 'ok' }] });
      default:
        // `server/discover` included: a 2025-only server, so the client falls back to `initialize`.
        return sendJson(res, 200, { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'no' } });
    }
  });
  return { seen, url: `${listening.origin}/mcp`, close: () => listening.close() };
}

describe('the session GET stream of a 2025-era upstream', () => {
  it('is reopened at a bounded pace when the upstream ends it at once with retry: 0', async () => {
    const upstream = cleanup.add(await startDroppingUpstream());
    const pool = cleanup.add(makePool());
    const target = { url: upstream.url };
    const { tools } = await pool.listTools(target);
    expect(tools.map((t) => t.name)).toEqual(['echo']);

    await sleep(2_000);
    // One open, then reopens after 1 s, 2 s, … Without pacing it is hundreds.
    expect(upstream.seen.gets).toBeGreaterThanOrEqual(1);
    expect(upstream.seen.gets).toBeLessThanOrEqual(4);

    // The session still answers over POST.
    const result = await pool.callTool(target, 'echo', {});
    expect(result.content).toEqual([{ type: 'text', text: 'ok' }]);
  });
});
