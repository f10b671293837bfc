/**
 * A disconnect while a refresh of the same grant is under way stays a disconnect: the refresh's answer, once it
 * arrives, is written only over the grant it was read from, which is gone. The authorization server here
 * holds the refresh until the operator has disconnected (tokens live 30 s, inside Gatehouse's refresh margin,
 * so every call refreshes first).
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAgent } from '../helpers/agents.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { connectIn, installOAuth, signedIn } from './browser.js';
import { type MiniAuthServer, type MiniUpstream, startMiniAuthServer, startMiniUpstream } from './mini-oauth.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

describe('upstream OAuth: a disconnect racing a refresh', () => {
  let as: MiniAuthServer;
  let upstream: MiniUpstream;
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    as = await startMiniAuthServer({ expiresIn: 30 });
    upstream = await startMiniUpstream(as);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: 'http://127.0.0.1:7' });
    const base = await gw.listen();
    await installOAuth(gw, 'docs', upstream.url, { mode: 'shared' }, { toolPolicy: { allow: ['whoami'] } });
    const started = await gw.request('POST', '/api/mcp/servers/docs/auth/connect');
    expect(started.statusCode).toBe(200);
    const admin = await signedIn(gw, TEST_ADMIN_TOKEN);
    expect((await connectIn(admin, as, started.json().authorizationUrl)).statusCode).toBe(200);
    const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json();
    client = await connectAgent(`${base}/mcp`, token);
  });
  afterAll(async () => {
    await client.close().catch(() => {});
    await gw.close();
    await upstream.close();
    await as.close();
  });

  const call = async () => (await client.callTool({ name: 'docs__whoami', arguments: {} })) as Json;
  const grantState = async () => (await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth;

  it('leaves the grant disconnected, and the calls after it refused', async () => {
    expect((await call()).content[0].text).toBe('alice');
    expect(await grantState()).toMatchObject({ state: 'connected' });

    const held = as.holdRefreshes();
    const during = call();
    await held.arrived;
    const disconnected = await gw.request('DELETE', '/api/mcp/servers/docs/auth');
    expect(disconnected.statusCode, disconnected.body).toBe(200);
    held.release();

    const answer = await during;
    expect(answer.isError).toBe(true);
    expect(answer.structuredContent.error).toMatchObject({ code: 'auth_required' });
    expect(await grantState()).toMatchObject({ state: 'not_connected' });
    const after = await call();
    expect(after.structuredContent.error).toMatchObject({ code: 'auth_required' });
  });
});
