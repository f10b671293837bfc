/**
 * A 2025-era upstream asks during a call (issue 19): `sampling/createMessage`, `elicitation/create` and `roots/list`
 * reach the 2025-era agent whose call it is, as server→client requests on its session, and the agent's answer goes
 * back to the upstream; an ask the agent did not declare it can answer is refused to the upstream. On both upstream
 * call paths (the direct exchange, and the SDK client's, which a progress token takes), through `/mcp/s/{id}` and
 * `/mcp`; and a dual-era upstream is driven at 2025 for such an agent so it can ask at all. A real gateway on
 * loopback, SDK-built upstreams on 127.0.0.2, SDK v2 clients as agents.
 */
import { type Client, type ClientCapabilities, LOG_LEVEL_META_KEY } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startLegacyServer } from '../fixtures/mcp-servers.js';
import { startReferenceServer } from '../fixtures/reference-server.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

/** Tools that ask the client mid-call, each answering with what the client said (or the error it got). */
/**
 * Sampling and elicitation go out the way the SDK's `requestSampling`/`elicitInput` send them, on the session's
 * stream (related to no request); `roots/list` on the call's own answer stream (`ctx.mcpReq.send`).
 */
function register(server: McpServer): void {
  const answered = async (ask: () => Promise<unknown>) => {
    try {
      return text(JSON.stringify(await ask()));
    } catch (error) {
      return { ...text(`refused: ${(error as Error).message}`), isError: true };
    }
  };
  server.registerTool('ask_llm', { description: 'Asks for a completion.', inputSchema: z.object({}) }, (_a, ctx) =>
    answered(async () => {
      const result = await ctx.mcpReq.requestSampling({
        messages: [{ role: 'user', content: { type: 'text', text: 'Capital of France?' } }],
        maxTokens: 10,
      });
      return result.content;
    }),
  );
  server.registerTool('ask_user', { description: 'Asks the user.', inputSchema: z.object({}) }, (_a, ctx) =>
    answered(() =>
      ctx.mcpReq.elicitInput({
        message: 'Your name?',
        requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      }),
    ),
  );
  server.registerTool('ask_roots', { description: 'Lists the roots.', inputSchema: z.object({}) }, (_a, ctx) =>
    answered(() => ctx.mcpReq.send({ method: 'roots/list' })),
  );
}

interface AuditEvent {
  tool: string;
  data: unknown;
}

const ALL: ClientCapabilities = { sampling: {}, elicitation: { form: {} }, roots: {} };

describe('asks of a 2025-era upstream relayed to the agent', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(
    upstream: { url: string; close(): Promise<void> },
    env: Record<string, string> = {},
  ): Promise<{ gw: TestGateway; base: string }> {
    cleanups.push(() => upstream.close());
    const gw = await startTestGateway(sqliteTarget, env);
    cleanups.push(() => gw.close());
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    await gw.request('PATCH', '/api/mcp/servers/up/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    return { gw, base: await gw.listen() };
  }

  /** A 2025-era agent declaring `capabilities`, answering every ask, recording what it was asked. */
  async function agent(url: string, token: string, capabilities: ClientCapabilities, era: Era = 'legacy') {
    const asked: unknown[] = [];
    const client: Client = await connectAgent(url, token, {
      era,
      client: { capabilities },
      prepare: (c) => {
        if (capabilities.sampling)
          c.setRequestHandler('sampling/createMessage', async (request) => {
            asked.push(request.params.messages);
            return { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'test-model' };
          });
        if (capabilities.elicitation)
          c.setRequestHandler('elicitation/create', async (request) => {
            asked.push(request.params.message);
            return { action: 'accept', content: { name: 'Ada' } };
          });
        if (capabilities.roots)
          c.setRequestHandler('roots/list', async () => {
            asked.push('roots');
            return { roots: [{ uri: 'file:///work', name: 'work' }] };
          });
      },
    });
    cleanups.push(() => client.close());
    return { client, asked };
  }

  const token = async (gw: TestGateway) =>
    (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json().token as string;

  const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0]?.text;

  it('relays sampling, elicitation and roots on both call paths, through /mcp/s/{id} and /mcp', async () => {
    const upstream: McpFixture = await startLegacyServer({ host: PUBLIC_TEST_HOST, tools: [], register });
    const { gw, base } = await setup(upstream);
    const { client, asked } = await agent(`${base}/mcp/s/up`, await token(gw), ALL);

    // The direct exchange (no progress token).
    expect(textOf(await client.callTool({ name: 'ask_llm', arguments: {} }))).toBe('{"type":"text","text":"Paris"}');
    expect(textOf(await client.callTool({ name: 'ask_user', arguments: {} }))).toBe(
      '{"action":"accept","content":{"name":"Ada"}}',
    );
    expect(textOf(await client.callTool({ name: 'ask_roots', arguments: {} }))).toBe(
      '{"roots":[{"uri":"file:///work","name":"work"}]}',
    );
    expect(asked).toEqual([
      [{ role: 'user', content: { type: 'text', text: 'Capital of France?' } }],
      'Your name?',
      'roots',
    ]);

    // The SDK client's path (a progress token takes it): an ask on the call's stream and one on the session's.
    const viaSdk = await client.callTool({ name: 'ask_roots', arguments: {} }, { onprogress: () => {} });
    expect(textOf(viaSdk)).toBe('{"roots":[{"uri":"file:///work","name":"work"}]}');
    const sessionAsk = await client.callTool({ name: 'ask_user', arguments: {} }, { onprogress: () => {} });
    expect(textOf(sessionAsk)).toBe('{"action":"accept","content":{"name":"Ada"}}');

    // Each call's audit row says what it asked and whether the agent answered (never the content).
    const rows = (await gw.request('GET', '/api/audit?kind=call&limit=500')).json().events as AuditEvent[];
    expect(rows.filter((row) => row.tool === 'ask_llm').map((row) => row.data)).toEqual([
      { asks: [{ method: 'sampling/createMessage', answered: true }] },
    ]);
    expect(rows.filter((row) => row.tool === 'ask_roots').map((row) => row.data)).toEqual([
      { asks: [{ method: 'roots/list', answered: true }] },
      { asks: [{ method: 'roots/list', answered: true }] },
    ]);

    // The aggregate, by its prefixed name.
    const { client: aggregate } = await agent(`${base}/mcp`, await token(gw), ALL);
    expect(textOf(await aggregate.callTool({ name: 'up__ask_llm', arguments: {} }))).toBe(
      '{"type":"text","text":"Paris"}',
    );
  });

  it('refuses to the upstream what the agent did not declare, and every ask of an agent that declared none', async () => {
    const upstream = await startLegacyServer({ host: PUBLIC_TEST_HOST, tools: [], register });
    const { gw, base } = await setup(upstream);
    const { client, asked } = await agent(`${base}/mcp/s/up`, await token(gw), { elicitation: { form: {} } });
    const refused = await client.callTool({ name: 'ask_llm', arguments: {} });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^refused: .*did not declare it can answer sampling\/createMessage/);
    expect(asked).toEqual([]);
    const rows = (await gw.request('GET', '/api/audit?kind=call&limit=500')).json().events as AuditEvent[];
    expect(rows.find((row) => row.tool === 'ask_llm')?.data).toEqual({
      asks: [{ method: 'sampling/createMessage', answered: false }],
    });
    // What it declared still reaches it.
    expect(textOf(await client.callTool({ name: 'ask_user', arguments: {} }))).toContain('"Ada"');

    // An agent that can be asked nothing (its calls take the hub's fast path): the upstream is told no.
    const { client: plain } = await agent(`${base}/mcp/s/up`, await token(gw), {});
    const none = await plain.callTool({ name: 'ask_roots', arguments: {} });
    expect(none.isError).toBe(true);
    expect(textOf(none)).toMatch(/^refused: /);
  });

  it('relays them to a 2026-07-28 agent as input-required rounds, on both call paths, the upstream call held', async () => {
    const upstream = await startLegacyServer({ host: PUBLIC_TEST_HOST, tools: [], register });
    const { gw, base } = await setup(upstream);
    const { client, asked } = await agent(`${base}/mcp/s/up`, await token(gw), ALL, 'modern');

    // The SDK v2 client answers each round with its own handlers and calls again, transparently.
    expect(textOf(await client.callTool({ name: 'ask_llm', arguments: {} }))).toBe('{"type":"text","text":"Paris"}');
    expect(textOf(await client.callTool({ name: 'ask_user', arguments: {} }))).toBe(
      '{"action":"accept","content":{"name":"Ada"}}',
    );
    expect(textOf(await client.callTool({ name: 'ask_roots', arguments: {} }, { onprogress: () => {} }))).toBe(
      '{"roots":[{"uri":"file:///work","name":"work"}]}',
    );
    expect(asked).toEqual([
      [{ role: 'user', content: { type: 'text', text: 'Capital of France?' } }],
      'Your name?',
      'roots',
    ]);
    // One upstream call per tool: the rounds continued it, never ran it again.
    expect(upstream.log.count('tools/call')).toBe(3);
    // Each round is audited: the one that asked (input_required), the one that answered (with the ask).
    let rows: (AuditEvent & { outcome: string })[] = [];
    for (let i = 0; i < 50 && rows.filter((r) => r.tool === 'ask_llm').length < 2; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 20));
      rows = (await gw.request('GET', '/api/audit?kind=call&limit=500')).json().events;
    }
    const llm = rows.filter((row) => row.tool === 'ask_llm');
    expect(llm.map((row) => row.outcome).sort()).toEqual(['input_required', 'ok']);
    expect(llm.find((row) => row.outcome === 'ok')?.data).toEqual({
      asks: [{ method: 'sampling/createMessage', answered: true }],
    });

    // Through the aggregate too.
    const { client: aggregate } = await agent(`${base}/mcp`, await token(gw), ALL, 'modern');
    expect(textOf(await aggregate.callTool({ name: 'up__ask_user', arguments: {} }))).toContain('"Ada"');
  });

  it('holds the call for its own token only, refuses what the agent did not declare, and says when a round came too late', async () => {
    const upstream = await startLegacyServer({ host: PUBLIC_TEST_HOST, tools: [], register });
    const { gw, base } = await setup(upstream);
    const agentToken = await token(gw);
    const { client } = await agent(`${base}/mcp/s/up`, agentToken, { elicitation: { form: {} } }, 'modern');
    // Not declared: refused to the upstream at once, no round.
    const refused = await client.callTool({ name: 'ask_llm', arguments: {} });
    expect(textOf(refused)).toMatch(/^refused: .*did not declare it can answer sampling\/createMessage/);

    const first = (await client.callTool(
      { name: 'ask_user', arguments: {} },
      { allowInputRequired: true },
    )) as unknown as {
      resultType: string;
      inputRequests: Record<string, { method: string; params: { message: string } }>;
      requestState: string;
    };
    expect(first.resultType).toBe('input_required');
    const [key] = Object.keys(first.inputRequests);
    expect(first.inputRequests[key as string]).toMatchObject({
      method: 'elicitation/create',
      params: { message: 'Your name?' },
    });
    const round = (who: Client) =>
      who.request({
        method: 'tools/call',
        params: {
          name: 'ask_user',
          arguments: {},
          inputResponses: { [key as string]: { action: 'accept', content: { name: 'Grace' } } },
          requestState: first.requestState,
        },
      });
    // Another token's round with this state is refused (the state is bound to the token).
    const { client: other } = await agent(`${base}/mcp/s/up`, await token(gw), { elicitation: { form: {} } }, 'modern');
    const foreign = (await round(other)) as { isError?: boolean; structuredContent?: { error: { code: string } } };
    expect(foreign.structuredContent?.error.code).toBe('hub.request_state_mismatch');
    // The owner's round continues the held call.
    expect(textOf(await round(client))).toBe('{"action":"accept","content":{"name":"Grace"}}');
    // The same round again: the call is no longer held.
    const late = (await round(client)) as { structuredContent?: { error: { code: string } } };
    expect(late.structuredContent?.error.code).toBe('hub.round_expired');
    expect(upstream.log.count('tools/call')).toBe(2);
  });

  it("relays a held call's log messages to the round that waits on it, at that round's level", async () => {
    const upstream = await startLegacyServer({
      host: PUBLIC_TEST_HOST,
      tools: [],
      serverOptions: { capabilities: { logging: {} } },
      register: (server) => {
        server.registerTool(
          'ask_then_log',
          { description: 'Asks, then logs.', inputSchema: z.object({}) },
          async (_a, ctx) => {
            await ctx.mcpReq.send({ method: 'roots/list' });
            await ctx.mcpReq.log('debug', 'noise', 'held');
            await ctx.mcpReq.log('warning', 'after the answer', 'held');
            return text('done');
          },
        );
      },
    });
    const { gw, base } = await setup(upstream);
    const logs: unknown[] = [];
    const client = await connectAgent(`${base}/mcp/s/up`, await token(gw), {
      client: { capabilities: { roots: {} } },
      prepare: (c) =>
        c.setNotificationHandler('notifications/message', (n) => {
          logs.push(n.params);
        }),
    });
    cleanups.push(() => client.close());
    // Round 1 asks for no logs; round 2 asks for warning and above.
    const first = (await client.callTool(
      { name: 'ask_then_log', arguments: {} },
      { allowInputRequired: true },
    )) as unknown as {
      inputRequests: Record<string, unknown>;
      requestState: string;
    };
    const [key] = Object.keys(first.inputRequests);
    const done = await client.request({
      method: 'tools/call',
      params: {
        name: 'ask_then_log',
        arguments: {},
        inputResponses: { [key as string]: { roots: [] } },
        requestState: first.requestState,
        _meta: { [LOG_LEVEL_META_KEY]: 'warning' },
      },
    });
    expect(textOf(done)).toBe('done');
    expect(logs).toEqual([{ level: 'warning', logger: 'held', data: 'after the answer' }]);
  });

  it("cancels a held call whose agent does not come back within the call's deadline", async () => {
    let cancelled = false;
    const upstream = await startLegacyServer({
      host: PUBLIC_TEST_HOST,
      tools: [],
      register: (server) => {
        server.registerTool(
          'ask_late',
          { description: 'Asks, then waits.', inputSchema: z.object({}) },
          async (_a, ctx) => {
            ctx.mcpReq.signal.addEventListener('abort', () => {
              cancelled = true;
            });
            try {
              return text(JSON.stringify(await ctx.mcpReq.send({ method: 'roots/list' })));
            } catch (error) {
              return { ...text(`refused: ${(error as Error).message}`), isError: true };
            }
          },
        );
      },
    });
    const { gw, base } = await setup(upstream, { GATEHOUSE_CALL_TIMEOUT_MS: '1500' });
    const { client } = await agent(`${base}/mcp/s/up`, await token(gw), { roots: {} }, 'modern');
    const first = (await client.callTool(
      { name: 'ask_late', arguments: {} },
      { allowInputRequired: true },
    )) as unknown as {
      inputRequests: Record<string, unknown>;
      requestState: string;
    };
    const [key] = Object.keys(first.inputRequests);
    // The agent comes back after the deadline (counted from the first round): the upstream call is gone.
    await eventually(() => expect(cancelled).toBe(true), 10_000);
    const late = (await client.request({
      method: 'tools/call',
      params: {
        name: 'ask_late',
        arguments: {},
        inputResponses: { [key as string]: { roots: [] } },
        requestState: first.requestState,
      },
    })) as { structuredContent?: { error: { code: string } } };
    expect(late.structuredContent?.error.code).toBe('hub.round_expired');
  });

  it('drives a dual-era upstream at 2025 for an agent that can be asked, so its in-call sampling works', async () => {
    const { gw, base } = await setup(await startReferenceServer(PUBLIC_TEST_HOST));
    const { client } = await agent(`${base}/mcp/s/up`, await token(gw), ALL);
    const result = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'Capital of France?' } });
    expect(textOf(result)).toBe('LLM response: Paris');
    // Other calls of the same agent still work on that connection.
    expect((await client.listTools()).tools.some((t) => t.name === 'test_sampling')).toBe(true);
  });
});
