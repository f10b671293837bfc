/**
 * A 2026-07-28 agent's own `subscriptions/listen` stream reaches upstream resource updates through the hub
 * (issue 19): the URIs it names are subscribed on the upstream that owns them (as `resources/subscribe` would
 * be), each update reaches the streams that named it with the URI as each agent named it (wrapped on `/mcp`),
 * a token that may not see the server is told nothing (its URI is left out of the ack) and hears nothing, and
 * the upstream is released when the last stream leaves. A real gateway on loopback, SDK-built upstreams of both
 * eras on 127.0.0.2, SDK v2 clients as agents.
 */
import type { Client, McpSubscription } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { wrapResourceUri } from '../../src/surfaces/hub/names.js';
import { type McpFixture, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { registerWatched, WATCHED } from '../fixtures/watched-resource.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const WRAPPED = wrapResourceUri('up', WATCHED);

/** A 2026-07-28 agent with what it heard: resource updates (their URIs) and list changes. */
interface Listener {
  client: Client;
  updates: string[];
  listChanges: number;
}

describe('a 2026-07-28 agent listening to resources through the hub', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(upstreamEra: Era) {
    const gw: TestGateway = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const options = {
      host: PUBLIC_TEST_HOST,
      tools: [] as const,
      register: registerWatched,
      serverOptions: { capabilities: { resources: { subscribe: true } } },
    };
    const upstream: McpFixture =
      upstreamEra === 'modern' ? await startModernServer(options) : await startLegacyServer(options);
    cleanups.push(() => upstream.close());
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    await gw.request('PATCH', '/api/mcp/servers/up/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    const tokenOf = async (name: string, groups?: string[]) =>
      (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name, ...(groups ? { groups } : {}) } })).json()
        .token as string;
    const base = await gw.listen();
    /** A 2026-07-28 agent on `path` that records what its listen streams deliver. */
    const agent = async (path: string, token: string): Promise<Listener> => {
      const heard: Listener = { client: undefined as unknown as Client, updates: [], listChanges: 0 };
      heard.client = await connectAgent(`${base}${path}`, token, {
        era: 'modern',
        prepare: (client) => {
          client.setNotificationHandler('notifications/resources/updated', (n) => {
            heard.updates.push(n.params.uri);
          });
          client.setNotificationHandler('notifications/tools/list_changed', () => {
            heard.listChanges += 1;
          });
        },
      });
      cleanups.push(() => heard.client.close().catch(() => {}));
      return heard;
    };
    /** Makes the upstream say WATCHED changed, as its era does. */
    const touch = async () => {
      if (upstream.resourceUpdated) await upstream.resourceUpdated(WATCHED);
      else {
        const caller = await agent('/mcp', await tokenOf('caller'));
        await caller.client.callTool({ name: 'up__touch', arguments: {} });
      }
    };
    /** Every open listen stream hears a list change: one that arrives after it proves nothing else is on its way. */
    const marker = () => gw.gateway.hub.endpoint.notifyListChanged();
    return { gw, base, upstream, tokenOf, agent, touch, marker };
  }

  const listen = (heard: Listener, uris: string[]): Promise<McpSubscription> =>
    heard.client.listen({ resourceSubscriptions: uris, toolsListChanged: true });

  for (const upstreamEra of ['legacy', 'modern'] as const) {
    it(`delivers an upstream's update to the streams that named it, as each named it, and to no other (${upstreamEra} upstream)`, async () => {
      const s = await setup(upstreamEra);
      const token = await s.tokenOf('agent');
      const single = await s.agent('/mcp/s/up', token);
      const aggregate = await s.agent('/mcp', token);
      const unrelated = await s.agent('/mcp', token);
      const outsider = await s.agent('/mcp', await s.tokenOf('outsider', ['elsewhere']));

      const onSingle = await listen(single, [WATCHED]);
      expect(onSingle.honoredFilter).toEqual({ resourceSubscriptions: [WATCHED], toolsListChanged: true });
      const onAggregate = await listen(aggregate, [WRAPPED]);
      expect(onAggregate.honoredFilter).toEqual({ resourceSubscriptions: [WRAPPED], toolsListChanged: true });
      // A URI of no server the caller sees, in either form, is not honored: the ack leaves it out.
      const onUnrelated = await listen(unrelated, [WATCHED, wrapResourceUri('nope', WATCHED)]);
      expect(onUnrelated.honoredFilter).toEqual({ toolsListChanged: true });
      // The same string as the subscriber's, from a token whose groups do not see the server: nothing honored.
      const onOutsider = await listen(outsider, [WRAPPED]);
      expect(onOutsider.honoredFilter).toEqual({ toolsListChanged: true });
      // Nor may it address the server's own path.
      await expect(
        connectAgent(`${s.base}/mcp/s/up`, await s.tokenOf('outsider-2', ['elsewhere']), { era: 'modern' }),
      ).rejects.toThrow();

      // Acknowledged only once the upstream was subscribed: an update sent right after reaches the streams.
      await s.touch();
      await eventually(() => expect(single.updates).toEqual([WATCHED]));
      await eventually(() => expect(aggregate.updates).toEqual([WRAPPED]));
      s.marker();
      for (const other of [unrelated, outsider]) await eventually(() => expect(other.listChanges).toBe(1));
      expect(unrelated.updates).toEqual([]);
      expect(outsider.updates).toEqual([]);
      await eventually(() => expect(single.listChanges).toBe(1));
      expect(single.updates).toEqual([WATCHED]);
    });

    it(`keeps the upstream subscribed while any stream listens, and releases it when the last leaves (${upstreamEra} upstream)`, async () => {
      const s = await setup(upstreamEra);
      const token = await s.tokenOf('agent');
      const first = await s.agent('/mcp/s/up', token);
      const second = await s.agent('/mcp', token);
      const subscribes = () =>
        upstreamEra === 'modern'
          ? s.upstream.log.count('subscriptions/listen')
          : s.upstream.log.count('resources/subscribe');
      const releases = () =>
        upstreamEra === 'modern'
          ? s.upstream.log.count('notifications/cancelled')
          : s.upstream.log.count('resources/unsubscribe');

      const firstStream = await listen(first, [WATCHED]);
      const secondStream = await listen(second, [WRAPPED]);
      // A 2026-07-28 upstream's one stream already names the URI; a 2025 one is asked on each subscription.
      expect(subscribes()).toBe(upstreamEra === 'modern' ? 1 : 2);
      await s.touch();
      await eventually(() => expect(first.updates).toEqual([WATCHED]));
      await eventually(() => expect(second.updates).toEqual([WRAPPED]));

      // One agent leaves: the other still hears, and the upstream is not released.
      await firstStream.close();
      await s.touch();
      await eventually(() => expect(second.updates).toEqual([WRAPPED, WRAPPED]));
      s.marker();
      await eventually(() => expect(second.listChanges).toBe(1));
      expect(first.updates).toEqual([WATCHED]);
      expect(releases()).toBe(0);

      // The last leaves: the upstream is released (unsubscribed, or its stream ended).
      await secondStream.close();
      await eventually(() => expect(releases()).toBe(1));
      expect(subscribes()).toBe(upstreamEra === 'modern' ? 1 : 2);

      // Listening again subscribes again, and is heard again.
      const again = await listen(first, [WATCHED]);
      expect(subscribes()).toBe(upstreamEra === 'modern' ? 2 : 3);
      await s.touch();
      await eventually(() => expect(first.updates).toEqual([WATCHED, WATCHED]));
      await again.close();
      await eventually(() => expect(releases()).toBe(2));
    });
  }

  it('scopes updates by server, not by URI string: the same URI on another server is another subscription', async () => {
    const s = await setup('modern');
    const twin = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: [],
      register: registerWatched,
      serverOptions: { capabilities: { resources: { subscribe: true } } },
    });
    cleanups.push(() => twin.close());
    expect((await s.gw.request('POST', '/api/mcp/install', { body: { url: twin.url, id: 'twin' } })).statusCode).toBe(
      201,
    );
    expect((await s.gw.request('POST', '/api/mcp/servers/twin/test')).json().ok).toBe(true);
    const token = await s.tokenOf('agent');
    const onUp = await s.agent('/mcp/s/up', token);
    const onTwin = await s.agent('/mcp/s/twin', token);
    const onBoth = await s.agent('/mcp', token);
    await listen(onUp, [WATCHED]);
    await listen(onTwin, [WATCHED]);
    const twinWrapped = wrapResourceUri('twin', WATCHED);
    await listen(onBoth, [WRAPPED, twinWrapped]);

    // Only `up` says the resource changed: the stream on `twin` names the same string and hears nothing.
    await s.touch();
    await eventually(() => expect(onUp.updates).toEqual([WATCHED]));
    await eventually(() => expect(onBoth.updates).toEqual([WRAPPED]));
    s.marker();
    await eventually(() => expect(onTwin.listChanges).toBeGreaterThan(0));
    expect(onTwin.updates).toEqual([]);

    await twin.resourceUpdated?.(WATCHED);
    await eventually(() => expect(onTwin.updates).toEqual([WATCHED]));
    await eventually(() => expect(onBoth.updates).toEqual([WRAPPED, twinWrapped]));
    expect(onUp.updates).toEqual([WATCHED]);
  });

  it('holds no more URIs per stream than a session may subscribe to', async () => {
    const s = await setup('modern');
    const heard = await s.agent('/mcp/s/up', await s.tokenOf('agent'));
    const many = Array.from({ length: 150 }, (_, i) => `file:///r${i}.txt`);
    const stream = await listen(heard, many);
    expect(stream.honoredFilter.resourceSubscriptions).toEqual(many.slice(0, 100));
    // One upstream stream names them all (the URIs were added together).
    expect(s.upstream.log.count('subscriptions/listen')).toBe(1);
    await stream.close();
  });
});
