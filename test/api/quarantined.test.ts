/** `GET /api/mcp/pins/quarantined`: every server's quarantined tools in one paged list (the inbox's one request). */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('quarantined tools across servers', (target) => {
  let gw: TestGateway;
  const upstreams: McpFixture[] = [];

  /** Pinned with `echo` only; `add` (and `echo` unchanged) appears at the next handshake. */
  const quarantineAdd = async (id: string) => {
    const first = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: first.url, id } })).statusCode).toBe(201);
    expect((await gw.request('POST', `/api/mcp/servers/${id}/test`)).json().ok).toBe(true);
    await first.close();
    const again = await startModernServer({
      host: PUBLIC_TEST_HOST,
      port: Number(new URL(first.url).port),
      tools: ['echo', 'add'],
    });
    upstreams.push(again);
    expect((await gw.request('POST', `/api/mcp/servers/${id}/test`)).json().verdicts.add).toBe('quarantined');
  };

  beforeAll(async () => {
    gw = await startTestGateway(target);
    await quarantineAdd('beta');
    await quarantineAdd('alpha');
  }, 120_000);
  afterAll(async () => {
    await Promise.all(upstreams.map((u) => u.close()));
    await gw?.close();
  });

  it('lists them with their server, diff and flags, paged; an approval takes one off', async () => {
    const all = await gw.request('GET', '/api/mcp/pins/quarantined');
    expect(all.statusCode, all.body).toBe(200);
    const body = all.json();
    expect(body).toMatchObject({ count: 2, total: 2 });
    expect(body.pins.map((p: { serverId: string; tool: string }) => `${p.serverId}/${p.tool}`)).toEqual([
      'alpha/add',
      'beta/add',
    ]);
    expect(body.pins[0]).toMatchObject({ serverName: expect.any(String), state: 'quarantined', reason: 'new' });
    expect(Array.isArray(body.pins[0].diff)).toBe(true);
    expect(Array.isArray(body.pins[0].flags)).toBe(true);

    const second = (await gw.request('GET', '/api/mcp/pins/quarantined?limit=1&offset=1')).json();
    expect(second).toMatchObject({ count: 1, total: 2, pins: [{ serverId: 'beta', tool: 'add' }] });

    const approved = await gw.request('POST', '/api/mcp/servers/alpha/pins/add/approve', {
      body: { pendingHash: body.pins[0].pendingHash },
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect((await gw.request('GET', '/api/mcp/pins/quarantined')).json()).toMatchObject({
      total: 1,
      pins: [{ serverId: 'beta' }],
    });
    expect((await gw.request('GET', '/api/mcp/pins/quarantined?limit=0')).statusCode).toBe(400);
  });
});
