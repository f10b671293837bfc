/**
 * A 2025-era agent's `notifications/cancelled` behind a balancer without affinity: two gateways on one
 * PostgreSQL stand for replicas. The call runs on one; the cancellation reaches the other, which tells the
 * fleet (`shared-sessions.ts`): the replica running the call stops it, and the upstream hears of it — on the
 * hub's fast path and on the SDK's path (a call with a progress token) alike.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, startLegacyServer } from '../fixtures/mcp-servers.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

const VERSION = '2025-06-18';
/** Far past the test's waits, so only the cancellation can stop the call. */
const ENV = { GATEHOUSE_CALL_TIMEOUT_MS: '120000' };

describe.skipIf(!POSTGRES_AVAILABLE)('2025 cancellations across replicas [postgres]', { timeout: 60_000 }, () => {
  let place: Awaited<ReturnType<typeof postgresTarget.fresh>>;
  let one: TestGateway;
  let two: TestGateway;
  let bases: [string, string];
  let upstream: McpFixture;
  let token: string;

  beforeAll(async () => {
    upstream = await startLegacyServer({ host: PUBLIC_TEST_HOST, tools: ['slow'] });
    place = await postgresTarget.fresh();
    one = await startTestGateway(postgresTarget, ENV, {}, place);
    two = await startTestGateway(postgresTarget, ENV, {}, place);
    bases = [await one.listen(), await two.listen()];
    expect((await one.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    await one.request('PATCH', '/api/mcp/servers/up/tools', { body: { allow: ['slow'] } });
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
});
