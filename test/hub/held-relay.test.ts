/**
 * A held call's rounds across replicas (`held-relay.ts`): two gateways on one PostgreSQL stand for replicas
 * behind a balancer without affinity. A 2025-era upstream asks a 2026-07-28 agent twice during one call; the
 * agent's rounds alternate between the replicas, and the one upstream call goes on wherever the round lands
 * (its log message relayed to the round that waits on the other replica). A round for a call whose holder
 * stopped is told the call is gone (`hub.round_expired`).
 */
import { type Client, LOG_LEVEL_META_KEY } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startLegacyServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

/** The gateways' cap on one upstream response. */
const RESPONSE_CAP = 64 * 1024;
const ENV = { GATEHOUSE_MAX_RESPONSE_SIZE: String(RESPONSE_CAP) };
const NAME_FORM = { type: 'object' as const, properties: { name: { type: 'string' as const } }, required: ['name'] };

/**
 * `ask_thrice` asks the user's name, logs, asks for the roots, asks to confirm, then answers with all three;
 * `ask_then_flood` asks, then answers more than the gateway takes from an upstream (the call fails on the holder).
 */
function register(server: McpServer): void {
  server.registerTool('ask_thrice', { description: 'Asks thrice.', inputSchema: z.object({}) }, async (_a, ctx) => {
    const named = await ctx.mcpReq.elicitInput({ message: 'Your name?', requestedSchema: NAME_FORM });
    await ctx.mcpReq.log('warning', 'between the asks', 'held');
    const roots = await ctx.mcpReq.send({ method: 'roots/list' });
    const sure = await ctx.mcpReq.elicitInput({ message: 'Sure?', requestedSchema: NAME_FORM });
    return text(JSON.stringify({ named, roots, sure }));
  });
  server.registerTool(
    'ask_then_flood',
    { description: 'Asks, then floods.', inputSchema: z.object({}) },
    async (_a, ctx) => {
      await ctx.mcpReq.elicitInput({ message: 'Your name?', requestedSchema: NAME_FORM });
      return text('x'.repeat(2 * RESPONSE_CAP));
    },
  );
}

interface Round {
  resultType?: string;
  inputRequests?: Record<string, { method: string }>;
  requestState?: string;
  content?: Array<{ text: string }>;
  structuredContent?: { error?: { code: string } };
}

describe.skipIf(!POSTGRES_AVAILABLE)('held calls relayed between replicas [postgres]', { timeout: 60_000 }, () => {
  let place: Awaited<ReturnType<typeof postgresTarget.fresh>>;
  let one: TestGateway;
  let two: TestGateway;
  let upstream: McpFixture;
  let token: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    upstream = await startLegacyServer({
      host: PUBLIC_TEST_HOST,
      tools: [],
      serverOptions: { capabilities: { logging: {} } },
      register,
    });
    place = await postgresTarget.fresh();
    one = await startTestGateway(postgresTarget, ENV, {}, place);
    two = await startTestGateway(postgresTarget, ENV, {}, place);
    expect((await one.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    await one.request('PATCH', '/api/mcp/servers/up/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    expect((await one.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    token = (await one.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json().token;
  });
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => {});
    await one?.close();
    await two?.close();
    await place?.cleanup();
    await upstream?.close();
  });

  /** A 2026-07-28 agent on `gw` that answers rounds itself; `logs` collects the log messages it is sent. */
  const bases = new Map<TestGateway, string>();
  async function agent(gw: TestGateway, logs: unknown[] = []) {
    const base = bases.get(gw) ?? (await gw.listen());
    bases.set(gw, base);
    const client = await connectAgent(`${base}/mcp/s/up`, token, {
      client: { capabilities: { elicitation: { form: {} }, roots: {} }, inputRequired: { autoFulfill: false } },
      prepare: (c) => c.setNotificationHandler('notifications/message', (n) => void logs.push(n.params)),
    });
    clients.push(client);
    return client;
  }

  const call = async (client: Client, more: Record<string, unknown> = {}, name = 'ask_thrice') =>
    (await client.callTool({ name, arguments: {}, ...more } as { name: string; arguments: Record<string, unknown> }, {
      allowInputRequired: true,
    })) as unknown as Round;

  const keyOf = (round: Round, method: string) =>
    Object.entries(round.inputRequests ?? {}).find(([, request]) => request.method === method)?.[0] as string;

  it("continues one upstream call whichever replica each round reaches, the holder's log included", async () => {
    const logs: unknown[] = [];
    const [onOne, onTwo] = [await agent(one), await agent(two, logs)];

    const first = await call(onOne);
    expect(first.resultType).toBe('input_required');
    const nameKey = keyOf(first, 'elicitation/create');
    expect(nameKey).toBeDefined();

    // Round 2 reaches the other replica: relayed to the holder, it answers the next ask.
    const second = await call(onTwo, {
      inputResponses: { [nameKey]: { action: 'accept', content: { name: 'Ada' } } },
      requestState: first.requestState,
      _meta: { [LOG_LEVEL_META_KEY]: 'warning' },
    });
    expect(second.resultType).toBe('input_required');
    const rootsKey = keyOf(second, 'roots/list');
    expect(rootsKey).toBeDefined();
    expect(logs).toEqual([{ level: 'warning', logger: 'held', data: 'between the asks' }]);

    // Round 3 back on the holder, which parked the call after the relayed round.
    const third = await call(onOne, {
      inputResponses: { [rootsKey]: { roots: [{ uri: 'file:///work', name: 'work' }] } },
      requestState: second.requestState,
    });
    const sureKey = keyOf(third, 'elicitation/create');
    expect(sureKey).toBeDefined();
    // Round 4 on the other replica again: the upstream's result is relayed.
    const done = await call(onTwo, {
      inputResponses: { [sureKey]: { action: 'accept', content: { name: 'yes' } } },
      requestState: third.requestState,
    });
    expect(JSON.parse(done.content?.[0]?.text ?? '{}')).toEqual({
      named: { action: 'accept', content: { name: 'Ada' } },
      roots: { roots: [{ uri: 'file:///work', name: 'work' }] },
      sure: { action: 'accept', content: { name: 'yes' } },
    });
    // A round replayed on the holder, for the call that ended: told at once, nothing relayed.
    const replayed = await call(onOne, {
      inputResponses: { [sureKey]: { action: 'accept', content: { name: 'yes' } } },
      requestState: third.requestState,
    });
    expect(replayed.structuredContent?.error?.code).toBe('hub.round_expired');
    // One upstream call for the four rounds.
    expect(upstream.log.count('tools/call')).toBe(1);
    // The relayed round is audited where it was served, with the ask it answered.
    await eventually(async () => {
      const rows = (await two.request('GET', '/api/audit?kind=call&limit=50')).json().events as Array<{
        tool: string;
        outcome: string;
        data: unknown;
      }>;
      expect(rows.filter((row) => row.tool === 'ask_thrice').map((row) => [row.outcome, row.data])).toContainEqual([
        'input_required',
        { asks: [{ method: 'elicitation/create', answered: true }] },
      ]);
    }, 10_000);
  });

  it('answers a relayed round whose upstream call failed on the holder as the holder would', async () => {
    const answer = async (first: Round, who: Client) =>
      await call(
        who,
        {
          inputResponses: { [keyOf(first, 'elicitation/create')]: { action: 'accept', content: { name: 'Ada' } } },
          requestState: first.requestState,
        },
        'ask_then_flood',
      );
    const onOne = await agent(one);
    const local = await answer(await call(onOne, {}, 'ask_then_flood'), onOne);
    const relayed = await answer(await call(onOne, {}, 'ask_then_flood'), await agent(two));
    expect(local.structuredContent?.error?.code).toMatch(/^upstream_/);
    expect(relayed.structuredContent).toEqual(local.structuredContent);
    expect(relayed.content).toEqual(local.content);
  });

  it('tells a round whose holder has stopped that the call is gone', async () => {
    const three = await startTestGateway(postgresTarget, ENV, {}, place);
    let first: Round;
    try {
      first = await call(await agent(three));
      expect(first.resultType).toBe('input_required');
    } finally {
      await three.close();
    }
    const late = await call(await agent(two), {
      inputResponses: { [keyOf(first, 'elicitation/create')]: { action: 'accept', content: { name: 'Ada' } } },
      requestState: first.requestState,
    });
    expect(late.structuredContent?.error?.code).toBe('hub.round_expired');
  });
});
