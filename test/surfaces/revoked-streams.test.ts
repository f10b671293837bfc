/**
 * Losing access (a token revoked, its owner disabled) ends what it holds open, at once: its 2025-era sessions (their streams close, and on
 * PostgreSQL their shared rows go) and its 2026-07-28 `subscriptions/listen` streams. Another token's stay.
 * A real gateway on loopback, SDK v2 agents of both eras.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, expect, it } from 'vitest';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('losing access ends the open streams', (target) => {
  let gw: TestGateway | undefined;
  const clients: Client[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw?.close();
    gw = undefined;
  });

  it('closes its 2025 sessions and its listen streams; another token keeps its own', async () => {
    gw = await startTestGateway(target);
    const base = await gw.listen();
    const tokenOf = async (name: string) =>
      (await gw!.request('POST', '/api/tokens', { body: { role: 'agent', name } })).json() as {
        id: string;
        token: string;
      };
    const revoked = await tokenOf('revoked');
    const kept = await tokenOf('kept');
    const agents = async (token: string) => {
      const heard = { listChanges: 0 };
      const modern = await connectAgent(`${base}/mcp`, token, {
        era: 'modern',
        prepare: (client) =>
          client.setNotificationHandler('notifications/tools/list_changed', () => {
            heard.listChanges += 1;
          }),
      });
      const legacy = await connectAgent(`${base}/mcp`, token, { era: 'legacy' });
      clients.push(modern, legacy);
      const stream = await modern.listen({ toolsListChanged: true });
      return { heard, stream, legacy };
    };
    const doomed = await agents(revoked.token);
    const survivor = await agents(kept.token);
    const sessions = gw.gateway.hub.endpoint.sessions;
    expect(sessions.countOf(revoked.id)).toBe(1);
    expect(await sessions.fleetCountOf(revoked.id)).toBe(1);

    expect((await gw.request('DELETE', `/api/tokens/${revoked.id}`)).statusCode).toBe(200);
    // Its listen stream ends from the gateway's side, and its session is gone (here and, shared, in the store).
    const ended = await Promise.race([doomed.stream.closed, sleep(10_000, 'still open' as const)]);
    expect(ended).not.toBe('still open');
    expect(ended).not.toBe('local');
    await eventually(async () => {
      expect(sessions.countOf(revoked.id)).toBe(0);
      expect(await sessions.fleetCountOf(revoked.id)).toBe(0);
    });
    await expect(doomed.legacy.listTools()).rejects.toThrow();

    // The other token's session and stream live on: a list change still reaches it.
    expect(sessions.countOf(kept.id)).toBe(1);
    gw.gateway.hub.endpoint.notifyListChanged();
    await eventually(() => expect(survivor.heard.listChanges).toBeGreaterThan(0));
    expect((await survivor.legacy.listTools()).tools).toBeDefined();
  });

  it('a token given other groups has its 2025 sessions ended; its limits changed, they stay', async () => {
    gw = await startTestGateway(target);
    const base = await gw.listen();
    const token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'narrowed' } })).json();
    const legacy = await connectAgent(`${base}/mcp`, token.token, { era: 'legacy' });
    clients.push(legacy);
    const sessions = gw.gateway.hub.endpoint.sessions;
    expect(sessions.countOf(token.id)).toBe(1);

    const patch = (body: object) => gw!.request('PATCH', `/api/tokens/${token.id}`, { body });
    expect((await patch({ rateLimit: 500 })).statusCode).toBe(200);
    await sleep(300);
    expect(sessions.countOf(token.id)).toBe(1);
    expect((await legacy.listTools()).tools).toBeDefined();

    // Before: the session kept the old groups where it lived, while another replica rebuilt it with the new.
    expect((await patch({ groups: ['finance'] })).statusCode).toBe(200);
    await eventually(async () => {
      expect(sessions.countOf(token.id)).toBe(0);
      expect(await sessions.fleetCountOf(token.id)).toBe(0);
    });
    await expect(legacy.listTools()).rejects.toThrow();
  });

  it('disabling a person ends the streams of the tokens they own', async () => {
    gw = await startTestGateway(target);
    const base = await gw.listen();
    const user = (await gw.request('POST', '/api/users', { body: { name: 'dana', role: 'member' } })).json();
    const owned = (
      await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'dana-laptop', userId: user.id } })
    ).json();
    expect(owned.userId).toBe(user.id);
    const modern = await connectAgent(`${base}/mcp`, owned.token, { era: 'modern' });
    const legacy = await connectAgent(`${base}/mcp`, owned.token, { era: 'legacy' });
    clients.push(modern, legacy);
    const stream = await modern.listen({ toolsListChanged: true });
    const sessions = gw.gateway.hub.endpoint.sessions;
    expect(sessions.countOf(owned.id)).toBe(1);

    const disabled = await gw.request('PATCH', `/api/users/${user.id}`, { body: { disabled: true } });
    expect(disabled.statusCode, disabled.body).toBe(200);
    const ended = await Promise.race([stream.closed, sleep(10_000, 'still open' as const)]);
    expect(ended).not.toBe('still open');
    await eventually(() => expect(sessions.countOf(owned.id)).toBe(0));
  });
});
