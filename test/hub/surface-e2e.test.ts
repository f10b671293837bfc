/**
 * The hub's surface end to end, for the cases `hub.test.ts` leaves out or covers in one protocol era
 * only: 2026-07-28 transport hygiene over raw HTTP (protocol version, batches, Origin, Host, the
 * `Mcp-Method`/`Mcp-Name` cross-checks), the Origin and Host allowlists, `GATEHOUSE_HUB_AUTH=none`,
 * aggregated prompts and resources in both eras, oversized and over-deep upstream schemas, per-server
 * `pathArgs`, and progress relayed to a 2026-07-28 agent. A real gateway on loopback, SDK-built
 * upstreams on 127.0.0.2 (public through the egress guard's test seam), SDK clients as agents.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { fromJsonSchema, type JsonSchemaType, type McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../src/config.js';
import { createGateway } from '../../src/gateway.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import type { StandardToolName } from '../fixtures/tools.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { parseBody } from '../helpers/bodies.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_SECRET_KEY, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

const MODERN = '2026-07-28';
const ENVELOPE: Record<string, unknown> = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'raw-agent', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
/** The SEP-2243 `HeaderMismatch` code: HTTP headers that disagree with the body (HTTP 400). */
const HEADER_MISMATCH = -32020;

type Json = Record<string, unknown>;

interface Answer {
  status: number;
  body: unknown;
}

/** A modern (stateless) request body: the per-request envelope in `params._meta`. */
function modernRequest(method: string, params: Json = {}, id: number | string = 1): Json {
  return { jsonrpc: '2.0', id, method, params: { ...params, _meta: ENVELOPE } };
}

/** The headers a 2026-07-28 client sends with `body`; `overrides` replace (undefined removes) any of them. */
function modernHeaders(
  token: string | null,
  method: string,
  name: string | undefined,
  overrides: Record<string, string | undefined> = {},
): Record<string, string> {
  const headers: Record<string, string | undefined> = {
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name !== undefined ? { 'mcp-name': name } : {}),
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...overrides,
  };
  return Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<string, string>;
}

/** POSTs over real loopback HTTP with `node:http`, so any header (Host included) goes out as given. */
function rawPost(url: string, headers: Record<string, string>, body: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers: { connection: 'close', ...headers } });
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          body: parseBody(Buffer.concat(chunks).toString('utf8'), String(response.headers['content-type'] ?? '')),
        }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
}

const rpcError = (answer: Answer) => (answer.body as { error?: { code: number; message: string } }).error;
const structured = (result: unknown) => (result as { structuredContent: Json }).structuredContent;

/** A JSON Schema whose JSON nesting (objects and arrays, leaves included) is exactly `levels` deep. */
function deepSchema(levels: number): Json {
  if (levels === 1) return { type: 'string' };
  if (levels === 2) return { type: 'array', items: { type: 'string' } };
  return { type: 'object', properties: { x: deepSchema(levels - 2) } };
}

/** An object schema whose JSON is exactly `bytes` bytes long (one property padded by its description). */
function wideSchema(bytes: number): Json {
  const shell = (pad: string) => ({ type: 'object', properties: { blob: { type: 'string', description: pad } } });
  const overhead = Buffer.byteLength(JSON.stringify(shell('')), 'utf8');
  const schema = shell('w'.repeat(bytes - overhead));
  expect(Buffer.byteLength(JSON.stringify(schema), 'utf8')).toBe(bytes);
  return schema;
}

describeEachStore('hub surface end to end', (target) => {
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
    agent: { id: string; token: string };
  }

  /**
   * A gateway (with `env`) and one modern upstream installed as `files`, its tools allowed (anything
   * else blocked), tested (so pinned), an agent token, listening on loopback.
   */
  async function setup(
    options: {
      env?: Record<string, string>;
      tools?: readonly StandardToolName[];
      register?: (server: McpServer) => void;
      allow?: string[];
    } = {},
  ): Promise<Setup> {
    const gw = await startTestGateway(target, options.env ?? {});
    cleanups.push(() => gw.close());
    const upstream = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: options.tools ?? ['echo', 'add', 'progress'],
      ...(options.register ? { register: options.register } : {}),
    });
    cleanups.push(() => upstream.close());
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBe(201);
    const policy = await gw.request('PATCH', '/api/mcp/servers/files/tools', {
      body: { mode: 'all', allow: options.allow ?? ['echo', 'add', 'progress'], defaultTier: 'blocked' },
    });
    expect(policy.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-one' } })).json();
    const base = await gw.listen();
    return { gw, base, upstream, agent };
  }

  async function connect(url: string, token: string | null, era: Era): Promise<Client> {
    const client = await connectAgent(url, token, { era });
    clients.push(client);
    return client;
  }

  // ---- 1. 2026-07-28 transport hygiene, raw HTTP ------------------------------------------------------

  describe('2026-07-28 requests over raw HTTP', () => {
    let s: Setup;
    const echo = (text: string) => modernRequest('tools/call', { name: 'files__echo', arguments: { text } });
    const send = (headers: Record<string, string>, body: unknown) => rawPost(`${s.base}/mcp`, headers, body);
    const callHeaders = (overrides: Record<string, string | undefined> = {}) =>
      modernHeaders(s.agent.token, 'tools/call', 'files__echo', overrides);

    it('serves a well-formed stateless call (the control for the refusals below)', async () => {
      s = await setup();
      const answer = await send(callHeaders(), echo('hello'));
      expect(answer.status).toBe(200);
      expect((answer.body as { result: Json }).result).toMatchObject({ content: [{ type: 'text', text: 'hello' }] });
      expect(s.upstream.stats.calls.echo).toBe(1);
    });

    it('refuses a bad MCP-Protocol-Version with 400', async () => {
      s = await setup();
      // The header contradicts the body's envelope (which names 2026-07-28): a header/body mismatch.
      const contradicting = await send(callHeaders({ 'mcp-protocol-version': '1999-01-01' }), echo('x'));
      expect(contradicting.status).toBe(400);
      expect(rpcError(contradicting)?.code).toBe(HEADER_MISMATCH);
      // Header and envelope agree on a revision nobody serves: the unsupported-version error (-32022).
      const unknown = await send(callHeaders({ 'mcp-protocol-version': '2099-01-01' }), {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: {
          name: 'files__echo',
          arguments: { text: 'x' },
          _meta: { ...ENVELOPE, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' },
        },
      });
      expect(unknown.status).toBe(400);
      expect(rpcError(unknown)?.code).toBe(-32022);
      expect(s.upstream.stats.calls.echo ?? 0).toBe(0);
    });

    it('refuses a JSON-RPC batch with 400', async () => {
      s = await setup();
      const batch = await send(modernHeaders(s.agent.token, 'tools/list', undefined), [
        modernRequest('tools/list', {}, 1),
        modernRequest('tools/list', {}, 2),
      ]);
      expect(batch.status).toBe(400);
      expect(batch.body).toEqual({
        jsonrpc: '2.0',
        error: { code: -32600, message: `JSON-RPC batches are not allowed in protocol version ${MODERN}.` },
        id: null,
      });
    });

    it('refuses an unlisted Origin with 403, prefix tricks included, and accepts a loopback one', async () => {
      s = await setup();
      for (const origin of ['http://127.0.0.1.evil.com', 'http://localhost.evil.com', 'https://evil.example']) {
        const refused = await send(callHeaders({ origin }), echo('x'));
        expect(refused.status, origin).toBe(403);
        expect((refused.body as { error: Json }).error.code).toBe('forbidden');
      }
      expect(s.upstream.stats.calls.echo ?? 0).toBe(0);
      expect((await send(callHeaders({ origin: 'http://127.0.0.1:5173' }), echo('x'))).status).toBe(200);
    });

    it('refuses a Host that is not loopback with 403 (DNS rebinding)', async () => {
      s = await setup();
      const port = new URL(s.base).port;
      const rebound = await send(callHeaders({ host: `rebound.example:${port}` }), echo('x'));
      expect(rebound.status).toBe(403);
      expect((rebound.body as { error: Json }).error.code).toBe('forbidden');
      expect((await send(callHeaders({ host: `localhost:${port}` }), echo('x'))).status).toBe(200);
      expect(s.upstream.stats.calls.echo).toBe(1);
    });

    it('refuses an Mcp-Method header that disagrees with the body: 400, HeaderMismatch', async () => {
      s = await setup();
      const call = await send(callHeaders({ 'mcp-method': 'tools/list' }), echo('x'));
      expect(call.status).toBe(400);
      expect(rpcError(call)?.code).toBe(HEADER_MISMATCH);
      const list = await send(
        modernHeaders(s.agent.token, 'tools/call', undefined),
        modernRequest('tools/list', {}, 3),
      );
      expect(list.status).toBe(400);
      expect(rpcError(list)?.code).toBe(HEADER_MISMATCH);
      // A required header that is missing is refused the same way.
      const missing = await send(callHeaders({ 'mcp-method': undefined }), echo('x'));
      expect(missing.status).toBe(400);
      expect(rpcError(missing)?.code).toBe(HEADER_MISMATCH);
      expect(s.upstream.stats.calls.echo ?? 0).toBe(0);
    });

    it('refuses an Mcp-Name header that disagrees with the body’s tool name: 400, HeaderMismatch', async () => {
      s = await setup();
      // A gateway routing on the header would run files__add; the body says files__echo.
      const mismatch = await send(callHeaders({ 'mcp-name': 'files__add' }), echo('x'));
      expect(mismatch.status).toBe(400);
      expect(rpcError(mismatch)?.code).toBe(HEADER_MISMATCH);
      expect((mismatch.body as { id: unknown }).id).toBe(1);
      const missing = await send(callHeaders({ 'mcp-name': undefined }), echo('x'));
      expect(missing.status).toBe(400);
      expect(rpcError(missing)?.code).toBe(HEADER_MISMATCH);
      expect(s.upstream.stats.calls).toEqual({});
      // Nothing reached the call path: no audit event (call events are made on the next turn, then flushed).
      await new Promise((r) => setImmediate(r));
      await s.gw.gateway.audit.flush();
      expect((await s.gw.request('GET', '/api/audit?kind=call')).json().events).toEqual([]);
    });
  });

  // ---- 2. Origin and Host allowlists ------------------------------------------------------------------

  it('accepts an Origin listed in GATEHOUSE_ALLOWED_ORIGINS, exactly', async () => {
    const s = await setup({ env: { GATEHOUSE_ALLOWED_ORIGINS: 'https://agent.example, https://ide.example:8443' } });
    const send = (origin: string) =>
      rawPost(
        `${s.base}/mcp`,
        modernHeaders(s.agent.token, 'tools/call', 'files__echo', { origin }),
        modernRequest('tools/call', { name: 'files__echo', arguments: { text: origin } }),
      );
    expect((await send('https://agent.example')).status).toBe(200);
    expect((await send('https://ide.example:8443')).status).toBe(200);
    for (const origin of [
      'https://agent.example.evil.com',
      'http://agent.example',
      'https://ide.example',
      'https://agent.example:444',
    ]) {
      expect((await send(origin)).status, origin).toBe(403);
    }
    expect(s.upstream.stats.calls.echo).toBe(2);
  });

  it('accepts a Host listed in GATEHOUSE_ALLOWED_HOSTS while bound to loopback', async () => {
    const s = await setup({ env: { GATEHOUSE_ALLOWED_HOSTS: 'Gatehouse.Test' } });
    const port = new URL(s.base).port;
    const send = (host: string) =>
      rawPost(
        `${s.base}/mcp`,
        modernHeaders(s.agent.token, 'tools/call', 'files__echo', { host }),
        modernRequest('tools/call', { name: 'files__echo', arguments: { text: host } }),
      );
    expect((await send(`gatehouse.test:${port}`)).status).toBe(200);
    expect((await send('GATEHOUSE.TEST')).status).toBe(200);
    expect((await send(`gatehouse.test.evil.com:${port}`)).status).toBe(403);
    expect((await send(`evil.gatehouse.test:${port}`)).status).toBe(403);
    expect(s.upstream.stats.calls.echo).toBe(2);
  });

  // ---- 3. GATEHOUSE_HUB_AUTH=none ----------------------------------------------------------------------

  it('serves a caller without a token as the `local` client when hub auth is none', async () => {
    const s = await setup({ env: { GATEHOUSE_HUB_AUTH: 'none' } });
    // A second server exposed only to another group: `local` (groups ["default"]) must not see it.
    const hidden = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    cleanups.push(() => hidden.close());
    await s.gw.request('POST', '/api/mcp/install', { body: { url: hidden.url, id: 'hidden' } });
    await s.gw.request('PATCH', '/api/mcp/servers/hidden/tools', { body: { allow: ['echo'] } });
    expect(
      (await s.gw.request('PATCH', '/api/mcp/servers/hidden/exposure', { body: { groups: ['team-b'] } })).statusCode,
    ).toBe(200);
    expect((await s.gw.request('POST', '/api/mcp/servers/hidden/test')).json().ok).toBe(true);

    for (const era of ['modern', 'legacy'] as const) {
      const local = await connect(`${s.base}/mcp`, null, era);
      expect((await local.listTools()).tools.map((t) => t.name).sort()).toEqual([
        'files__add',
        'files__echo',
        'files__progress',
        'gatehouse__approval_status',
      ]);
      const result = await local.callTool({ name: 'files__echo', arguments: { text: `as local (${era})` } });
      expect(result.content).toEqual([{ type: 'text', text: `as local (${era})` }]);
      await expect(local.callTool({ name: 'hidden__echo', arguments: { text: 'x' } })).rejects.toThrow(/not found/);
    }

    let events: { actorId: string; actorName: string; server: string; tool: string; verdict: string }[] = [];
    await eventually(async () => {
      events = (await s.gw.request('GET', '/api/audit?kind=call')).json().events;
      expect(events.length).toBeGreaterThanOrEqual(4);
    }, 5_000);
    expect(events).toHaveLength(4);
    for (const event of events) expect(event).toMatchObject({ actorId: 'local', actorName: 'local' });
    expect(events.map((e) => `${e.tool}:${e.verdict}`).sort()).toEqual([
      'echo:allow',
      'echo:allow',
      'hidden__echo:unknown_server',
      'hidden__echo:unknown_server',
    ]);
    const seen = (await s.gw.request('GET', '/api/mcp/clients')).json().clients;
    expect(seen.map((c: { id: string; name: string }) => [c.id, c.name])).toEqual([['local', 'local']]);
  });

  it('still refuses a request that carries a bad bearer when hub auth is none', async () => {
    const s = await setup({ env: { GATEHOUSE_HUB_AUTH: 'none' } });
    const body = modernRequest('tools/call', { name: 'files__echo', arguments: { text: 'x' } });
    const bad = await rawPost(
      `${s.base}/mcp`,
      modernHeaders('gh_not-a-real-token-0000000000000000', 'tools/call', 'files__echo'),
      body,
    );
    expect(bad.status).toBe(401);
    expect((bad.body as { error: Json }).error.code).toBe('unauthorized');
    const empty = await rawPost(
      `${s.base}/mcp`,
      modernHeaders(null, 'tools/call', 'files__echo', { authorization: 'Bearer ' }),
      body,
    );
    expect(empty.status).toBe(401);
    await expect(
      connectAgent(`${s.base}/mcp`, 'gh_not-a-real-token-0000000000000000', { era: 'legacy' }),
    ).rejects.toThrow();
    expect(s.upstream.stats.calls.echo ?? 0).toBe(0);
    // The control: the same request without the header is served (as `local`).
    expect((await rawPost(`${s.base}/mcp`, modernHeaders(null, 'tools/call', 'files__echo'), body)).status).toBe(200);
  });

  // ---- 4. Aggregated prompts and resources, both eras --------------------------------------------------

  const RESOURCE_URI = 'file:///notes/readme.txt?rev=2&lang=en';
  const registerPromptAndResource = (server: McpServer) => {
    server.registerPrompt(
      'greet',
      { description: 'A greeting.', argsSchema: z.object({ name: z.string() }) },
      ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}.` } }] }),
    );
    server.registerResource('notes', RESOURCE_URI, { mimeType: 'text/plain' }, async (uri) => ({
      contents: [{ uri: uri.href, text: 'the notes' }],
    }));
  };

  for (const era of ['modern', 'legacy'] as const) {
    it(`aggregates prompts and resources on /mcp, and passes them unchanged on /mcp/s/{server} (${era})`, async () => {
      const s = await setup({ tools: ['echo'], allow: ['echo'], register: registerPromptAndResource });
      const wrapped = `gatehouse://files/${encodeURIComponent(RESOURCE_URI)}`;
      expect(wrapped).toBe('gatehouse://files/file%3A%2F%2F%2Fnotes%2Freadme.txt%3Frev%3D2%26lang%3Den');

      const hub = await connect(`${s.base}/mcp`, s.agent.token, era);
      expect(hub.getProtocolEra()).toBe(era);
      const prompts = (await hub.listPrompts()).prompts;
      expect(prompts.map((p) => p.name)).toEqual(['files__greet']);
      expect(prompts[0]).toMatchObject({ description: 'A greeting.', arguments: [{ name: 'name', required: true }] });
      const prompt = await hub.getPrompt({ name: 'files__greet', arguments: { name: 'Ada' } });
      expect(prompt.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'Hello, Ada.' } }]);
      await expect(hub.getPrompt({ name: 'greet', arguments: { name: 'Ada' } })).rejects.toThrow(/not found/);

      const resources = (await hub.listResources()).resources;
      expect(resources.map((r) => r.uri)).toEqual([wrapped]);
      expect(resources[0]).toMatchObject({ name: 'notes', mimeType: 'text/plain' });
      const read = await hub.readResource({ uri: wrapped });
      expect(read.contents).toEqual([{ uri: wrapped, text: 'the notes' }]);
      // The upstream's own URI is not an aggregate URI.
      await expect(hub.readResource({ uri: RESOURCE_URI })).rejects.toThrow(/not found/);

      const single = await connect(`${s.base}/mcp/s/files`, s.agent.token, era);
      expect((await single.listPrompts()).prompts.map((p) => p.name)).toEqual(['greet']);
      expect((await single.getPrompt({ name: 'greet', arguments: { name: 'Bo' } })).messages).toEqual([
        { role: 'user', content: { type: 'text', text: 'Hello, Bo.' } },
      ]);
      expect((await single.listResources()).resources.map((r) => r.uri)).toEqual([RESOURCE_URI]);
      expect((await single.readResource({ uri: RESOURCE_URI })).contents).toEqual([
        { uri: RESOURCE_URI, text: 'the notes' },
      ]);
      await expect(single.readResource({ uri: wrapped })).rejects.toThrow(/not found/);

      expect(s.upstream.log.count('prompts/get')).toBe(2);
      expect(s.upstream.log.count('resources/read')).toBe(2);
    });
  }

  // ---- 5. Oversized and over-deep upstream schemas ------------------------------------------------------

  it('quarantines tools whose inputSchema is over 64 KB or nested deeper than 32 levels (schema_too_large)', async () => {
    const calls: string[] = [];
    const schemas: Record<string, Json> = {
      wide: wideSchema(64 * 1024 + 1),
      wide_ok: wideSchema(64 * 1024),
      deep: deepSchema(33),
      deep_ok: deepSchema(32),
    };
    const register = (server: McpServer) => {
      for (const [name, schema] of Object.entries(schemas)) {
        server.registerTool(
          name,
          { description: `schema ${name}`, inputSchema: fromJsonSchema(schema as JsonSchemaType) },
          async () => {
            calls.push(name);
            return { content: [{ type: 'text', text: `${name} ran` }] };
          },
        );
      }
    };
    const s = await setup({ tools: ['echo'], allow: ['echo', ...Object.keys(schemas)], register });

    const pins = (await s.gw.request('GET', '/api/mcp/servers/files/pins')).json();
    const byTool = Object.fromEntries(
      (pins.pins as { tool: string; state: string; reason: string | null }[]).map((p) => [
        p.tool,
        { state: p.state, reason: p.reason },
      ]),
    );
    expect(byTool).toEqual({
      echo: { state: 'pinned', reason: null },
      wide: { state: 'quarantined', reason: 'schema_too_large' },
      wide_ok: { state: 'pinned', reason: null },
      deep: { state: 'quarantined', reason: 'schema_too_large' },
      deep_ok: { state: 'pinned', reason: null },
    });
    // A second handshake keeps them quarantined, and the verdicts say so.
    const retest = (await s.gw.request('POST', '/api/mcp/servers/files/test')).json();
    expect(retest.verdicts).toMatchObject({
      wide: 'quarantined',
      deep: 'quarantined',
      wide_ok: 'allow',
      deep_ok: 'allow',
    });
    // An operator cannot approve a schema over the limits.
    const widePin = (await s.gw.request('GET', '/api/mcp/servers/files/pins'))
      .json()
      .pins.find((p: { tool: string }) => p.tool === 'wide');
    const approve = await s.gw.request('POST', '/api/mcp/servers/files/pins/wide/approve', {
      body: { pendingHash: widePin.pendingHash },
    });
    expect(approve.statusCode).toBe(409);
    expect(approve.json().error).toMatchObject({ code: 'conflict', reason: 'schema_too_large' });

    for (const era of ['modern', 'legacy'] as const) {
      const agent = await connect(`${s.base}/mcp`, s.agent.token, era);
      expect((await agent.listTools()).tools.map((t) => t.name).sort()).toEqual([
        'files__deep_ok',
        'files__echo',
        'files__wide_ok',
        'gatehouse__approval_status',
      ]);
      for (const name of ['files__wide', 'files__deep']) {
        const refused = await agent.callTool({ name, arguments: {} });
        expect(refused.isError).toBe(true);
        expect(structured(refused)).toMatchObject({
          status: 'error',
          error: { code: 'tool.quarantined', reason: 'schema_too_large' },
        });
      }
      expect((await agent.callTool({ name: 'files__deep_ok', arguments: {} })).content).toEqual([
        { type: 'text', text: 'deep_ok ran' },
      ]);
    }
    expect(calls).toEqual(['deep_ok', 'deep_ok']);
  });

  // ---- 6. Per-server pathArgs ----------------------------------------------------------------------------

  it('sandboxes the per-server pathArgs instead of the default names', async () => {
    const root = mkdtempSync(join(tmpdir(), 'gatehouse-roots-'));
    cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
    const register = (server: McpServer) => {
      server.registerTool(
        'copy',
        {
          description: 'copies a file',
          inputSchema: z.object({
            source: z.union([z.string(), z.array(z.string())]).optional(),
            path: z.string().optional(),
          }),
        },
        async ({ source, path }) => ({
          content: [{ type: 'text', text: `copied ${JSON.stringify(source)} to ${path}` }],
        }),
      );
    };
    const s = await setup({ tools: ['echo'], allow: ['echo', 'copy'], register });
    const configured = await s.gw.request('PATCH', '/api/mcp/servers/files/config', {
      body: { workspaceRoots: [root], pathArgs: ['source'] },
    });
    expect(configured.statusCode).toBe(200);
    expect(configured.json().server).toMatchObject({ workspaceRoots: [root], pathArgs: ['source'] });

    const agent = await connect(`${s.base}/mcp`, s.agent.token, 'modern');
    const copy = (args: Json) => agent.callTool({ name: 'files__copy', arguments: args });
    const escapeRefusal = (argument: string) => ({
      status: 'error',
      error: { code: 'policy.path_escape', path: argument },
    });

    // The custom name is sandboxed, a string or each element of a list. (An HTTP server resolves relative
    // paths from a working directory Gatehouse does not set, so paths here are absolute.)
    expect(structured(await copy({ source: `${root}/../outside.txt` }))).toMatchObject(escapeRefusal('source'));
    expect(structured(await copy({ source: '/etc/passwd' }))).toMatchObject(escapeRefusal('source'));
    expect(structured(await copy({ source: [`${root}/in/a.txt`, `${root}/in/../../b.txt`] }))).toMatchObject(
      escapeRefusal('source'),
    );
    expect(structured(await copy({ source: 'in/a.txt' }))).toMatchObject({
      status: 'error',
      error: { code: 'policy.relative_path', path: 'source' },
    });
    expect(s.upstream.log.count('tools/call')).toBe(0);
    // …and the default names are no longer the ones checked: `path` goes through as given.
    expect((await copy({ source: `${root}/in/a.txt`, path: '/etc/passwd' })).content).toEqual([
      { type: 'text', text: `copied "${root}/in/a.txt" to /etc/passwd` },
    ]);
    expect(s.upstream.log.count('tools/call')).toBe(1);

    // null restores the default names: `path` is checked again and `source` is not.
    const restored = await s.gw.request('PATCH', '/api/mcp/servers/files/config', { body: { pathArgs: null } });
    expect(restored.statusCode).toBe(200);
    expect(restored.json().server.pathArgs).toBeUndefined();
    expect(structured(await copy({ source: `${root}/in/a.txt`, path: '/etc/passwd' }))).toMatchObject(
      escapeRefusal('path'),
    );
    expect((await copy({ source: '../outside.txt', path: `${root}/in/b.txt` })).content).toEqual([
      { type: 'text', text: `copied "../outside.txt" to ${root}/in/b.txt` },
    ]);
    expect(s.upstream.log.count('tools/call')).toBe(2);
  });

  // ---- 7. Progress in the 2026-07-28 era ---------------------------------------------------------------

  it('relays progress notifications to a 2026-07-28 agent', async () => {
    const s = await setup();
    const agent = await connect(`${s.base}/mcp`, s.agent.token, 'modern');
    expect(agent.getProtocolEra()).toBe('modern');
    const seen: { progress: number; total?: number; message?: string }[] = [];
    const result = await agent.callTool(
      { name: 'files__progress', arguments: { steps: 3 } },
      { onprogress: (p) => seen.push({ progress: p.progress, total: p.total, message: p.message }) },
    );
    expect(result.content).toEqual([{ type: 'text', text: '3 steps done' }]);
    expect(seen).toEqual([
      { progress: 1, total: 3, message: 'step 1' },
      { progress: 2, total: 3, message: 'step 2' },
      { progress: 3, total: 3, message: 'step 3' },
    ]);
    // The upstream was asked with a progress token of the gateway's own.
    const [call] = s.upstream.log.withMethod('tools/call');
    expect(JSON.parse(call?.body ?? '{}').params._meta.progressToken).toBeDefined();
  });
});

// ---- 3 (cont.). Refused at start ---------------------------------------------------------------------------

describe('GATEHOUSE_HUB_AUTH=none at start', () => {
  it('refuses to start when bound to a non-loopback address', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-hubauth-'));
    try {
      for (const host of ['0.0.0.0', '192.0.2.10', '::']) {
        const config = loadConfig({
          env: {
            NODE_ENV: 'test',
            GATEHOUSE_DATA_DIR: dataDir,
            GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
            GATEHOUSE_HOST: host,
            GATEHOUSE_HUB_AUTH: 'none',
            GATEHOUSE_LOG_LEVEL: 'silent',
          },
        });
        await expect(createGateway(config)).rejects.toMatchObject({
          code: 'validation_error',
          message: `GATEHOUSE_HUB_AUTH=none serves the hub without a token; refusing to bind ${host}. Bind 127.0.0.1.`,
        });
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
