/**
 * A 2025-era stdio server asks and logs during a call (issue 19), relayed as for HTTP upstreams: its
 * `elicitation/create` reaches the calling agent (a 2025 agent on its session, a 2026-07-28 agent as an
 * input-required round) and the answer goes back down the pipe; its `notifications/message` reach the calling
 * 2025 session at that session's level. One pipe carries every call, so these go to the call in flight when
 * there is exactly one. A real gateway, the sandboxed stdio fixture, SDK v2 clients as agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanUp } from '../fixtures/stdio/index.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Harness, startHarness, textOf } from './helpers.js';

describe('a 2025-era stdio server asks and logs through the hub', { timeout: 180_000 }, () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness(sqliteTarget);
    await h.install('legacy', ['--era=legacy']);
    const started = await h.gw.request('POST', '/api/mcp/servers/legacy/start');
    expect(started.statusCode, started.body).toBe(200);
    await h.waitForState('legacy', 'running');
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    expect(await cleanUp([], h?.markers ?? [])).toEqual({});
  });

  async function agent(era: Era, logs: unknown[] = []): Promise<{ client: Client; asked: string[] }> {
    const asked: string[] = [];
    const client = await connectAgent(`${h.base}/mcp/s/legacy`, h.agentToken, {
      era,
      client: { capabilities: { elicitation: { form: {} } } },
      prepare: (c) => {
        c.setRequestHandler('elicitation/create', async (request) => {
          asked.push(String(request.params.message));
          return { action: 'accept', content: { name: 'Ada' } };
        });
        c.setNotificationHandler('notifications/message', (n) => {
          logs.push(n.params);
        });
      },
    });
    h.clients.push(client);
    return { client, asked };
  }

  for (const era of ['legacy', 'modern'] as const) {
    it(`relays its elicitation to the calling agent and the answer back (${era} agent)`, async () => {
      const { client, asked } = await agent(era);
      const result = await client.callTool({ name: 'ask_user', arguments: {} });
      expect(textOf(result)).toBe('{"action":"accept","content":{"name":"Ada"}}');
      expect(asked).toEqual(['Your name?']);
    });
  }

  it('refuses the ask for an agent that cannot answer it', async () => {
    const plain = await connectAgent(`${h.base}/mcp/s/legacy`, h.agentToken, { era: 'legacy' });
    h.clients.push(plain);
    const result = await plain.callTool({ name: 'ask_user', arguments: {} });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^refused: /);
  });

  it("relays a call's log messages to its 2025 session, at that session's level", async () => {
    const logs: unknown[] = [];
    const { client } = await agent('legacy', logs);
    await client.setLoggingLevel('error');
    expect(textOf(await client.callTool({ name: 'chatty', arguments: {} }))).toBe('{"done":true}');
    expect(logs).toEqual([{ level: 'error', logger: 'chatty', data: 'something broke' }]);
  });

  it('subscribes a 2026-07-28 stdio server through its listen stream, and relays its updates', async () => {
    await h.install('modern', ['--era=modern']);
    const started = await h.gw.request('POST', '/api/mcp/servers/modern/start');
    expect(started.statusCode, started.body).toBe(200);
    const updates: string[] = [];
    const client = await connectAgent(`${h.base}/mcp/s/modern`, h.agentToken, {
      era: 'legacy',
      prepare: (c) =>
        c.setNotificationHandler('notifications/resources/updated', (n) => {
          updates.push(n.params.uri);
        }),
    });
    h.clients.push(client);
    await expect(client.subscribeResource({ uri: 'file:///watched.txt' })).resolves.toEqual({});
    await client.callTool({ name: 'touch', arguments: {} });
    await eventually(() => expect(updates).toEqual(['file:///watched.txt']));
    await expect(client.unsubscribeResource({ uri: 'file:///watched.txt' })).resolves.toEqual({});
    await client.callTool({ name: 'touch', arguments: {} });
    // A marker after any stray update: the call's own answer.
    await client.callTool({ name: 'echo', arguments: { text: 'marker' } });
    expect(updates).toEqual(['file:///watched.txt']);
  });
});
