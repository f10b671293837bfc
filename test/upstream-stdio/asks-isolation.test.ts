/**
 * One stdio child serves every agent over one pipe, so what a 2025-era child asks or logs goes to the sole
 * call in flight (`asks.ts`). A prompt, a resource read or a completion is in flight on that pipe too: what
 * the child asks or logs while it builds agent B's prompt must not reach agent A, whose tool call happens to
 * be the only tool call in flight, nor A's answer reach B's prompt. A real gateway, the sandboxed asking
 * fixture (`asking-server.ts`), SDK v2 clients as 2025 agents.
 */
import { fileURLToPath } from 'node:url';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanUp, FIXTURE_SANDBOX, newMarker, TSX_LOADER } from '../fixtures/stdio/index.js';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Harness, startHarness, textOf } from '../supervisor/helpers.js';

const ASKING_SERVER = fileURLToPath(new URL('../fixtures/stdio/asking-server.ts', import.meta.url));

interface Agent {
  client: Client;
  /** The messages of the elicitations it was asked. */
  asked: string[];
  /** The data of the log messages it got. */
  logs: unknown[];
}

describe("an ask during one agent's prompt on a shared stdio child", { timeout: 180_000 }, () => {
  let h: Harness;
  let tokenB: string;

  beforeAll(async () => {
    h = await startHarness(sqliteTarget);
    const marker = newMarker();
    h.markers.push(marker);
    const installed = await h.gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'asking',
          name: 'asking',
          transport: 'stdio',
          command: process.execPath,
          args: ['--import', TSX_LOADER, ASKING_SERVER, `--gatehouse-test-marker=${marker}`],
          toolPolicy: { defaultTier: 'allow' },
          sandbox: FIXTURE_SANDBOX,
        },
      },
    });
    expect(installed.statusCode, installed.body).toBe(201);
    // The handshake lists the tool and the prompt the hub serves.
    expect((await h.gw.request('POST', '/api/mcp/servers/asking/test')).json().ok).toBe(true);
    const started = await h.gw.request('POST', '/api/mcp/servers/asking/start');
    expect(started.statusCode, started.body).toBe(200);
    await h.waitForState('asking', 'running');
    tokenB = (await h.gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-b' } })).json().token;
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    expect(await cleanUp([], h?.markers ?? [])).toEqual({});
  });

  /** A 2025 agent that answers every elicitation with `name` and hears every log message. */
  async function agent(token: string, name: string): Promise<Agent> {
    const asked: string[] = [];
    const logs: unknown[] = [];
    const client = await connectAgent(`${h.base}/mcp/s/asking`, token, {
      era: 'legacy',
      client: { capabilities: { elicitation: { form: {} } } },
      prepare: (c) => {
        c.setRequestHandler('elicitation/create', async (request) => {
          asked.push(String(request.params.message));
          return { action: 'accept', content: { name } };
        });
        c.setNotificationHandler('notifications/message', (n) => {
          logs.push(n.params.data);
        });
      },
    });
    h.clients.push(client);
    await client.setLoggingLevel('debug');
    return { client, asked, logs };
  }

  const promptText = (result: { messages: Array<{ content: { type: string; text?: string } }> }) =>
    result.messages[0]?.content.text ?? '';

  it("never relays B's prompt ask or log to A's tool call, nor A's answer to B", async () => {
    const a = await agent(h.agentToken, 'Ada');
    const b = await agent(tokenB, 'Bob');

    // A's call is in flight, and the only tool call: the child asked A through it, and holds it until B's prompt is served.
    const held = a.client.callTool({ name: 'hold', arguments: {} });
    await eventually(() => expect(a.asked).toEqual(['Ready?']), 30_000);

    const prompt = await b.client.getPrompt({ name: 'ask_prompt' });
    const holdResult = await held;

    // What the child asked and logged while building B's prompt never reached A.
    expect(a.asked).toEqual(['Ready?']);
    expect(a.logs).toEqual(["hold's log"]);
    // Two requests in flight on one pipe: the ask cannot be told apart, so the child is refused (not given A's answer).
    expect(promptText(prompt)).toMatch(/^refused: /);
    expect(b.asked).toEqual([]);
    expect(textOf(holdResult)).toBe('{"action":"accept","content":{"name":"Ada"}}');
  });

  it('refuses an ask during a prompt with nothing else in flight (no call of its agent relays it)', async () => {
    const b = await agent(tokenB, 'Bob');
    const prompt = await b.client.getPrompt({ name: 'ask_prompt' });
    expect(promptText(prompt)).toMatch(/^refused: /);
    expect(b.asked).toEqual([]);
  });
});
