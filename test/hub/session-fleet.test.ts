/**
 * A 2025-era session's work behind a balancer without affinity (`shared-sessions.ts`, SessionMessage): two
 * gateways on one PostgreSQL stand for replicas, and each request of one session goes to the replica the test
 * names. A call runs on one and its `notifications/cancelled` reaches the other: the call stops, upstream too,
 * on the hub's fast path and on the SDK's path (a call with a progress token) alike. A resource subscription
 * made on one replica sends its updates to the agent's GET stream held by the other, and ends when the agent
 * unsubscribes there; when the replica that made it stops, another takes it over and the updates go on; made
 * again on the other replica, it is relayed from there alone.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type McpFixture, startLegacyServer } from '../fixtures/mcp-servers.js';
import { registerWatched, WATCHED } from '../fixtures/watched-resource.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

const VERSION = '2025-06-18';

/** Far past the test's waits, so only the cancellation can stop the call. */
const ENV = { GATEHOUSE_CALL_TIMEOUT_MS: '120000' };

describe.skipIf(!POSTGRES_AVAILABLE)('a 2025 session served by two replicas [postgres]', { timeout: 60_000 }, () => {
  let place: Awaited<ReturnType<typeof postgresTarget.fresh>>;
  let one: TestGateway;
  let two: TestGateway;
  let bases: [string, string];
  let upstream: McpFixture;
  let token: string;

  beforeAll(async () => {
    upstream = await startLegacyServer({
      host: PUBLIC_TEST_HOST,
      tools: ['slow'],
      register: registerWatched,
      serverOptions: { capabilities: { resources: { subscribe: true } } },
    });
    place = await postgresTarget.fresh();
    one = await startTestGateway(postgresTarget, ENV, {}, place);
    two = await startTestGateway(postgresTarget, ENV, {}, place);
    bases = [await one.listen(), await two.listen()];
    expect((await one.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    await one.request('PATCH', '/api/mcp/servers/up/tools', { body: { allow: ['slow', 'touch'] } });
    expect((await one.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    token = (await one.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json().token;
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
    await place?.cleanup();
    await upstream?.close();
  });

  /** One POST to `/mcp/s/up` of a replica, as a 2025-era agent sends it (in its session, once it has one). */
  const post = (base: string, body: unknown, sessionId?: string, signal = AbortSignal.timeout(30_000)) =>
    fetch(`${base}/mcp/s/up`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION } : {}),
      },
      body: JSON.stringify(body),
      signal,
    });

  async function openSession(base: string): Promise<string> {
    const opened = await post(base, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'agent', version: '1.0.0' } },
    });
    expect(opened.status).toBe(200);
    await opened.text();
    const sessionId = opened.headers.get('mcp-session-id') as string;
    expect((await post(base, { jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId)).status).toBe(202);
    return sessionId;
  }

  /** A request of the session on a replica, answered 200: its body. */
  const callIn = (sessionId: string) => (base: string, id: number, method: string, params: Record<string, unknown>) =>
    post(base, { jsonrpc: '2.0', id, method, params }, sessionId).then(async (answer) => {
      expect(answer.status).toBe(200);
      return answer.text();
    });

  /** The agent's GET stream of the session, opened on a replica: what it has heard so far, and its end. */
  function listen(base: string, sessionId: string): { heard(): string; stop(): Promise<void> } {
    const agentGone = new AbortController();
    let heard = '';
    const reading = fetch(`${base}/mcp/s/up`, {
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'text/event-stream',
        'mcp-session-id': sessionId,
        'mcp-protocol-version': VERSION,
      },
      signal: agentGone.signal,
    })
      .then(async (stream) => {
        expect(stream.status).toBe(200);
        const decoder = new TextDecoder();
        for await (const chunk of stream.body as unknown as AsyncIterable<Uint8Array>) heard += decoder.decode(chunk);
      })
      .catch(() => {});
    return {
      heard: () => heard,
      stop: async () => {
        agentGone.abort();
        await reading;
      },
    };
  }

  const UPDATE = `"method":"notifications/resources/updated","params":{"uri":"${WATCHED}"}`;

  for (const path of ['fast', 'sdk'] as const) {
    it(`stops a call running on one replica when its cancellation reaches the other (${path} path)`, async () => {
      const sessionId = await openSession(bases[0]);
      const started = upstream.stats.calls.slow ?? 0;
      const cancelled = upstream.stats.cancelled;
      const id = path === 'fast' ? 41 : 42;
      // A progress token takes the SDK's path (the fast path leaves such calls to it).
      const meta = path === 'sdk' ? { _meta: { progressToken: 'p1' } } : {};
      const agentGone = new AbortController();
      const running = post(
        bases[0],
        { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { ms: 50_000 }, ...meta } },
        sessionId,
        agentGone.signal,
      ).then(
        (answer) => answer.text(),
        () => 'gone',
      );
      await eventually(() => expect(upstream.stats.calls.slow ?? 0).toBe(started + 1), 10_000);

      const cancel = await post(
        bases[1],
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'changed my mind' } },
        sessionId,
      );
      expect(cancel.status).toBe(202);
      await eventually(() => expect(upstream.stats.cancelled).toBe(cancelled + 1), 10_000);
      // A cancelled request is not answered (the fast path ends its stream; the SDK's keeps it open).
      if (path === 'fast') expect(await running).not.toContain('"result"');
      agentGone.abort();
      await running;
    });
  }

  it("sends a subscription's updates to the GET stream another replica holds, and ends it where the agent unsubscribes", async () => {
    const sessionId = await openSession(bases[0]);
    const call = callIn(sessionId);
    // The agent's GET stream lands on the second replica.
    const stream = listen(bases[1], sessionId);

    // Subscribed on the first replica, which hears the upstream's updates (its own upstream session's): touched
    // until one reaches the stream (one sent before the stream is open is for nobody).
    expect(await call(bases[0], 10, 'resources/subscribe', { uri: WATCHED })).toContain('"result":{}');
    let id = 100;
    await eventually(
      async () => {
        expect(await call(bases[0], id++, 'tools/call', { name: 'touch', arguments: {} })).toContain('touched');
        expect(stream.heard()).toContain(UPDATE);
      },
      10_000,
      200,
    );

    // Unsubscribed on the second: the first lets go, and tells the upstream (no other session listens there).
    expect(upstream.log.count('resources/unsubscribe')).toBe(0);
    expect(await call(bases[1], 12, 'resources/unsubscribe', { uri: WATCHED })).toContain('"result":{}');
    await eventually(() => expect(upstream.log.count('resources/unsubscribe')).toBe(1));
    await stream.stop();
  });

  it('relays a subscription made again on another replica from there alone: no update twice', async () => {
    const sessionId = await openSession(bases[0]);
    const call = callIn(sessionId);
    const stream = listen(bases[1], sessionId);
    const subscribes = upstream.log.count('resources/subscribe');
    const unsubscribes = upstream.log.count('resources/unsubscribe');
    expect(await call(bases[0], 10, 'resources/subscribe', { uri: WATCHED })).toContain('"result":{}');
    // The agent subscribes again on the second replica (idempotent for it): the second now relays it upstream too,
    // and the subscription's row names it. The first, seeing that at its next sweep, lets its own go upstream.
    expect(await call(bases[1], 11, 'resources/subscribe', { uri: WATCHED })).toContain('"result":{}');
    expect(upstream.log.count('resources/subscribe')).toBe(subscribes + 2);
    await eventually(() => expect(upstream.log.count('resources/unsubscribe')).toBe(unsubscribes + 1), 20_000, 250);
    // The second relays it still: its updates reach the agent.
    const before = stream.heard().length;
    let id = 100;
    await eventually(
      async () => {
        expect(await call(bases[1], id++, 'tools/call', { name: 'touch', arguments: {} })).toContain('touched');
        expect(stream.heard().slice(before)).toContain(UPDATE);
      },
      10_000,
      200,
    );
    expect(await call(bases[0], 12, 'resources/unsubscribe', { uri: WATCHED })).toContain('"result":{}');
    await eventually(() => expect(upstream.log.count('resources/unsubscribe')).toBe(unsubscribes + 2));
    await stream.stop();
  });

  it('takes over the subscriptions of a replica that stopped: the agent keeps hearing updates', async () => {
    // A third replica makes the subscription and then stops, as a replica that dies.
    const three = await startTestGateway(postgresTarget, ENV, {}, place);
    let threeStopped = false;
    onTestFinished(async () => {
      if (!threeStopped) await three.close();
    });
    const base3 = await three.listen();
    const sessionId = await openSession(base3);
    const call = callIn(sessionId);
    const stream = listen(bases[1], sessionId);
    const subscribes = upstream.log.count('resources/subscribe');
    expect(await call(base3, 10, 'resources/subscribe', { uri: WATCHED })).toContain('"result":{}');
    let id = 100;
    await eventually(
      async () => {
        expect(await call(base3, id++, 'tools/call', { name: 'touch', arguments: {} })).toContain('touched');
        expect(stream.heard()).toContain(UPDATE);
      },
      10_000,
      200,
    );

    threeStopped = true;
    await three.close();
    const before = stream.heard().length;
    // Whichever replica takes the subscription over subscribes upstream on its own connection, where the fixture
    // sends the updates of the `touch` that connection runs: both replicas are touched in turn.
    await eventually(
      async () => {
        expect(upstream.log.count('resources/subscribe')).toBe(subscribes + 2);
        for (const base of bases) {
          expect(await call(base, id++, 'tools/call', { name: 'touch', arguments: {} })).toContain('touched');
        }
        expect(stream.heard().slice(before)).toContain(UPDATE);
      },
      20_000,
      250,
    );

    // It is the agent's still: unsubscribed on either replica, the one relaying it lets go upstream.
    const unsubscribes = upstream.log.count('resources/unsubscribe');
    expect(await call(bases[0], 12, 'resources/unsubscribe', { uri: WATCHED })).toContain('"result":{}');
    await eventually(() => expect(upstream.log.count('resources/unsubscribe')).toBe(unsubscribes + 1));
    await stream.stop();
  });
});
