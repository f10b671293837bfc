/**
 * `prompts/get` and `resources/read` whose upstream asks the agent for input first (2026-07-28 input-required), through the hub
 * (issue 19): the question reaches the agent (a 2026-07-28 agent as an `input_required` result with the hub's own
 * signed state, a 2025-era agent as a real request through the SDK's shim), its answer and the upstream's state go
 * back, and a state minted for another prompt is refused. A real gateway on loopback, an SDK-built 2026-07-28
 * upstream on 127.0.0.2, SDK v2 clients as agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import { acceptedContent, inputRequired, type McpServer } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const nameSchema = { type: 'object' as const, properties: { name: { type: 'string' as const } }, required: ['name'] };

/** Prompts that need the user's name first; `rounds` records what each round carried. */
function register(rounds: { responses: boolean; state: unknown }[]) {
  return (server: McpServer) => {
    for (const prompt of ['greet', 'farewell']) {
      server.registerPrompt(prompt, { description: `${prompt}s someone` }, async (ctx) => {
        const mcpReq = (ctx as unknown as { mcpReq: { inputResponses?: never; requestState(): unknown } }).mcpReq;
        rounds.push({ responses: mcpReq.inputResponses !== undefined, state: mcpReq.requestState() });
        const name = acceptedContent<{ name: string }>(mcpReq.inputResponses, 'who')?.name;
        if (name === undefined) {
          return inputRequired({
            inputRequests: { who: inputRequired.elicit({ message: 'Your name?', requestedSchema: nameSchema }) },
            requestState: `asked:${prompt}`,
          }) as never;
        }
        return { messages: [{ role: 'user', content: { type: 'text', text: `${prompt} ${name}` } }] };
      });
    }
    server.registerResource('card', 'cards://mine', { mimeType: 'text/plain' }, async (uri, ctx) => {
      const mcpReq = (ctx as unknown as { mcpReq: { inputResponses?: never; requestState(): unknown } }).mcpReq;
      rounds.push({ responses: mcpReq.inputResponses !== undefined, state: mcpReq.requestState() });
      const name = acceptedContent<{ name: string }>(mcpReq.inputResponses, 'who')?.name;
      if (name === undefined) {
        return inputRequired({
          inputRequests: { who: inputRequired.elicit({ message: 'Your name?', requestedSchema: nameSchema }) },
          requestState: 'asked:card',
        }) as never;
      }
      return { contents: [{ uri: uri.href, text: `card of ${name}` }] };
    });
    server.registerTool('noop', { description: 'nothing', inputSchema: z.object({}) }, async () => ({ content: [] }));
  };
}

describe('prompts/get in input-required rounds through the hub', { timeout: 60_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  let token: string;
  let rounds: { responses: boolean; state: unknown }[];
  const clients: Client[] = [];

  beforeEach(async () => {
    rounds = [];
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: [], register: register(rounds) });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } });
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json().token;
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
  });

  const agent = async (era: Era, autoFulfill = true) => {
    const client = await connectAgent(`${base}/mcp`, token, {
      era,
      client: { capabilities: { elicitation: { form: {} } }, inputRequired: { autoFulfill } },
      prepare: (c) =>
        c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Ada' } })),
    });
    clients.push(client);
    return client;
  };

  for (const era of ['modern', 'legacy'] as const) {
    it(`relays the upstream's question and the agent's answer (${era} agent)`, async () => {
      const client = await agent(era);
      const result = await client.getPrompt({ name: 'up__greet', arguments: {} });
      expect(result.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'greet Ada' } }]);
      // The upstream got the answer and its own state back, unchanged.
      expect(rounds).toEqual([
        { responses: false, state: undefined },
        { responses: true, state: 'asked:greet' },
      ]);
    });
  }

  for (const era of ['modern', 'legacy'] as const) {
    it(`relays a resource read's question and the agent's answer (${era} agent)`, async () => {
      const client = await agent(era);
      const listed = (await client.listResources()).resources.find((r) => r.name === 'card');
      const result = await client.readResource({ uri: listed?.uri ?? '' });
      expect(result.contents).toEqual([{ uri: listed?.uri, text: 'card of Ada' }]);
      expect(rounds).toEqual([
        { responses: false, state: undefined },
        { responses: true, state: 'asked:card' },
      ]);
    });
  }

  it("hands out the hub's own state, refused for another prompt", async () => {
    const client = await agent('modern', false);
    const first = (await client.request(
      { method: 'prompts/get', params: { name: 'up__greet', arguments: {} } },
      { allowInputRequired: true },
    )) as unknown as { resultType: string; requestState: string };
    expect(first.resultType).toBe('input_required');
    expect(first.requestState).not.toBe('asked:greet');
    const answers = { who: { action: 'accept', content: { name: 'Ada' } } };
    await expect(
      client.request({
        method: 'prompts/get',
        params: { name: 'up__farewell', arguments: {}, inputResponses: answers, requestState: first.requestState },
      }),
    ).rejects.toThrow(/requestState was not minted for this request/);
    const done = await client.request({
      method: 'prompts/get',
      params: { name: 'up__greet', arguments: {}, inputResponses: answers, requestState: first.requestState },
    });
    expect(done.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'greet Ada' } }]);
  });
});
