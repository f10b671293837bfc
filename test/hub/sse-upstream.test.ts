/**
 * A legacy HTTP+SSE upstream (2024-11-05 transport) registered in the gateway and used through the hub
 * (issue 19): detected from its `/sse` URL or named in a manifest, handshaken, and called through `/mcp`
 * and `/mcp/s/{id}` by SDK v2 agents of both eras. The upstream is a real SDK v1 `SSEServerTransport`
 * server on 127.0.0.2 (public through the egress guard's test seam); the gateway listens on loopback.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { type SseFixture, startSseServer } from '../fixtures/sse-server.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const ERAS: Era[] = ['modern', 'legacy'];

describe('HTTP+SSE upstreams through the hub', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  const clients: Client[] = [];

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(install: (upstream: SseFixture) => object) {
    const gw: TestGateway = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const upstream = await startSseServer({ host: PUBLIC_TEST_HOST, name: 'legacy-sse' });
    cleanups.push(() => upstream.close());
    const installed = await gw.request('POST', '/api/mcp/install', { body: install(upstream) });
    expect(installed.statusCode).toBe(201);
    const policy = await gw.request('PATCH', '/api/mcp/servers/up/tools', {
      body: { mode: 'all', allow: ['echo', 'add'], defaultTier: 'blocked' },
    });
    expect(policy.statusCode).toBe(200);
    const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json();
    return { gw, upstream, token, installed: installed.json().installed, base: await gw.listen() };
  }

  it('detects the transport from a /sse URL, handshakes, and serves its tools on /mcp and /mcp/s/{id}, both eras', async () => {
    const s = await setup((upstream) => ({ url: upstream.url, id: 'up' }));
    expect(s.installed).toMatchObject({ transport: 'sse', url: s.upstream.url });
    const tested = (await s.gw.request('POST', '/api/mcp/servers/up/test')).json();
    expect(tested).toMatchObject({ ok: true });
    const detail = (await s.gw.request('GET', '/api/mcp/servers/up')).json();
    expect(detail).toMatchObject({ transport: 'sse', status: 'connected' });
    expect(detail.discoveredTools.map((t: { name: string }) => t.name).sort()).toEqual([
      'add',
      'chatty',
      'echo',
      'slow',
    ]);

    for (const era of ERAS) {
      const aggregate = await connectAgent(`${s.base}/mcp`, s.token, { era });
      clients.push(aggregate);
      const names = (await aggregate.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['up__echo', 'up__add']));
      expect((await aggregate.callTool({ name: 'up__echo', arguments: { text: era } })).content).toEqual([
        { type: 'text', text: era },
      ]);

      const single = await connectAgent(`${s.base}/mcp/s/up`, s.token, { era });
      clients.push(single);
      const added = await single.callTool({ name: 'add', arguments: { a: 2, b: 40 } });
      expect(added.structuredContent).toEqual({ sum: 42 });
      expect(single.getServerVersion()?.name).toBe('legacy-sse');
    }
    // Everything the gateway sent went over the legacy transport: the upstream saw no 2026-07-28 probe.
    expect(s.upstream.log.count('server/discover')).toBe(0);
    expect(s.upstream.log.count('tools/call')).toBe(4);
  });

  it("relays a call's log messages to the 2025 session that made it, at its level (one stream carries them all)", async () => {
    const s = await setup((upstream) => ({ url: upstream.url, id: 'up' }));
    expect((await s.gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    await s.gw.request('PATCH', '/api/mcp/servers/up/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    const logs: unknown[] = [];
    const agent = await connectAgent(`${s.base}/mcp/s/up`, s.token, {
      era: 'legacy',
      prepare: (client) =>
        client.setNotificationHandler('notifications/message', (n) => {
          logs.push(n.params);
        }),
    });
    clients.push(agent);
    await agent.setLoggingLevel('error');
    expect((await agent.callTool({ name: 'chatty', arguments: {} })).content).toEqual([{ type: 'text', text: 'done' }]);
    expect(logs).toEqual([{ level: 'error', logger: 'chatty', data: 'something broke' }]);

    // While another agent's call is in flight nothing says whose a message is: it reaches no one.
    const other = await connectAgent(`${s.base}/mcp/s/up`, s.token, { era: 'legacy' });
    clients.push(other);
    const calls = s.upstream.log.count('tools/call');
    const slow = other.callTool({ name: 'slow', arguments: { ms: 3000 } });
    // The slow call is in the upstream's hands before the chatty one starts.
    for (let i = 0; i < 200 && s.upstream.log.count('tools/call') === calls; i++)
      await new Promise((r) => setTimeout(r, 10));
    await agent.callTool({ name: 'chatty', arguments: {} });
    await slow;
    expect(logs).toHaveLength(1);
  });

  it('takes transport "sse" from a manifest and sends its headers on the stream and on every POST', async () => {
    const s = await setup((upstream) => ({
      manifest: {
        id: 'up',
        name: 'Legacy SSE',
        transport: 'sse',
        url: upstream.url,
        headers: { 'X-Api-Key': 'k-123' },
      },
    }));
    expect(s.installed).toMatchObject({ transport: 'sse', headers: { 'X-Api-Key': { set: true } } });
    expect((await s.gw.request('POST', '/api/mcp/servers/up/test')).json()).toMatchObject({ ok: true });
    const agent = await connectAgent(`${s.base}/mcp/s/up`, s.token, { era: 'modern' });
    clients.push(agent);
    expect((await agent.callTool({ name: 'echo', arguments: { text: 'hi' } })).content).toEqual([
      { type: 'text', text: 'hi' },
    ]);
    expect(s.upstream.log.records.length).toBeGreaterThan(0);
    for (const record of s.upstream.log.records) expect(record.headers['x-api-key']).toBe('k-123');
  });

  it('refuses transport with anything but a URL, and installs a /sse URL as Streamable HTTP when told to', async () => {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const refused = await gw.request('POST', '/api/mcp/install', {
      body: { preset: 'anything', transport: 'sse' },
    });
    expect(refused.statusCode).toBe(400);
    const told = await gw.request('POST', '/api/mcp/install', {
      body: { url: `http://${PUBLIC_TEST_HOST}:1/sse`, id: 'plain', transport: 'streamable-http' },
    });
    expect(told.statusCode).toBe(201);
    expect(told.json().installed).toMatchObject({ transport: 'streamable-http' });
  });
});
