/**
 * The HTTP counterpart of `test/upstream-stdio/asks-isolation.test.ts`. One pooled upstream connection serves
 * every agent, and where nothing ties an ask or a log message to its request it goes to the sole call in flight
 * on that connection (`asks.ts`). A prompt is in flight on it too: what the upstream asks or logs while it builds
 * agent B's prompt must not reach agent A, whose tool call happens to be the only call in flight, nor A's answer
 * reach B's prompt. Nor while it serves B's plain tool call (B can be asked nothing, so its call relays no ask).
 *
 * - HTTP+SSE: one event stream carries every message of the session, for every agent.
 * - 2025-era Streamable HTTP: a 2025 agent's asking call runs on a session of its own (`#asks`), but a
 *   2026-07-28 agent's (asked in rounds) runs on the pooled session the prompt runs on, and an SDK server's
 *   `elicitInput` goes out on that session's stream, related to no request.
 *
 * A real gateway on loopback, SDK-built upstreams on 127.0.0.2 (`asking-http.ts`), SDK v2 clients as agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { registerAsking, startAskingSseServer } from '../fixtures/asking-http.js';
import { startLegacyServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

interface Agent {
  client: Client;
  /** The messages of the elicitations it was asked. */
  asked: string[];
  /** The data of the log messages it got. */
  logs: unknown[];
}

type Upstream = { url: string; close(): Promise<void> };

const UPSTREAMS: Array<[string, () => Promise<Upstream>]> = [
  ['HTTP+SSE', () => startAskingSseServer({ host: PUBLIC_TEST_HOST })],
  [
    '2025-era Streamable HTTP',
    () => {
      const holding = new Set<() => void>();
      return startLegacyServer({
        host: PUBLIC_TEST_HOST,
        tools: [],
        serverOptions: { capabilities: { logging: {} } },
        register: (server) => registerAsking(server, holding),
      });
    },
  ],
];

/** The era of agent A: a 2025 agent is asked on its session, a 2026-07-28 one in input-required rounds. */
const A_ERAS: Era[] = ['legacy', 'modern'];

describe("an ask during one agent's prompt or call on a shared HTTP upstream", { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(start: () => Promise<Upstream>) {
    const upstream = await start();
    cleanups.push(() => upstream.close());
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const installed = await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } });
    expect(installed.statusCode, installed.body).toBe(201);
    await gw.request('PATCH', '/api/mcp/servers/up/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    // The handshake lists the tool and the prompt the hub serves.
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    const token = async (name: string) =>
      (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name } })).json().token as string;
    return { base: await gw.listen(), tokenA: await token('agent-a'), tokenB: await token('agent-b') };
  }

  /** An agent that answers every elicitation with `name` (if it declares it can) and hears every log message. */
  async function agent(url: string, token: string, name: string, era: Era, elicits = true): Promise<Agent> {
    const asked: string[] = [];
    const logs: unknown[] = [];
    const client = await connectAgent(url, token, {
      era,
      client: { capabilities: elicits ? { elicitation: { form: {} } } : {} },
      prepare: (c) => {
        if (elicits)
          c.setRequestHandler('elicitation/create', async (request) => {
            asked.push(String(request.params.message));
            return { action: 'accept', content: { name } };
          });
        c.setNotificationHandler('notifications/message', (n) => {
          logs.push(n.params.data);
        });
      },
    });
    cleanups.push(() => client.close());
    if (era === 'legacy') await client.setLoggingLevel('debug');
    return { client, asked, logs };
  }

  const promptText = (result: { messages: Array<{ content: { type: string; text?: string } }> }) =>
    result.messages[0]?.content.text ?? '';
  const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0]?.text;

  for (const [kind, start] of UPSTREAMS) {
    for (const eraA of A_ERAS) {
      for (const bDoes of ['prompt', 'plain call'] as const) {
        const aIs = eraA === 'legacy' ? 'a 2025 agent' : 'a 2026-07-28 agent';
        it(`${kind}, A ${aIs}, B's ${bDoes}: B's ask and log never reach A, nor A's answer B`, async () => {
          const { base, tokenA, tokenB } = await setup(start);
          const a = await agent(`${base}/mcp/s/up`, tokenA, 'Ada', eraA);
          // B's plain call: an agent that can be asked nothing, so its call relays no ask.
          const b = await agent(`${base}/mcp/s/up`, tokenB, 'Bob', 'legacy', bDoes === 'prompt');

          // A's call is in flight, and the only call: the upstream asked A through it, and holds it until B's
          // prompt (or call) is served.
          const held = a.client.callTool({ name: 'hold', arguments: {} });
          await eventually(() => expect(a.asked).toEqual(['Ready?']), 15_000);

          const said =
            bDoes === 'prompt'
              ? promptText(await b.client.getPrompt({ name: 'ask_prompt' }))
              : textOf(await b.client.callTool({ name: 'ask_tool', arguments: {} }));
          const holdResult = await held;

          // What the upstream asked and logged while serving B never reached A.
          if (eraA === 'legacy') expect(a.logs).toEqual(["hold's log"]);
          else expect(a.logs).not.toContain("B's prompt log"); // (it asked for none)
          expect(a.asked).toEqual(['Ready?']);
          // Nothing ties B's ask to B's request on a session every agent shares: refused, not given A's answer.
          expect(said).toMatch(/^refused: /);
          expect(b.asked).toEqual([]);
          expect(textOf(holdResult)).toBe('{"action":"accept","content":{"name":"Ada"}}');
        });
      }
    }
  }
});
