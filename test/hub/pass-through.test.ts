/**
 * What an upstream says reaches the agent through the hub as the upstream said it (issue 19): its own
 * JSON-RPC errors (code, message, data), an HTTP 401 as an auth error, a tool's `icons`, `_meta` and
 * `execution`, its `instructions` and `serverInfo` on `/mcp/s/{id}`, and resource links readable back
 * through `/mcp`. A real gateway on loopback, SDK-built upstreams of both eras on 127.0.0.2 (public
 * through the egress guard's test seam), SDK clients of both eras as agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import {
  completable,
  type McpServer,
  ProtocolError,
  ResourceTemplate,
  UriTemplate,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { wrapResourceTemplate, wrapResourceUri } from '../../src/surfaces/hub/names.js';
import { listen } from '../fixtures/http.js';
import { type McpFixture, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const ELICITATION = {
  mode: 'url' as const,
  elicitationId: 'sign-in-1',
  url: 'https://auth.example/sign-in',
  message: 'Sign in to the example service first.',
};
const README_URI = 'file:///docs/readme.md';
const TOOL_ICON = { src: 'https://icons.example/tool.png', mimeType: 'image/png', sizes: ['48x48'] };
const DOC_TEMPLATE = 'file:///docs/{name}';
const UPSTREAM_INSTRUCTIONS = 'Use lookup before anything else.';

/** The upstream's extra tools, prompt and resource (the fixture's `echo` stays the control). */
function register(server: McpServer): void {
  server.registerTool('needs_sign_in', { description: 'Throws a URL elicitation error.' }, async () => {
    throw new UrlElicitationRequiredError([ELICITATION], 'Sign-in required');
  });
  server.registerTool(
    'decorated',
    {
      description: 'A tool with icons, _meta and execution.',
      icons: [TOOL_ICON],
      execution: { taskSupport: 'optional' },
      _meta: { 'example.com/owner': 'team-a' },
    } as Parameters<McpServer['registerTool']>[1],
    async () => ({ content: [{ type: 'text' as const, text: 'decorated' }] }),
  );
  server.registerTool('link_readme', { description: 'Returns a resource link.' }, async () => ({
    content: [{ type: 'resource_link' as const, uri: README_URI, name: 'readme', mimeType: 'text/markdown' }],
  }));
  server.registerPrompt('refusing', { description: 'Always refuses with its own error.' }, () => {
    throw new ProtocolError(-32021, 'The prompt store is locked.', { retryAfterS: 5 });
  });
  server.registerResource('readme', README_URI, { mimeType: 'text/markdown' }, async () => ({
    contents: [{ uri: README_URI, mimeType: 'text/markdown', text: '# Readme' }],
  }));
  const names = ['Ada', 'Alan', 'Grace'];
  server.registerPrompt(
    'greet',
    {
      description: 'A greeting.',
      argsSchema: z.object({ name: completable(z.string(), (value) => names.filter((n) => n.startsWith(value))) }),
    },
    ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}.` } }] }),
  );
  const docs = ['guide.md', 'glossary.md', 'faq.md'];
  server.registerResource(
    'doc',
    new ResourceTemplate(DOC_TEMPLATE, {
      list: undefined,
      complete: { name: (value) => docs.filter((d) => d.startsWith(value)) },
    }),
    { mimeType: 'text/markdown' },
    async (uri, variables) => ({ contents: [{ uri: uri.href, text: `doc ${String(variables.name)}` }] }),
  );
}

const ERAS: Era[] = ['modern', 'legacy'];

/** The protocol error a request failed with, as the agent reads it (a request that succeeds fails the test). */
async function failure(request: Promise<unknown>): Promise<{ code: number; message: string; data?: unknown }> {
  const error = (await request.then(
    (result) => {
      throw new Error(`expected a protocol error, got ${JSON.stringify(result)}`);
    },
    (e: unknown) => e,
  )) as ProtocolError;
  expect(error).toBeInstanceOf(ProtocolError);
  return { code: error.code, message: error.message, ...(error.data !== undefined ? { data: error.data } : {}) };
}
const TOOLS = ['echo', 'needs_sign_in', 'decorated', 'link_readme'];

describe('what an upstream says passes through the hub', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  const clients: Client[] = [];

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  interface Setup {
    gw: TestGateway;
    base: string;
    upstream: McpFixture;
    token: string;
  }

  async function setup(upstreamEra: Era): Promise<Setup> {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const options = {
      host: PUBLIC_TEST_HOST,
      tools: ['echo'] as const,
      register,
      serverOptions: { instructions: UPSTREAM_INSTRUCTIONS },
      name: 'upstream-fixture',
    };
    const upstream = upstreamEra === 'modern' ? await startModernServer(options) : await startLegacyServer(options);
    cleanups.push(() => upstream.close());
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    const policy = await gw.request('PATCH', '/api/mcp/servers/up/tools', {
      body: { mode: 'all', allow: TOOLS, defaultTier: 'blocked' },
    });
    expect(policy.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json();
    return { gw, base: await gw.listen(), upstream, token };
  }

  async function connect(url: string, token: string, era: Era): Promise<Client> {
    const client = await connectAgent(url, token, { era });
    clients.push(client);
    return client;
  }

  for (const upstreamEra of ERAS) {
    for (const agentEra of ERAS) {
      const label = `${upstreamEra} upstream, ${agentEra} agent`;

      it(`passes an upstream's JSON-RPC errors through as protocol errors (${label})`, async () => {
        const s = await setup(upstreamEra);
        // What a client of the upstream's own era sees, asking it directly.
        const direct = await connectAgent(s.upstream.url, null, { era: upstreamEra });
        clients.push(direct);
        const directCall = await failure(direct.callTool({ name: 'needs_sign_in', arguments: {} }));
        const directPrompt = await failure(direct.getPrompt({ name: 'refusing' }));
        expect(directPrompt).toEqual({
          code: -32021,
          message: expect.stringContaining('The prompt store is locked.'),
          data: { retryAfterS: 5 },
        });
        if (upstreamEra === 'legacy')
          expect(directCall).toMatchObject({ code: -32042, data: { elicitations: [ELICITATION] } });
        else expect(directCall.code).toBeLessThan(0);

        for (const [url, name, prompt] of [
          [`${s.base}/mcp`, 'up__needs_sign_in', 'up__refusing'],
          [`${s.base}/mcp/s/up`, 'needs_sign_in', 'refusing'],
        ] as const) {
          const agent = await connect(url, s.token, agentEra);
          expect(await failure(agent.callTool({ name, arguments: {} }))).toEqual(directCall);
          expect(await failure(agent.getPrompt({ name: prompt }))).toEqual(directPrompt);
          // The control: the upstream's plain tool still answers.
          const echoed = await agent.callTool({
            name: name.replace('needs_sign_in', 'echo'),
            arguments: { text: 'x' },
          });
          expect(echoed.content).toEqual([{ type: 'text', text: 'x' }]);
        }
      });
    }
  }

  for (const upstreamEra of ERAS) {
    for (const agentEra of ERAS) {
      const label = `${upstreamEra} upstream, ${agentEra} agent`;

      it(`lists tools with their icons and _meta; /mcp/s/{id} introduces itself as the upstream (${label})`, async () => {
        const s = await setup(upstreamEra);
        const aggregate = await connect(`${s.base}/mcp`, s.token, agentEra);
        const listed = (await aggregate.listTools()).tools.find((t) => t.name === 'up__decorated');
        // (`execution` too is passed on when an upstream's list carries it, but SDK v2 drops it on both sides.)
        expect(listed).toMatchObject({ icons: [TOOL_ICON], _meta: { 'example.com/owner': 'team-a' } });
        expect(aggregate.getServerVersion()?.name).toBe('gatehouse');

        const single = await connect(`${s.base}/mcp/s/up`, s.token, agentEra);
        const unprefixed = (await single.listTools()).tools.find((t) => t.name === 'decorated');
        expect(unprefixed).toMatchObject({ icons: [TOOL_ICON], _meta: { 'example.com/owner': 'team-a' } });
        expect(single.getServerVersion()).toMatchObject({ name: 'upstream-fixture', version: '1.0.0' });
        const instructions = single.getInstructions() ?? '';
        expect(instructions.startsWith(UPSTREAM_INSTRUCTIONS)).toBe(true);
        expect(instructions).toContain('gatehouse__approval_status');
        // A call's result names the upstream too (2026-07-28 results carry serverInfo in _meta).
        const echoed = await single.callTool({ name: 'echo', arguments: { text: 'who' } });
        expect(echoed.content).toEqual([{ type: 'text', text: 'who' }]);
      });
    }
  }

  for (const upstreamEra of ERAS) {
    for (const agentEra of ERAS) {
      const label = `${upstreamEra} upstream, ${agentEra} agent`;

      it(`rewrites a tool's resource links through /mcp so they read back (${label})`, async () => {
        const s = await setup(upstreamEra);
        const aggregate = await connect(`${s.base}/mcp`, s.token, agentEra);
        const linked = await aggregate.callTool({ name: 'up__link_readme', arguments: {} });
        const link = (linked.content as { type: string; uri: string; name: string }[])[0];
        expect(link).toMatchObject({ type: 'resource_link', name: 'readme', mimeType: 'text/markdown' });
        expect(link?.uri).toBe(wrapResourceUri('up', README_URI));
        const read = await aggregate.readResource({ uri: link?.uri as string });
        expect(read.contents).toEqual([{ uri: link?.uri, mimeType: 'text/markdown', text: '# Readme' }]);

        // /mcp/s/{id} is the upstream unprefixed: its links stay as they are.
        const single = await connect(`${s.base}/mcp/s/up`, s.token, agentEra);
        const plain = await single.callTool({ name: 'link_readme', arguments: {} });
        expect((plain.content as { uri: string }[])[0]?.uri).toBe(README_URI);
        expect((await single.readResource({ uri: README_URI })).contents[0]).toMatchObject({ text: '# Readme' });
      });
    }
  }

  for (const upstreamEra of ERAS) {
    for (const agentEra of ERAS) {
      const label = `${upstreamEra} upstream, ${agentEra} agent`;

      it(`aggregates resource templates, reads templated resources and routes completions (${label})`, async () => {
        const s = await setup(upstreamEra);
        const hub = await connect(`${s.base}/mcp`, s.token, agentEra);
        const { resourceTemplates } = await hub.listResourceTemplates();
        const wrapped = wrapResourceTemplate('up', DOC_TEMPLATE);
        expect(resourceTemplates).toEqual([expect.objectContaining({ name: 'doc', uriTemplate: wrapped })]);
        const uri = new UriTemplate(wrapped).expand({ name: 'guide.md' });
        expect(uri).toBe(wrapResourceUri('up', 'file:///docs/guide.md'));
        expect((await hub.readResource({ uri })).contents).toEqual([{ uri, text: 'doc guide.md' }]);

        const prompt = await hub.complete({
          ref: { type: 'ref/prompt', name: 'up__greet' },
          argument: { name: 'name', value: 'A' },
        });
        expect(prompt.completion.values).toEqual(['Ada', 'Alan']);
        const template = await hub.complete({
          ref: { type: 'ref/resource', uri: wrapped },
          argument: { name: 'name', value: 'g' },
        });
        expect(template.completion.values).toEqual(['guide.md', 'glossary.md']);

        const single = await connect(`${s.base}/mcp/s/up`, s.token, agentEra);
        expect((await single.listResourceTemplates()).resourceTemplates[0]?.uriTemplate).toBe(DOC_TEMPLATE);
        const unprefixed = await single.complete({
          ref: { type: 'ref/prompt', name: 'greet' },
          argument: { name: 'name', value: 'G' },
        });
        expect(unprefixed.completion.values).toEqual(['Grace']);
        expect((await single.readResource({ uri: 'file:///docs/faq.md' })).contents[0]).toMatchObject({
          text: 'doc faq.md',
        });
      });
    }
  }

  // 2025 sessions only: 2026-07-28 has no logging/setLevel (a request carries its level in `_meta`).
  for (const upstreamEra of ERAS) {
    it(`answers logging/setLevel for the agent's own 2025 session (${upstreamEra} upstream)`, async () => {
      const s = await setup(upstreamEra);
      const first = await connect(`${s.base}/mcp`, s.token, 'legacy');
      const second = await connect(`${s.base}/mcp`, s.token, 'legacy');
      expect(first.getServerCapabilities()?.logging).toEqual({});
      await expect(first.setLoggingLevel('debug')).resolves.toEqual({});
      await expect(second.setLoggingLevel('error')).resolves.toEqual({});
      // Setting a level disturbs nothing else in either session.
      expect((await second.callTool({ name: 'up__echo', arguments: { text: 'still' } })).content).toEqual([
        { type: 'text', text: 'still' },
      ]);
    });
  }

  it('bounds what it passes on: a long message is cut, oversized data dropped', async () => {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const upstream = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: [],
      register: (server) =>
        server.registerPrompt('verbose', { description: 'A huge error.' }, () => {
          throw new ProtocolError(-32050, 'm'.repeat(5_000), { blob: 'd'.repeat(20_000) });
        }),
    });
    cleanups.push(() => upstream.close());
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } });
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json();
    const agent = await connect(`${await gw.listen()}/mcp`, token, 'modern');
    const error = (await agent.getPrompt({ name: 'up__verbose' }).catch((e: unknown) => e)) as ProtocolError;
    expect(error.code).toBe(-32050);
    expect(error.message.length).toBeLessThan(1_200);
    expect(error.data).toBeUndefined();
  });

  it('reports an upstream HTTP 401 as auth_required, not a protocol error', async () => {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const locked = await listen((_req, res) => {
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="example"', 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'unauthorized' }));
    }, PUBLIC_TEST_HOST);
    cleanups.push(() => locked.close());
    await gw.request('POST', '/api/mcp/install', { body: { url: `${locked.origin}/mcp`, id: 'locked' } });
    const tested = (await gw.request('POST', '/api/mcp/servers/locked/test')).json();
    expect(tested.ok).toBe(false);
    expect(tested.error.code).toBe('auth_required');
    const record = (await gw.request('GET', '/api/mcp/servers/locked')).json();
    expect(record.status).toBe('failed');
    expect(String(record.lastError)).toMatch(/^auth_required: /);
  });
});
