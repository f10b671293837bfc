/**
 * 2025-era sessions are capped per token (`hub.maxSessionsPerToken`, or the token's own `maxSessions`):
 * a token at its cap loses its own oldest session, never another token's; opening a session spends the
 * token's rate limit; evictions are counted on /metrics. Raw HTTP against a real gateway on loopback.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const LEGACY = '2025-06-18';

describe('sessions per token', () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  async function setup(settings: Record<string, unknown>) {
    gw = await startTestGateway(sqliteTarget);
    expect((await gw.request('PATCH', '/api/settings', { body: settings })).statusCode).toBe(200);
    const base = await gw.listen();
    const token = async (name: string, extra: Record<string, unknown> = {}) =>
      (await (gw as TestGateway).request('POST', '/api/tokens', { body: { role: 'agent', name, ...extra } })).json();
    const post = (bearer: string, body: unknown, sessionId?: string) =>
      fetch(`${base}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${bearer}`,
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
          ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY } : {}),
        },
        body: JSON.stringify(body),
      });
    const open = async (bearer: string) => {
      const answer = await post(bearer, {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'agent', version: '1' } },
      });
      const text = await answer.text();
      return { status: answer.status, id: answer.headers.get('mcp-session-id') ?? undefined, text };
    };
    const alive = async (bearer: string, sessionId: string) => {
      const answer = await post(bearer, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, sessionId);
      await answer.text();
      return answer.status === 200;
    };
    return { gw, token, open, alive };
  }

  it('evicts only within the token at its cap; another token’s live session stays, and evictions are counted', async () => {
    const s = await setup({ 'hub.maxSessionsPerToken': 3 });
    const a = await s.token('agent-a');
    const b = await s.token('agent-b');
    const bSession = await s.open(b.token);
    expect(bSession.status).toBe(200);
    const aSessions: string[] = [];
    for (let i = 0; i < 6; i++) {
      const opened = await s.open(a.token);
      expect(opened.status).toBe(200);
      aSessions.push(opened.id as string);
    }
    expect(await s.alive(b.token, bSession.id as string)).toBe(true);
    const states = await Promise.all(aSessions.map((id) => s.alive(a.token, id)));
    expect(states).toEqual([false, false, false, true, true, true]);
    const metrics = (await s.gw.request('GET', '/metrics')).body;
    expect(metrics).toMatch(/gatehouse_session_evictions_total 3/);

    // The token's own cap wins over the setting.
    const patched = await s.gw.request('PATCH', `/api/tokens/${b.id}`, { body: { maxSessions: 1 } });
    expect(patched.statusCode).toBe(200);
    expect(patched.json().token?.maxSessions ?? patched.json().maxSessions).toBe(1);
    const second = await s.open(b.token);
    expect(second.status).toBe(200);
    expect(await s.alive(b.token, bSession.id as string)).toBe(false);
    expect(await s.alive(b.token, second.id as string)).toBe(true);
  }, 60_000);

  it('counts opening a session against the token’s rate limit', async () => {
    const s = await setup({});
    const slow = await s.token('slow', { rateLimit: 2 });
    expect((await s.open(slow.token)).status).toBe(200);
    expect((await s.open(slow.token)).status).toBe(200);
    const refused = await s.open(slow.token);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text)).toMatchObject({ error: { data: { code: 'rate_limited' } } });
  }, 60_000);
});
