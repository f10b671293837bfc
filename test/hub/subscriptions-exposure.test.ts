/**
 * A resource subscription made through the hub lasts only while its agent may still see the server that owns
 * the URI: when an operator narrows the server's exposure away from the agent's groups, disables the server or
 * removes it, the agent hears no more of its updates, whether it subscribed from a 2025 session
 * (`resources/subscribe`) or on a 2026-07-28 `subscriptions/listen` stream; and a listen stream whose token is
 * given other groups ends. Agents still entitled keep hearing. A real gateway on loopback, SDK-built upstreams of
 * both eras on 127.0.0.2, SDK v2 clients as agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { wrapResourceUri } from '../../src/surfaces/hub/names.js';
import { type McpFixture, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { registerWatched, WATCHED } from '../fixtures/watched-resource.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

/** An agent, the resource updates it heard (their URIs, as it named them), and the tool-list changes. */
interface Heard {
  client: Client;
  updates: string[];
  listChanges: number;
}

/** How long after the marker an update that was on its way would have arrived (a bound, not a measurement). */
const SETTLE_MS = 300;

describe("resource subscriptions end with the agent's access to the server", { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** An upstream serving WATCHED, and how to make it say WATCHED changed (without going through the hub). */
  async function watchedUpstream(era: Era): Promise<{ upstream: McpFixture; touch(): Promise<void> }> {
    // A 2025-era fixture's sessions each have their own `McpServer`: an update goes out on each.
    const servers: McpServer[] = [];
    const options = {
      host: PUBLIC_TEST_HOST,
      tools: [] as const,
      register: (server: McpServer) => {
        servers.push(server);
        registerWatched(server);
      },
      serverOptions: { capabilities: { resources: { subscribe: true } } },
    };
    const upstream = era === 'modern' ? await startModernServer(options) : await startLegacyServer(options);
    cleanups.push(() => upstream.close());
    const touch = async () => {
      if (upstream.resourceUpdated) await upstream.resourceUpdated(WATCHED);
      else await Promise.all(servers.map((s) => s.server.sendResourceUpdated({ uri: WATCHED }).catch(() => {})));
    };
    return { upstream, touch };
  }

  /**
   * A gateway with two servers of the upstream era: `up` (exposed to `docs` and `ops`) and `twin`, exposed to
   * `docs`, whose updates are the marker that what `up` said before would have arrived.
   */
  async function setup(upstreamEra: Era) {
    const gw: TestGateway = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const up = await watchedUpstream(upstreamEra);
    const twin = await watchedUpstream(upstreamEra);
    for (const [id, fixture, groups] of [
      ['up', up.upstream, ['docs', 'ops']],
      ['twin', twin.upstream, ['docs']],
    ] as const) {
      expect((await gw.request('POST', '/api/mcp/install', { body: { url: fixture.url, id } })).statusCode).toBe(201);
      expect((await gw.request('POST', `/api/mcp/servers/${id}/test`)).json().ok).toBe(true);
      expect(
        (await gw.request('PATCH', `/api/mcp/servers/${id}/exposure`, { body: { groups: [...groups] } })).statusCode,
      ).toBe(200);
    }
    const tokenOf = async (name: string, groups: string[]) =>
      (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name, groups } })).json() as {
        id: string;
        token: string;
      };
    const base = await gw.listen();
    const agent = async (path: string, token: string, era: Era): Promise<Heard> => {
      const heard: Heard = { client: undefined as unknown as Client, updates: [], listChanges: 0 };
      heard.client = await connectAgent(`${base}${path}`, token, {
        era,
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
    /**
     * Makes an operator's change to `up` and waits until the hub acted on it: `session` (a 2025 session) was
     * told its lists changed, which the hub does as it starts on the snapshot that follows, and that snapshot
     * is built (whatever the hub does with it first has run by the time this awaits it in turn).
     */
    const change = async (session: Heard, request: () => Promise<{ statusCode: number }>) => {
      const before = session.listChanges;
      expect((await request()).statusCode).toBe(200);
      await eventually(() => expect(session.listChanges).toBeGreaterThan(before));
      await gw.gateway.hub.registry.snapshot();
    };
    return { gw, up, twin, tokenOf, agent, change };
  }

  const UP = wrapResourceUri('up', WATCHED);
  const TWIN = wrapResourceUri('twin', WATCHED);

  /** What `docs` agents of both eras subscribe to: `up`'s resource (wrapped and on its own path) and `twin`'s. */
  async function docsAgents(s: Awaited<ReturnType<typeof setup>>) {
    const { token } = await s.tokenOf('docs-agent', ['docs']);
    const session = await s.agent('/mcp', token, 'legacy');
    await session.client.subscribeResource({ uri: UP });
    await session.client.subscribeResource({ uri: TWIN });
    const single = await s.agent('/mcp/s/up', token, 'legacy');
    await single.client.subscribeResource({ uri: WATCHED });
    const listener = await s.agent('/mcp', token, 'modern');
    const stream = await listener.client.listen({ resourceSubscriptions: [UP, TWIN] });
    expect(stream.honoredFilter.resourceSubscriptions).toEqual([UP, TWIN]);
    // Only the twin's path sees twin's resource; its marker reaches the single-server session another way.
    const singleTwin = await s.agent('/mcp/s/twin', token, 'legacy');
    await singleTwin.client.subscribeResource({ uri: WATCHED });
    return { session, single, listener, singleTwin };
  }

  for (const upstreamEra of ['legacy', 'modern'] as const) {
    for (const change of ['exposure', 'disabled', 'removed'] as const) {
      it(`stops relaying a server's updates to agents that lost it (${change}, ${upstreamEra} upstream)`, async () => {
        const s = await setup(upstreamEra);
        const docs = await docsAgents(s);
        // Still sees `up` after the exposure narrows to `ops`: its updates go on.
        const ops = await s.agent('/mcp', (await s.tokenOf('ops-agent', ['ops'])).token, 'modern');
        await ops.client.listen({ resourceSubscriptions: [UP] });

        // Before: every subscriber hears.
        await s.up.touch();
        await eventually(() => expect(docs.session.updates).toEqual([UP]));
        await eventually(() => expect(docs.single.updates).toEqual([WATCHED]));
        await eventually(() => expect(docs.listener.updates).toEqual([UP]));
        await eventually(() => expect(ops.updates).toEqual([UP]));

        const released = s.up.upstream.log.count('notifications/cancelled');
        await s.change(docs.singleTwin, () =>
          change === 'exposure'
            ? s.gw.request('PATCH', '/api/mcp/servers/up/exposure', { body: { groups: ['ops'] } })
            : change === 'disabled'
              ? s.gw.request('PATCH', '/api/mcp/servers/up/config', { body: { enabled: false } })
              : s.gw.request('DELETE', '/api/mcp/servers/up'),
        );

        // After: `up` changes, then `twin` (the marker); only what the agent may still see arrives.
        await s.up.touch();
        await s.twin.touch();
        await eventually(() => expect(docs.session.updates).toContain(TWIN));
        await eventually(() => expect(docs.listener.updates).toContain(TWIN));
        await eventually(() => expect(docs.singleTwin.updates).toEqual([WATCHED]));
        if (change === 'exposure') await eventually(() => expect(ops.updates).toEqual([UP, UP]));
        await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
        // Each subscriber on its own (soft): a failure names every one that still heard.
        expect.soft(docs.session.updates).toEqual([UP, TWIN]);
        expect.soft(docs.single.updates).toEqual([WATCHED]);
        expect.soft(docs.listener.updates).toEqual([UP, TWIN]);
        if (change !== 'exposure') expect.soft(ops.updates).toEqual([UP]);
        // Nobody listens to a disabled or removed 2026-07-28 server any more: the hub's stream there ends.
        if (upstreamEra === 'modern' && change !== 'exposure') {
          await eventually(() => expect(s.up.upstream.log.count('notifications/cancelled')).toBeGreaterThan(released));
        }
      });
    }
  }

  it('does not bring a dropped subscription back when the server is exposed again: the agent subscribes again', async () => {
    const s = await setup('modern');
    const docs = await docsAgents(s);
    await s.change(docs.singleTwin, () =>
      s.gw.request('PATCH', '/api/mcp/servers/up/exposure', { body: { groups: ['ops'] } }),
    );
    await s.change(docs.singleTwin, () =>
      s.gw.request('PATCH', '/api/mcp/servers/up/exposure', { body: { groups: ['docs', 'ops'] } }),
    );
    const again = await s.agent('/mcp', (await s.tokenOf('docs-again', ['docs'])).token, 'legacy');
    await again.client.subscribeResource({ uri: UP });

    await s.up.touch();
    await s.twin.touch();
    await eventually(() => expect(again.updates).toEqual([UP]));
    await eventually(() => expect(docs.listener.updates).toContain(TWIN));
    await eventually(() => expect(docs.session.updates).toContain(TWIN));
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    expect(docs.session.updates).toEqual([TWIN]);
    expect(docs.single.updates).toEqual([]);
    expect(docs.listener.updates).toEqual([TWIN]);
  });

  it('ends a listen stream whose token is given groups that no longer see the server', async () => {
    const s = await setup('modern');
    const { id, token } = await s.tokenOf('docs-agent', ['docs']);
    const listener = await s.agent('/mcp', token, 'modern');
    const stream = await listener.client.listen({ resourceSubscriptions: [UP] });
    const ops = await s.agent('/mcp', (await s.tokenOf('ops-agent', ['ops'])).token, 'modern');
    await ops.client.listen({ resourceSubscriptions: [UP] });
    await s.up.touch();
    await eventually(() => expect(listener.updates).toEqual([UP]));

    expect((await s.gw.request('PATCH', `/api/tokens/${id}`, { body: { groups: ['elsewhere'] } })).statusCode).toBe(
      200,
    );
    await eventually(async () => expect(await Promise.race([stream.closed, Promise.resolve('open')])).not.toBe('open'));
    await s.up.touch();
    await eventually(() => expect(ops.updates).toEqual([UP, UP]));
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    expect(listener.updates).toEqual([UP]);
  });
});
