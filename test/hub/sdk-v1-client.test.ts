/**
 * The hub's pass-through with the SDK v1 (1.x) client, the one most agents still ship (issue 19: real clients of
 * both SDK generations): completion, logging at the session's level, resource templates and a templated read,
 * subscribe/unsubscribe, and a 2025-era upstream's sampling and elicitation relayed to the v1 agent during its call,
 * through `/mcp/s/{id}` and the aggregate `/mcp`. The upstream is the reference server (SDK v2) the conformance
 * test uses.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReferenceServer, startReferenceServer } from '../fixtures/reference-server.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

describe('the hub with an SDK v1 agent', () => {
  let gw: TestGateway;
  let upstream: ReferenceServer;
  let base: string;
  let token: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    upstream = await startReferenceServer(PUBLIC_TEST_HOST);
    gw = await startTestGateway(sqliteTarget);
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'ref' } })).statusCode).toBe(
      201,
    );
    await gw.request('PATCH', '/api/mcp/servers/ref/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    expect((await gw.request('POST', '/api/mcp/servers/ref/test')).json().ok).toBe(true);
    token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'v1-agent' } })).json().token;
    base = await gw.listen();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await gw?.close();
    await upstream?.close();
  });

  /** A v1 agent that can be asked: it samples and answers forms, and keeps the log messages it is sent. */
  async function agent(path: string) {
    const client = new Client(
      { name: 'v1-agent', version: '1.0.0' },
      { capabilities: { sampling: {}, elicitation: {} } },
    );
    const logs: string[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(String(n.params.data));
    });
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
      role: 'assistant',
      model: 'v1-model',
      content: { type: 'text', text: `v1 heard ${JSON.stringify(request.params.messages[0]?.content)}` },
    }));
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { response: 'from v1' } }));
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}${path}`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    clients.push(client);
    return { client, logs };
  }

  const textOf = (result: unknown) =>
    ((result as { content?: { type: string; text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

  for (const [path, prefix] of [
    ['/mcp/s/ref', ''],
    ['/mcp', 'ref__'],
  ] as const) {
    it(`carries completion, logging, templates, subscriptions, sampling and elicitation (${path})`, async () => {
      const { client, logs } = await agent(path);

      // Completion reaches the upstream and its answer comes back.
      const completion = await client.complete({
        ref: { type: 'ref/prompt', name: `${prefix}test_prompt_with_arguments` },
        argument: { name: 'arg1', value: 'a' },
      });
      expect(completion.completion).toMatchObject({ values: expect.any(Array) });

      // Logging at this session's level: the tool's three messages arrive while it runs.
      await client.setLoggingLevel('info');
      expect(textOf(await client.callTool({ name: `${prefix}test_tool_with_logging`, arguments: {} }))).toBe(
        'Logged three messages.',
      );
      expect(logs.filter((l) => l.startsWith('Tool '))).toEqual(['Tool started', 'Tool processing', 'Tool completed']);

      // A resource template is listed, and a URI made from it is read from the upstream.
      const templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
      // On /mcp wrapped as gatehouse://ref/<the upstream's URI, encoded>, its {id} expression intact.
      const template = templates.find((t) => decodeURIComponent(t).endsWith('test://template/{id}/data'));
      expect(template).toBeDefined();
      const read = await client.readResource({ uri: (template as string).replace('{id}', '7') });
      expect(JSON.parse(String((read.contents[0] as { text?: string }).text))).toEqual({ id: '7', templateTest: true });

      // Subscribing and unsubscribing are passed on (and answered).
      const watched = (await client.listResources()).resources.find((r) => r.uri.endsWith('watched-resource'));
      expect(watched).toBeDefined();
      await client.subscribeResource({ uri: (watched as { uri: string }).uri });
      await client.unsubscribeResource({ uri: (watched as { uri: string }).uri });

      // The 2025-era upstream asks this agent during its calls: sampling and a form.
      expect(textOf(await client.callTool({ name: `${prefix}test_sampling`, arguments: { prompt: 'hello' } }))).toBe(
        `LLM response: v1 heard ${JSON.stringify({ type: 'text', text: 'hello' })}`,
      );
      const elicited = textOf(
        await client.callTool({ name: `${prefix}test_elicitation`, arguments: { message: '?' } }),
      );
      expect(elicited).toBe('Elicitation: action=accept, content={"response":"from v1"}');
    });
  }
});
