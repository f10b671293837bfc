/**
 * What an upstream tells the agent on its own initiative reaches it through the hub (issue 19): log messages a
 * tool sends during a call (filtered by the level the agent's own 2025 session set), and resource updates for
 * the URIs the agent subscribed to (wrapped on `/mcp`). A real gateway on loopback, SDK-built upstreams of both
 * eras on 127.0.0.2, SDK v2 clients as agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { wrapResourceUri } from '../../src/surfaces/hub/names.js';
import { type McpFixture, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { registerWatched, WATCHED } from '../fixtures/watched-resource.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

/** A tool that logs at two levels, a subscribable resource, and a tool that says it changed. */
function register(server: McpServer): void {
  server.registerTool('chatty', { description: 'Logs twice.', inputSchema: z.object({}) }, async (_args, ctx) => {
    await ctx.mcpReq.log('info', 'routine detail', 'chatty');
    await ctx.mcpReq.log('error', 'something broke', 'chatty');
    return { content: [{ type: 'text' as const, text: 'done' }] };
  });
  registerWatched(server);
}

describe('upstream notifications through the hub', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  const clients: Client[] = [];

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(
    upstreamEra: Era,
  ): Promise<{ gw: TestGateway; base: string; token: string; upstream: McpFixture }> {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const options = {
      host: PUBLIC_TEST_HOST,
      tools: [] as const,
      register,
      serverOptions: { capabilities: { logging: {}, resources: { subscribe: true } } },
    };
    const upstream: McpFixture =
      upstreamEra === 'modern' ? await startModernServer(options) : await startLegacyServer(options);
    cleanups.push(() => upstream.close());
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    await gw.request('PATCH', '/api/mcp/servers/up/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json();
    return { gw, base: await gw.listen(), token, upstream };
  }

  /** A 2025-era agent that records the log messages it receives. */
  async function logged(url: string, token: string): Promise<{ agent: Client; messages: unknown[] }> {
    const messages: unknown[] = [];
    const agent = await connectAgent(url, token, {
      era: 'legacy',
      prepare: (client) =>
        client.setNotificationHandler('notifications/message', (n) => {
          messages.push(n.params);
        }),
    });
    clients.push(agent);
    return { agent, messages };
  }

  for (const upstreamEra of ['legacy', 'modern'] as const) {
    it(`relays a call's log messages to the session that made it, at that session's level (${upstreamEra} upstream)`, async () => {
      const s = await setup(upstreamEra);
      const quiet = await logged(`${s.base}/mcp`, s.token);
      const verbose = await logged(`${s.base}/mcp/s/up`, s.token);
      await quiet.agent.setLoggingLevel('warning');
      await verbose.agent.setLoggingLevel('debug');

      expect((await quiet.agent.callTool({ name: 'up__chatty', arguments: {} })).content).toEqual([
        { type: 'text', text: 'done' },
      ]);
      expect(quiet.messages).toEqual([{ level: 'error', logger: 'chatty', data: 'something broke' }]);

      await verbose.agent.callTool({ name: 'chatty', arguments: {} });
      expect(verbose.messages).toEqual([
        { level: 'info', logger: 'chatty', data: 'routine detail' },
        { level: 'error', logger: 'chatty', data: 'something broke' },
      ]);
      // Neither session heard the other's call.
      expect(quiet.messages).toHaveLength(1);
    });

    it(`relays them on the SDK client's path too (a call with a progress token), per session (${upstreamEra} upstream)`, async () => {
      const s = await setup(upstreamEra);
      const quiet = await logged(`${s.base}/mcp`, s.token);
      const verbose = await logged(`${s.base}/mcp/s/up`, s.token);
      const silent = await logged(`${s.base}/mcp/s/up`, s.token);
      await quiet.agent.setLoggingLevel('error');
      await verbose.agent.setLoggingLevel('info');
      const progress = { onprogress: () => {} };

      // Concurrent calls on the one shared upstream connection: each hears only its own call's messages.
      const [a, b, c] = await Promise.all([
        quiet.agent.callTool({ name: 'up__chatty', arguments: {} }, progress),
        verbose.agent.callTool({ name: 'chatty', arguments: {} }, progress),
        silent.agent.callTool({ name: 'chatty', arguments: {} }, progress),
      ]);
      for (const result of [a, b, c]) expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
      expect(quiet.messages).toEqual([{ level: 'error', logger: 'chatty', data: 'something broke' }]);
      expect(verbose.messages).toEqual([
        { level: 'info', logger: 'chatty', data: 'routine detail' },
        { level: 'error', logger: 'chatty', data: 'something broke' },
      ]);
      // A session that set no level hears nothing.
      expect(silent.messages).toEqual([]);
    });
  }

  it('subscribes a 2026-07-28 upstream through its listen stream, and relays its updates to the subscribed sessions', async () => {
    const s = await setup('modern');
    const other = 'file:///other.txt';
    const updates: string[] = [];
    const subscriber = await connectAgent(`${s.base}/mcp`, s.token, {
      era: 'legacy',
      prepare: (client) =>
        client.setNotificationHandler('notifications/resources/updated', (n) => {
          updates.push(n.params.uri);
        }),
    });
    clients.push(subscriber);
    const singleUpdates: string[] = [];
    const single = await connectAgent(`${s.base}/mcp/s/up`, s.token, {
      era: 'legacy',
      prepare: (client) =>
        client.setNotificationHandler('notifications/resources/updated', (n) => {
          singleUpdates.push(n.params.uri);
        }),
    });
    clients.push(single);
    const upstream = s.upstream;
    const listens = () => upstream.log.count('subscriptions/listen');

    const wrapped = wrapResourceUri('up', WATCHED);
    await expect(subscriber.subscribeResource({ uri: wrapped })).resolves.toEqual({});
    // Acknowledged before the answer: an update sent right after reaches the session.
    await upstream.resourceUpdated?.(WATCHED);
    await eventually(() => expect(updates).toEqual([wrapped]));
    expect(singleUpdates).toEqual([]);
    expect(listens()).toBe(1);

    // Another session, another URI: one stream naming both replaces the first.
    await expect(single.subscribeResource({ uri: other })).resolves.toEqual({});
    expect(listens()).toBe(2);
    await upstream.resourceUpdated?.(other);
    await upstream.resourceUpdated?.(WATCHED);
    await eventually(() => expect(updates).toEqual([wrapped, wrapped]));
    await eventually(() => expect(singleUpdates).toEqual([other]));
    // The same URI again is already on the stream.
    await expect(single.subscribeResource({ uri: WATCHED })).resolves.toEqual({});
    expect(listens()).toBe(2);

    // Unsubscribed, the URI leaves the stream once no session listens to it there.
    await expect(subscriber.unsubscribeResource({ uri: wrapped })).resolves.toEqual({});
    await expect(single.unsubscribeResource({ uri: WATCHED })).resolves.toEqual({});
    await eventually(() => expect(listens()).toBe(3));
    await upstream.resourceUpdated?.(WATCHED);
    await upstream.resourceUpdated?.(other);
    // The update of the URI left out does not come (the later one, on the same stream, does).
    await eventually(() => expect(singleUpdates).toEqual([other, other]));
    expect(updates).toEqual([wrapped, wrapped]);
    // A session that closes takes its subscriptions along: no session listens, no stream stays open.
    await (single.transport as unknown as { terminateSession(): Promise<void> }).terminateSession();
    await eventually(() => expect(upstream.log.count('notifications/cancelled')).toBe(3));
    expect(listens()).toBe(3);
  });

  it('passes subscriptions to the upstream and its updates to the subscribed sessions, URIs rewritten', async () => {
    const s = await setup('legacy');
    const updates: string[] = [];
    const subscriber = await connectAgent(`${s.base}/mcp`, s.token, {
      era: 'legacy',
      prepare: (client) =>
        client.setNotificationHandler('notifications/resources/updated', (n) => {
          updates.push(n.params.uri);
        }),
    });
    clients.push(subscriber);
    const bystanderUpdates: string[] = [];
    const bystander = await connectAgent(`${s.base}/mcp`, s.token, {
      era: 'legacy',
      prepare: (client) =>
        client.setNotificationHandler('notifications/resources/updated', (n) => {
          bystanderUpdates.push(n.params.uri);
        }),
    });
    clients.push(bystander);
    expect(subscriber.getServerCapabilities()?.resources?.subscribe).toBe(true);

    const wrapped = wrapResourceUri('up', WATCHED);
    await expect(subscriber.subscribeResource({ uri: wrapped })).resolves.toEqual({});
    await bystander.callTool({ name: 'up__touch', arguments: {} });
    await eventually(() => expect(updates).toEqual([wrapped]));
    expect(bystanderUpdates).toEqual([]);

    await expect(subscriber.unsubscribeResource({ uri: wrapped })).resolves.toEqual({});
    await bystander.callTool({ name: 'up__touch', arguments: {} });
    // A marker that arrives after any stray update would: the session still gets its own call's answer.
    await subscriber.callTool({ name: 'up__touch', arguments: {} });
    expect(updates).toEqual([wrapped]);

    // A URI of no server the caller sees is refused, as a read of it is.
    await expect(subscriber.subscribeResource({ uri: wrapResourceUri('nope', WATCHED) })).rejects.toThrow(/not found/);

    // A session that closes takes its subscriptions along, and the upstream is told once no session listens.
    expect(s.upstream.log.count('resources/unsubscribe')).toBe(1);
    await expect(subscriber.subscribeResource({ uri: wrapped })).resolves.toEqual({});
    await expect(bystander.subscribeResource({ uri: wrapped })).resolves.toEqual({});
    await (subscriber.transport as unknown as { terminateSession(): Promise<void> }).terminateSession();
    await bystander.callTool({ name: 'up__touch', arguments: {} });
    await eventually(() => expect(bystanderUpdates).toEqual([wrapped]));
    expect(s.upstream.log.count('resources/unsubscribe')).toBe(1);
    await (bystander.transport as unknown as { terminateSession(): Promise<void> }).terminateSession();
    await eventually(() => expect(s.upstream.log.count('resources/unsubscribe')).toBe(2));
  });
});
