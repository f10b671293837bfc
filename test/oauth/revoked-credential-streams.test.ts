/**
 * Revoking one OAuth access token (RFC 7009), or ending its refresh family, ends the streams opened with it at
 * once: a 2026-07-28 `subscriptions/listen` stream and a 2025-era session's GET stream. The grant lives on, and so
 * do the streams its other tokens opened. A real gateway on loopback, the SDK's own OAuth client, SDK v2 agents.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { auth, type Client } from '@modelcontextprotocol/client';
import { afterEach, expect, it } from 'vitest';
import { connectAgent } from '../helpers/agents.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { consent, postForm, TestOAuthProvider } from '../helpers/oauth.js';
import { describeEachStore } from '../helpers/stores.js';

const LEGACY_VERSION = '2025-11-25';

/** Settles with 'ended' once `closed` does, or 'still open' after 10 s. */
const endOf = (closed: Promise<unknown>) =>
  Promise.race([closed.then(() => 'ended' as const), sleep(10_000, 'still open' as const)]);

describeEachStore('revoking an OAuth access token or family ends its streams', (target) => {
  let gw: TestGateway | undefined;
  const clients: Client[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw?.close();
    gw = undefined;
  });

  it('ends what each access token opened, then what its family opened; the grant stays', async () => {
    gw = await startTestGateway(target);
    const base = await gw.listen();
    const serverUrl = new URL(`${base}/mcp`);
    const person = (await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'ada' } })).json();

    // A client authorized by the person, then refreshed: two access tokens of one family.
    const provider = new TestOAuthProvider('http://127.0.0.1:9/callback');
    expect(await auth(provider, { serverUrl })).toBe('REDIRECT');
    const callback = await consent(base, provider.authorizationUrl as URL, person.token);
    expect(
      await auth(provider, {
        serverUrl,
        authorizationCode: callback.get('code') as string,
        iss: callback.get('iss') as string,
      }),
    ).toBe('AUTHORIZED');
    const first = provider.saved?.access_token as string;
    expect(await auth(provider, { serverUrl })).toBe('AUTHORIZED');
    const second = provider.saved?.access_token as string;
    const refreshToken = provider.saved?.refresh_token as string;
    expect(second).not.toBe(first);
    const clientId = String(provider.clientInformation()?.client_id);

    const listenWith = async (token: string) => {
      const agent = await connectAgent(serverUrl.href, token, { era: 'modern' });
      clients.push(agent);
      return agent.listen({ toolsListChanged: true });
    };
    const byFirst = await listenWith(first);
    const bySecond = await listenWith(second);
    const getStream = await openLegacyGetStream(serverUrl.href, second);

    // 1. The first access token revoked: its stream ends; the second token's streams stay open.
    expect((await postForm(`${base}/revoke`, { token: first, client_id: clientId })).status).toBe(200);
    expect(await endOf(byFirst.closed)).toBe('ended');
    expect(await Promise.race([bySecond.closed.then(() => 'ended'), sleep(500, 'open')])).toBe('open');
    expect(await Promise.race([getStream.ended, sleep(10, 'open')])).toBe('open');

    // 2. The refresh token revoked: its family ends, and with it the second token's listen and GET streams.
    expect((await postForm(`${base}/revoke`, { token: refreshToken, client_id: clientId })).status).toBe(200);
    expect(await endOf(bySecond.closed)).toBe('ended');
    expect(await endOf(getStream.ended)).toBe('ended');

    // The grant itself is not revoked: the person's list still shows it.
    const grants = (await gw.request('GET', '/api/oauth/grants')).json().grants as Array<{ clientId: string }>;
    expect(grants.map((g) => g.clientId)).toContain(clientId);
  });
});

/** A 2025-era session opened by hand, and its GET stream: `ended` settles when the gateway ends the stream. */
async function openLegacyGetStream(url: string, token: string): Promise<{ ended: Promise<void> }> {
  const headers = {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  const opened = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1.0.0' } },
    }),
  });
  expect(opened.status).toBe(200);
  await opened.text();
  const session = {
    'mcp-session-id': opened.headers.get('mcp-session-id') as string,
    'mcp-protocol-version': LEGACY_VERSION,
  };
  const initialized = await fetch(url, {
    method: 'POST',
    headers: { ...headers, ...session },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  expect(initialized.status).toBe(202);
  const stream = await fetch(url, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...session },
  });
  expect(stream.status).toBe(200);
  expect(stream.headers.get('content-type')).toContain('text/event-stream');
  const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
  const ended = (async () => {
    for (;;) if ((await reader.read()).done) return;
  })().catch(() => undefined);
  return { ended };
}
