/**
 * MCP Apps through the hub (issue 19): a tool's `_meta.ui.resourceUri` and the `ui://` resource it names
 * reach the agent with their scheme preserved — `ui://{serverId}/{path}` on `/mcp`, reversed on read;
 * unchanged on `/mcp/s/{id}`. A real gateway on loopback, SDK v2 upstreams of both eras on 127.0.0.2,
 * SDK v2 agents of both eras.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const APP_URI = 'ui://charts/bar.html';
const APP_HTML = '<!doctype html><title>bar</title>';
const APP_MIME = 'text/html;profile=mcp-app';
const UI_EXTENSION = 'io.modelcontextprotocol/ui';

function register(server: McpServer): void {
  server.registerTool(
    'chart',
    { description: 'Draws a chart.', _meta: { ui: { resourceUri: APP_URI }, 'example.com/x': 1 } } as Parameters<
      McpServer['registerTool']
    >[1],
    async () => ({ content: [{ type: 'text' as const, text: 'drawn' }] }),
  );
  server.registerResource('bar-chart', APP_URI, { mimeType: APP_MIME }, async () => ({
    contents: [{ uri: APP_URI, mimeType: APP_MIME, text: APP_HTML }],
  }));
}

/**
 * A 2025 server written as the MCP Apps SDK's are: its app (the tool and its `ui://` resource) exists on a session
 * only when the host declared the extension with the app's MIME type at `initialize`.
 */
function registerGated(server: McpServer): void {
  const tool = server.registerTool(
    'chart',
    { description: 'Draws a chart.', _meta: { ui: { resourceUri: APP_URI } } } as Parameters<
      McpServer['registerTool']
    >[1],
    async () => ({ content: [{ type: 'text' as const, text: 'drawn' }] }),
  );
  const resource = server.registerResource('bar-chart', APP_URI, { mimeType: APP_MIME }, async () => ({
    contents: [{ uri: APP_URI, mimeType: APP_MIME, text: APP_HTML }],
  }));
  tool.disable();
  resource.disable();
  server.server.oninitialized = () => {
    const ui = server.server.getClientCapabilities()?.extensions?.[UI_EXTENSION] as { mimeTypes?: unknown } | undefined;
    if (Array.isArray(ui?.mimeTypes) && ui.mimeTypes.includes(APP_MIME)) {
      tool.enable();
      resource.enable();
    }
  };
}

const ERAS: Era[] = ['modern', 'legacy'];

describe('MCP Apps through the hub', { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  const clients: Client[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  for (const upstreamEra of ERAS) {
    it(`passes _meta.ui and ui:// resources with their scheme (${upstreamEra} upstream, both agent eras)`, async () => {
      const gw = await startTestGateway(sqliteTarget);
      cleanups.push(() => gw.close());
      const options = { host: PUBLIC_TEST_HOST, tools: ['echo'] as const, register };
      const upstream = upstreamEra === 'modern' ? await startModernServer(options) : await startLegacyServer(options);
      cleanups.push(() => upstream.close());
      expect(
        (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'apps' } })).statusCode,
      ).toBe(201);
      const policy = await gw.request('PATCH', '/api/mcp/servers/apps/tools', {
        body: { mode: 'all', allow: ['chart'], defaultTier: 'blocked' },
      });
      expect(policy.statusCode).toBe(200);
      expect((await gw.request('POST', '/api/mcp/servers/apps/test')).json().ok).toBe(true);
      const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'host' } })).json();
      const base = await gw.listen();

      for (const era of ERAS) {
        const aggregate = await connectAgent(`${base}/mcp`, token, { era });
        clients.push(aggregate);
        const wrapped = 'ui://apps/charts/bar.html';
        const tool = (await aggregate.listTools()).tools.find((t) => t.name === 'apps__chart');
        expect(tool?._meta).toEqual({ ui: { resourceUri: wrapped }, 'example.com/x': 1 });
        const listed = (await aggregate.listResources()).resources.find((r) => r.uri === wrapped);
        expect(listed).toMatchObject({ mimeType: APP_MIME });
        const read = await aggregate.readResource({ uri: wrapped });
        expect(read.contents).toEqual([{ uri: wrapped, mimeType: APP_MIME, text: APP_HTML }]);

        const single = await connectAgent(`${base}/mcp/s/apps`, token, { era });
        clients.push(single);
        const own = (await single.listTools()).tools.find((t) => t.name === 'chart');
        expect(own?._meta).toEqual({ ui: { resourceUri: APP_URI }, 'example.com/x': 1 });
        const readOwn = await single.readResource({ uri: APP_URI });
        expect(readOwn.contents).toEqual([{ uri: APP_URI, mimeType: APP_MIME, text: APP_HTML }]);
      }
    });
  }

  it('declares the extension to a 2025-era upstream, whose app offered only to hosts that declare it reaches agents', async () => {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const upstream = await startLegacyServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register: registerGated });
    cleanups.push(() => upstream.close());
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'apps' } })).statusCode).toBe(
      201,
    );
    const policy = await gw.request('PATCH', '/api/mcp/servers/apps/tools', {
      body: { mode: 'all', defaultTier: 'allow' },
    });
    expect(policy.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/apps/test')).json().ok).toBe(true);
    // Every session Gatehouse opened declared it, with the app's MIME type.
    const initializes = upstream.log.withMethod('initialize');
    expect(initializes.length).toBeGreaterThan(0);
    for (const request of initializes) {
      expect(JSON.parse(request.body ?? '{}').params?.capabilities?.extensions).toEqual({
        [UI_EXTENSION]: { mimeTypes: [APP_MIME] },
      });
    }
    const detail = (await gw.request('GET', '/api/mcp/servers/apps')).json();
    expect(JSON.stringify(detail)).toContain(APP_URI);

    const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'host' } })).json();
    const base = await gw.listen();
    const host = { capabilities: { extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } } };
    for (const era of ERAS) {
      const aggregate = await connectAgent(`${base}/mcp`, token, { era, client: host });
      clients.push(aggregate);
      // The upstream offers Apps now, so the hub declares the extension to the agent.
      expect(aggregate.getServerCapabilities()?.extensions?.[UI_EXTENSION], era).toBeDefined();
      const wrapped = 'ui://apps/charts/bar.html';
      const tool = (await aggregate.listTools()).tools.find((t) => t.name === 'apps__chart');
      expect(tool?._meta, era).toEqual({ ui: { resourceUri: wrapped } });
      const read = await aggregate.readResource({ uri: wrapped });
      expect(read.contents).toEqual([{ uri: wrapped, mimeType: APP_MIME, text: APP_HTML }]);
      const called = await aggregate.callTool({ name: 'apps__chart', arguments: {} });
      expect(called.content).toEqual([{ type: 'text', text: 'drawn' }]);

      const single = await connectAgent(`${base}/mcp/s/apps`, token, { era, client: host });
      clients.push(single);
      expect(single.getServerCapabilities()?.extensions?.[UI_EXTENSION], era).toBeDefined();
      expect((await single.listResources()).resources.map((r) => r.uri)).toContain(APP_URI);
    }
  });

  it("declares the extension with a 2026-07-28 upstream's catalog requests (lists and UI resource reads), nothing else", async () => {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    cleanups.push(() => upstream.close());
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'apps' } })).statusCode).toBe(
      201,
    );
    expect((await gw.request('POST', '/api/mcp/servers/apps/test')).json().ok).toBe(true);
    const declared = (method: string) =>
      upstream.log
        .withMethod(method)
        .map(
          (request) => JSON.parse(request.body ?? '{}').params?._meta?.['io.modelcontextprotocol/clientCapabilities'],
        );
    for (const method of ['tools/list', 'resources/list', 'resources/read']) {
      const envelopes = declared(method);
      expect(envelopes.length, method).toBeGreaterThan(0);
      // No agent is calling: no asks are claimed, only what Gatehouse hosts itself.
      for (const capabilities of envelopes) {
        expect(capabilities, method).toEqual({ extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } });
      }
    }
  });

  it('negotiates the extension both ways: declared to agents where an upstream offers it, passed on per call', async () => {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    cleanups.push(() => upstream.close());
    const plain = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    cleanups.push(() => plain.close());
    for (const [id, url] of [
      ['apps', upstream.url],
      ['plain', plain.url],
    ] as const) {
      expect((await gw.request('POST', '/api/mcp/install', { body: { url, id } })).statusCode).toBe(201);
      const policy = await gw.request('PATCH', `/api/mcp/servers/${id}/tools`, {
        body: { mode: 'all', defaultTier: 'allow' },
      });
      expect(policy.statusCode).toBe(200);
      expect((await gw.request('POST', `/api/mcp/servers/${id}/test`)).json().ok).toBe(true);
    }
    const { token } = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'host' } })).json();
    const base = await gw.listen();
    const host = { capabilities: { extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } } };

    for (const era of ERAS) {
      // Declared on /mcp (an upstream of the aggregate offers Apps) and on /mcp/s/apps; not on /mcp/s/plain.
      for (const [path, declared] of [
        ['/mcp', true],
        ['/mcp/s/apps', true],
        ['/mcp/s/plain', false],
      ] as const) {
        const agent = await connectAgent(`${base}${path}`, token, { era, client: host });
        clients.push(agent);
        expect(agent.getServerCapabilities()?.extensions?.[UI_EXTENSION] !== undefined, `${era} ${path}`).toBe(
          declared,
        );
      }
    }

    // A 2026-07-28 upstream is told of the agent's extension on its call (direct path and SDK path), and only then.
    const envelopeOfLastCall = () => {
      const body = JSON.parse(upstream.log.withMethod('tools/call').at(-1)?.body ?? '{}');
      return body.params?._meta?.['io.modelcontextprotocol/clientCapabilities'] as Record<string, unknown>;
    };
    const withUi = await connectAgent(`${base}/mcp`, token, { era: 'modern', client: host });
    clients.push(withUi);
    await withUi.callTool({ name: 'apps__chart', arguments: {} });
    expect(envelopeOfLastCall()).toMatchObject({ extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } });
    await withUi.callTool({ name: 'apps__chart', arguments: {} }, { onprogress: () => {} });
    expect(envelopeOfLastCall()).toMatchObject({ extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } });
    const legacyHost = await connectAgent(`${base}/mcp`, token, { era: 'legacy', client: host });
    clients.push(legacyHost);
    await legacyHost.callTool({ name: 'apps__chart', arguments: {} });
    expect(envelopeOfLastCall()).toMatchObject({ extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } });
    // Reading the app on the agent's behalf declares it too.
    await withUi.readResource({ uri: 'ui://apps/charts/bar.html' });
    const read = JSON.parse(upstream.log.withMethod('resources/read').at(-1)?.body ?? '{}');
    expect(read.params?._meta?.['io.modelcontextprotocol/clientCapabilities']).toMatchObject({
      extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } },
    });
    const withoutUi = await connectAgent(`${base}/mcp`, token, { era: 'modern' });
    clients.push(withoutUi);
    await withoutUi.callTool({ name: 'apps__chart', arguments: {} });
    expect(envelopeOfLastCall()?.extensions).toBeUndefined();
  });
});
