/**
 * The hub's 2026-07-28 fast path for `tools/call` and `tools/list` (`src/surfaces/hub/fast-path.ts`) against the SDK path,
 * differentially: two real gateways on loopback with the same upstream, policy and agent — one with
 * the fast path on (the default), one with `GATEHOUSE_HUB_FAST_PATH=false` — receive the same raw HTTP
 * requests, built by hand as the SDK's modern client sends them. Each pair of answers must agree in
 * HTTP status, media type and JSON-RPC body (in a 2025-era session the fast path answers a quick call as
 * JSON, the message the SDK sends as one event), and `gatehouse_hub_fast_path_requests_total` proves which
 * path served the request: +1 on the fast gateway for exactly the eligible requests, never on the other.
 */
import { inputRequired, type McpServer } from '@modelcontextprotocol/server';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { continuationAsyncId } from '../helpers/async-hooks.js';
import { parseBody } from '../helpers/bodies.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

const VERSION = '2026-07-28';
const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo';
const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** The per-request envelope a modern SDK client puts in `params._meta`. */
const ENVELOPE: Record<string, unknown> = {
  [PROTOCOL_VERSION_KEY]: VERSION,
  [CLIENT_INFO_KEY]: { name: 'agent', version: '1.0.0' },
  [CLIENT_CAPABILITIES_KEY]: {},
};

interface Side {
  gw: TestGateway;
  base: string;
  token: string;
}

/** One raw request: headers without authorization (each side adds its own agent's), and the body text. */
interface Wire {
  path: string;
  headers: Record<string, string>;
  body: string;
}

interface Answer {
  status: number;
  mediaType: string;
  body: unknown;
}

interface CallShape {
  name: string;
  /** The `arguments` value; `absent` leaves the key out. */
  args?: unknown;
  id?: unknown;
  /** `params._meta`; default the standard envelope. */
  meta?: Record<string, unknown>;
  /** Extra keys in `params`. */
  params?: Record<string, unknown>;
  /** Extra top-level keys in the body. */
  extra?: Record<string, unknown>;
  /** Header overrides; undefined removes the header. */
  headers?: Record<string, string | undefined>;
  path?: string;
}

/** The headers that have a value (an override of undefined removes one). */
function present(headers: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) if (value !== undefined) out[key] = value;
  return out;
}

/** Each gateway queues its own approval under a fresh random id; only that id may differ between them. */
const withoutApprovalIds = (body: unknown) =>
  JSON.parse(JSON.stringify(body).replace(/apr_[A-Za-z0-9_-]+/g, 'apr_<id>'));

/** A tools/call exactly as the SDK's modern client writes it (same key order, same headers). */
function call(shape: CallShape): Wire {
  const params: Record<string, unknown> = { name: shape.name };
  if (shape.args !== 'absent') params.arguments = shape.args ?? {};
  params._meta = shape.meta ?? ENVELOPE;
  Object.assign(params, shape.params);
  const body = {
    method: 'tools/call',
    params,
    jsonrpc: '2.0',
    id: shape.id ?? 0,
    ...shape.extra,
  };
  const headers: Record<string, string | undefined> = {
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-method': 'tools/call',
    'mcp-name': shape.name,
    'mcp-protocol-version': VERSION,
    ...shape.headers,
  };
  return { path: shape.path ?? '/mcp', headers: present(headers), body: JSON.stringify(body) };
}

/** A tools/list as the SDK's modern client writes it; `params` adds keys (a cursor), `headers` overrides. */
function list(shape: Pick<CallShape, 'params' | 'headers' | 'path' | 'id'> = {}): Wire {
  const body = {
    method: 'tools/list',
    params: { _meta: ENVELOPE, ...shape.params },
    jsonrpc: '2.0',
    id: shape.id ?? 1,
  };
  const headers: Record<string, string | undefined> = {
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-method': 'tools/list',
    'mcp-protocol-version': VERSION,
    ...shape.headers,
  };
  return { path: shape.path ?? '/mcp', headers: present(headers), body: JSON.stringify(body) };
}

/**
 * POSTs `wire` as `side`'s agent over real loopback HTTP. `fetch` runs on the suite's own `Agent`,
 * destroyed before the gateways close: after an aborted request undici dials a fresh, empty socket,
 * which would otherwise hold a gateway's close open until the server's headers timeout.
 */
async function send(client: Agent, side: Side, wire: Wire, signal?: AbortSignal): Promise<Answer> {
  const response = await fetch(`${side.base}${wire.path}`, {
    dispatcher: client,
    method: 'POST',
    headers: { ...wire.headers, authorization: `Bearer ${side.token}` },
    body: wire.body,
    ...(signal ? { signal } : {}),
  });
  const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return { status: response.status, mediaType, body: parseBody(await response.text(), mediaType) };
}

/** `gatehouse_hub_fast_path_requests_total` as `/metrics` reports it. */
async function fastCalls(side: Side): Promise<number> {
  const response = await side.gw.request('GET', '/metrics', { token: TEST_ADMIN_TOKEN });
  expect(response.statusCode).toBe(200);
  const line = response.body.split('\n').find((l) => l.startsWith('gatehouse_hub_fast_path_requests_total '));
  if (line === undefined) throw new Error('gatehouse_hub_fast_path_requests_total is missing from /metrics');
  return Number(line.split(' ')[1]);
}

/** Waits (bounded) until `check` holds; fails with `what` when it never does. */
async function until(what: string, check: () => boolean, boundMs = 10_000): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

type Json = Record<string, unknown>;
const resultOf = (answer: Answer) => (answer.body as { result: Json }).result;
const errorOf = (answer: Answer) => (answer.body as { error: Json }).error;

describeEachStore('hub fast path: the same answers as the SDK path', (target) => {
  let upstream: McpFixture;
  let fast: Side;
  let sdk: Side;
  let client: Agent;
  /** What the upstream's `hang` tool went through: calls started, and calls whose request signal aborted. */
  const hang = { started: 0, aborted: 0 };

  const register = (server: McpServer) => {
    server.registerTool(
      'read_file',
      { description: 'reads a file', inputSchema: z.object({ path: z.string() }) },
      async ({ path }) => ({ content: [{ type: 'text', text: `contents of ${path}` }] }),
    );
    // Asks for sampling the agent did not declare: the upstream's SDK answers -32021 in its stead.
    server.registerTool('needs_sampling', { description: 'asks the agent for a completion' }, async () =>
      inputRequired({
        inputRequests: {
          answer: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'Say pong' } }],
            maxTokens: 16,
          }),
        },
      }),
    );
    server.registerTool('slow', { description: 'answers after 300 ms' }, async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return { content: [{ type: 'text', text: 'slow' }] };
    });
    server.registerTool('hang', { description: 'waits until its request is cancelled' }, async (ctx) => {
      hang.started += 1;
      const signal = ctx.mcpReq.signal;
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
      hang.aborted += 1;
      return { content: [{ type: 'text', text: 'cancelled' }], isError: true };
    });
  };

  async function startSide(env: Record<string, string>, name: string, goneUrl: string): Promise<Side> {
    // A long call timeout, so only the agent's disconnect (never the gateway's deadline) can cancel `hang`.
    const gw = await startTestGateway(target, { GATEHOUSE_CALL_TIMEOUT_MS: '120000', ...env });
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    const policy = await gw.request('PATCH', '/api/mcp/servers/up/tools', {
      body: {
        mode: 'exclude',
        exclude: ['big'],
        allow: ['echo', 'add', 'fail', 'structured', 'hang', 'needs_sampling'],
        gated: ['read_file'],
        blocked: ['blocks'],
        defaultTier: 'blocked',
      },
    });
    expect(policy.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
    // A second upstream, stopped once both gateways know it: its calls fail to connect.
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: goneUrl, id: 'gone' } })).statusCode).toBe(201);
    const gonePolicy = await gw.request('PATCH', '/api/mcp/servers/gone/tools', { body: { allow: ['echo'] } });
    expect(gonePolicy.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/gone/test')).json().ok).toBe(true);
    const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name } })).json();
    return { gw, base: await gw.listen(), token: agent.token };
  }

  beforeAll(async () => {
    client = new Agent();
    upstream = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: ['echo', 'add', 'fail', 'big', 'blocks', 'structured'],
      register,
    });
    const gone = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    [fast, sdk] = await Promise.all([
      startSide({}, 'agent-fast', gone.url),
      startSide({ GATEHOUSE_HUB_FAST_PATH: 'false' }, 'agent-sdk', gone.url),
    ]);
    await gone.close();
  });
  afterAll(async () => {
    // The test's own HTTP client first (its sockets would hold a gateway's close open), then the
    // upstream (it drops every socket, so no call left hanging can hold a gateway either).
    await client?.destroy();
    await upstream?.close();
    await Promise.all([fast?.gw.close(), sdk?.gw.close()]);
  });

  /**
   * Sends `wire` to both gateways; asserts the two answers agree (status, media type, body after
   * `normalise`) and that the fast gateway's counter moved by `taken` while the SDK-only one's stayed.
   */
  async function differential(wire: Wire, taken: 0 | 1, normalise: (body: unknown) => unknown = (b) => b) {
    const before = await Promise.all([fastCalls(fast), fastCalls(sdk)]);
    const viaFast = await send(client, fast, wire);
    const viaSdk = await send(client, sdk, wire);
    const after = await Promise.all([fastCalls(fast), fastCalls(sdk)]);
    expect(after[0] - before[0], 'fast-path calls on the fast gateway').toBe(taken);
    expect(after[1] - before[1], 'fast-path calls on the SDK-only gateway').toBe(0);
    expect(viaFast.status).toBe(viaSdk.status);
    expect(viaFast.mediaType).toBe(viaSdk.mediaType);
    expect(normalise(viaFast.body)).toEqual(normalise(viaSdk.body));
    return viaSdk;
  }

  const SERVER_INFO = { name: 'gatehouse', version: expect.any(String) };

  // ---- Requests the fast path must take, answering what the SDK answers --------------------------------

  it('an allowed tool: its result, typed complete and stamped with the hub’s serverInfo', async () => {
    const answer = await differential(call({ name: 'up__echo', args: { text: 'x' } }), 1);
    expect(answer.status).toBe(200);
    expect(answer.mediaType).toBe('application/json');
    expect(answer.body).toMatchObject({ jsonrpc: '2.0', id: 0, result: { content: [{ type: 'text', text: 'x' }] } });
    expect(resultOf(answer).resultType).toBe('complete');
    expect(resultOf(answer)._meta).toEqual({ 'io.modelcontextprotocol/serverInfo': SERVER_INFO });
  });

  it('calls leave no async context behind: after the upstreams’ handshakes and the calls, promises pay no hook', async () => {
    // The SDK client's operations (the handshakes) open async scopes (`src/async-scope.ts`); once they are
    // over, nothing on a call's path may keep Node's promise hook installed, which every promise would pay.
    await differential(call({ name: 'up__echo', args: { text: 'y' } }), 1);
    expect(await continuationAsyncId()).toBe(0);
  });

  it('an allowed tool with structured output', async () => {
    const answer = await differential(call({ name: 'up__add', args: { a: 20, b: 22 } }), 1);
    expect(resultOf(answer)).toMatchObject({ content: [{ type: 'text', text: '42' }], structuredContent: { sum: 42 } });
  });

  it('an upstream result with a _meta of its own: the hub’s serverInfo joins it', async () => {
    const answer = await differential(call({ name: 'up__structured', args: {} }), 1);
    expect(resultOf(answer)).toMatchObject({ structuredContent: { greeting: 'hello' } });
    expect(resultOf(answer)._meta).toEqual({
      'fixture/trace': 'structured-1',
      'io.modelcontextprotocol/serverInfo': SERVER_INFO,
    });
  });

  it('an upstream tool error (isError: true)', async () => {
    const answer = await differential(call({ name: 'up__fail', args: {} }), 1);
    expect(resultOf(answer)).toMatchObject({ isError: true, content: [{ type: 'text', text: 'failed on purpose' }] });
  });

  it('an upstream that cannot be reached: the upstream_unreachable result', async () => {
    const answer = await differential(call({ name: 'gone__echo', args: { text: 'x' } }), 1);
    expect(resultOf(answer)).toMatchObject({
      isError: true,
      structuredContent: { status: 'error', error: { code: 'upstream_unreachable' } },
    });
  });

  it("an upstream's -32021 (missing client capability): passed through with its HTTP 400, as the spec asks", async () => {
    const answer = await differential(call({ name: 'up__needs_sampling', args: {} }), 1);
    expect(answer.status).toBe(400);
    expect(errorOf(answer)).toMatchObject({ code: -32021, data: { requiredCapabilities: { sampling: {} } } });
  });

  it('an unknown tool and an unknown server: -32602 not found', async () => {
    const tool = await differential(call({ name: 'up__nope', args: {} }), 1);
    expect(tool.status).toBe(200);
    expect(errorOf(tool)).toEqual({ code: -32602, message: 'Tool up__nope not found' });
    const server = await differential(call({ name: 'nope__echo', args: {} }), 1);
    expect(errorOf(server)).toEqual({ code: -32602, message: 'Tool nope__echo not found' });
  });

  it('a tool the policy excludes: answered exactly like an unknown one', async () => {
    const excluded = await differential(call({ name: 'up__big', args: { bytes: 1 } }), 1);
    const unknown = await differential(call({ name: 'up__nope', args: { bytes: 1 } }), 1);
    const unnamed = (answer: Answer, name: string) => JSON.parse(JSON.stringify(answer).replaceAll(name, '<tool>'));
    expect(unnamed(excluded, 'up__big')).toEqual(unnamed(unknown, 'up__nope'));
    expect(errorOf(excluded)).toEqual({ code: -32602, message: 'Tool up__big not found' });
  });

  it('a blocked tool: the tool.blocked error result', async () => {
    const answer = await differential(call({ name: 'up__blocks', args: { n: 1 } }), 1);
    expect(resultOf(answer)).toMatchObject({
      isError: true,
      structuredContent: { status: 'error', error: { code: 'tool.blocked' } },
    });
  });

  it('a gated tool: the pending_approval result', async () => {
    const answer = await differential(
      call({ name: 'up__read_file', args: { path: 'notes.txt' } }),
      1,
      withoutApprovalIds,
    );
    expect(resultOf(answer)).toMatchObject({
      structuredContent: { status: 'pending_approval', approval_id: expect.stringMatching(/^apr_/) },
    });
  });

  it('invalid arguments: the schema error result', async () => {
    const answer = await differential(call({ name: 'up__add', args: { a: 'x' } }), 1);
    expect(resultOf(answer)).toMatchObject({
      isError: true,
      structuredContent: { status: 'error', error: { code: 'tool.invalid_arguments' } },
    });
  });

  it('a string request id', async () => {
    const answer = await differential(call({ name: 'up__echo', args: { text: 's' }, id: 'req-7' }), 1);
    expect(answer.body).toMatchObject({ id: 'req-7', result: { content: [{ type: 'text', text: 's' }] } });
  });

  it('no arguments at all', async () => {
    const answer = await differential(call({ name: 'up__fail', args: 'absent' }), 1);
    expect(resultOf(answer)).toMatchObject({ isError: true, content: [{ type: 'text', text: 'failed on purpose' }] });
    // A tool that needs arguments gets its schema error, the same both ways.
    const missing = await differential(call({ name: 'up__echo', args: 'absent' }), 1);
    expect(resultOf(missing)).toMatchObject({ structuredContent: { error: { code: 'tool.invalid_arguments' } } });
  });

  it('an envelope without clientInfo', async () => {
    const { [CLIENT_INFO_KEY]: _omitted, ...meta } = ENVELOPE;
    const answer = await differential(call({ name: 'up__echo', args: { text: 'anon' }, meta }), 1);
    expect(resultOf(answer)).toMatchObject({ content: [{ type: 'text', text: 'anon' }] });
  });

  it('one server unprefixed at /mcp/s/{server}', async () => {
    const answer = await differential(call({ name: 'echo', args: { text: 'single' }, path: '/mcp/s/up' }), 1);
    expect(resultOf(answer)).toMatchObject({ content: [{ type: 'text', text: 'single' }] });
    const unknown = await differential(call({ name: 'up__echo', args: { text: 'x' }, path: '/mcp/s/up' }), 1);
    expect(errorOf(unknown)).toEqual({ code: -32602, message: 'Tool up__echo not found' });
  });

  const toolNames = (answer: Answer) => (resultOf(answer).tools as { name: string }[]).map((t) => t.name);

  it('tools/list of the aggregate: the listed tools and the hub’s own, typed and stamped as the SDK does', async () => {
    const answer = await differential(list(), 1);
    expect(resultOf(answer)).toMatchObject({
      resultType: 'complete',
      ttlMs: 0,
      cacheScope: 'private',
      _meta: { 'io.modelcontextprotocol/serverInfo': SERVER_INFO },
    });
    const names = toolNames(answer);
    expect(names).toEqual(
      expect.arrayContaining(['up__echo', 'up__read_file', 'gone__echo', 'gatehouse__approval_status']),
    );
    // Excluded and blocked tools are not listed.
    expect(names).not.toContain('up__big');
    expect(names).not.toContain('up__blocks');
    // Asked again, the answer comes from the encoded list, still the same as the SDK's.
    await differential(list({ id: 'again' }), 1);
  });

  it('tools/list travels as ASCII: other characters as \\u escapes, the same text once parsed', async () => {
    const wire = list();
    const response = await fetch(`${fast.base}${wire.path}`, {
      dispatcher: client,
      method: 'POST',
      headers: { ...wire.headers, authorization: `Bearer ${fast.token}` },
      body: wire.body,
    });
    const text = await response.text();
    expect(text).not.toMatch(/[\u0080-\uffff]/);
    const tools = (JSON.parse(text) as { result: { tools: { name: string; description: string }[] } }).result.tools;
    // The hub's own tool says "operator’s" (U+2019).
    expect(tools.find((t) => t.name === 'gatehouse__approval_status')?.description).toContain('operator\u2019s');
  });

  it('tools/list of one server unprefixed at /mcp/s/{server}', async () => {
    const answer = await differential(list({ path: '/mcp/s/up' }), 1);
    expect(toolNames(answer)).toEqual(expect.arrayContaining(['echo', 'read_file', 'gatehouse__approval_status']));
    expect(toolNames(answer)).not.toContain('up__echo');
  });

  it('tools/list follows a policy change at once', async () => {
    const policy = (allow: string[]) => ({
      mode: 'exclude',
      exclude: ['big'],
      allow,
      gated: ['read_file'],
      blocked: ['blocks'],
      defaultTier: 'blocked',
    });
    const patch = (allow: string[]) =>
      Promise.all(
        [fast, sdk].map(async (side) => {
          const response = await side.gw.request('PATCH', '/api/mcp/servers/up/tools', { body: policy(allow) });
          expect(response.statusCode).toBe(200);
        }),
      );
    expect(toolNames(await differential(list(), 1))).toContain('up__echo');
    await patch(['add', 'fail', 'structured', 'hang']);
    try {
      expect(toolNames(await differential(list(), 1))).not.toContain('up__echo');
    } finally {
      await patch(['echo', 'add', 'fail', 'structured', 'hang']);
    }
    expect(toolNames(await differential(list(), 1))).toContain('up__echo');
  });

  // ---- Requests the fast path must leave to the SDK (which answers them the same on both gateways) ------

  it('tools/list with a cursor, an Mcp-Name header or a key it does not know', async () => {
    await differential(list({ params: { cursor: 'abc' } }), 0);
    await differential(list({ headers: { 'mcp-name': 'x' } }), 0);
    await differential(list({ params: { filter: 'x' } }), 0);
  });

  it('an Mcp-Name header that disagrees with the body', async () => {
    const answer = await differential(
      call({ name: 'up__echo', args: { text: 'x' }, headers: { 'mcp-name': 'up__add' } }),
      0,
    );
    expect(answer.status).toBeGreaterThanOrEqual(400);
  });

  it('no Mcp-Method header', async () => {
    await differential(call({ name: 'up__echo', args: { text: 'x' }, headers: { 'mcp-method': undefined } }), 0);
  });

  it('no MCP-Protocol-Version header', async () => {
    await differential(
      call({ name: 'up__echo', args: { text: 'x' }, headers: { 'mcp-protocol-version': undefined } }),
      0,
    );
  });

  it('an envelope whose clientCapabilities is not an object', async () => {
    await differential(
      call({ name: 'up__echo', args: { text: 'x' }, meta: { ...ENVELOPE, [CLIENT_CAPABILITIES_KEY]: 'all' } }),
      0,
    );
  });

  it('an envelope without clientCapabilities', async () => {
    const { [CLIENT_CAPABILITIES_KEY]: _omitted, ...meta } = ENVELOPE;
    await differential(call({ name: 'up__echo', args: { text: 'x' }, meta }), 0);
  });

  it('a progress token', async () => {
    const answer = await differential(
      call({ name: 'up__echo', args: { text: 'p' }, meta: { ...ENVELOPE, progressToken: 'tok-1' } }),
      0,
    );
    expect(answer.status).toBe(200);
  });

  it('an unknown key in params', async () => {
    await differential(call({ name: 'up__echo', args: { text: 'x' }, params: { task: { ttl: 1000 } } }), 0);
  });

  it('the hub’s own gatehouse__approval_status tool', async () => {
    const answer = await differential(
      call({ name: 'gatehouse__approval_status', args: { approval_id: 'apr_doesnotexist' } }),
      0,
    );
    expect(resultOf(answer)).toMatchObject({ structuredContent: { error: { code: 'approval.not_found' } } });
  });

  it('arguments that are an array', async () => {
    const answer = await differential(call({ name: 'up__echo', args: ['x'] }), 0);
    expect(errorOf(answer)).toMatchObject({ code: -32602 });
  });

  it('an extra top-level key in the body', async () => {
    await differential(call({ name: 'up__echo', args: { text: 'x' }, extra: { trace: 'abc' } }), 0);
  });

  it('a body that is not sent as JSON', async () => {
    await differential(call({ name: 'up__echo', args: { text: 'x' }, headers: { 'content-type': 'text/plain' } }), 0);
  });

  const outsideTheShape: [string, Wire][] = [
    ['an Mcp-Session-Id header', call({ name: 'up__echo', args: { text: 'x' }, headers: { 'mcp-session-id': 's-1' } })],
    ['a fractional request id', call({ name: 'up__echo', args: { text: 'x' }, id: 1.5 })],
    [
      'an envelope naming another revision',
      call({ name: 'up__echo', args: { text: 'x' }, meta: { ...ENVELOPE, [PROTOCOL_VERSION_KEY]: '2025-11-25' } }),
    ],
    [
      'a malformed clientInfo',
      call({ name: 'up__echo', args: { text: 'x' }, meta: { ...ENVELOPE, [CLIENT_INFO_KEY]: { name: 1 } } }),
    ],
    [
      'another method named in Mcp-Method',
      call({ name: 'up__echo', args: {}, headers: { 'mcp-method': 'tools/list' } }),
    ],
    [
      'gatehouse__approval_status at /mcp/s/{server}',
      call({ name: 'gatehouse__approval_status', args: { approval_id: 'apr_x' }, path: '/mcp/s/up' }),
    ],
  ];
  for (const [what, wire] of outsideTheShape) {
    it(what, async () => {
      await differential(wire, 0);
    });
  }

  // ---- 2025-era sessions ----------------------------------------------------------------------------------

  const LEGACY_VERSION = '2025-11-25';
  const legacyHeaders = (sessionId: string) => ({
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-protocol-version': LEGACY_VERSION,
    'mcp-session-id': sessionId,
  });

  /** Opens a 2025 session as the SDK's client does (initialize, then initialized); answers its id. */
  async function openSession(side: Side, capabilities: Json = {}): Promise<string> {
    const response = await fetch(`${side.base}/mcp`, {
      dispatcher: client,
      method: 'POST',
      headers: {
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        authorization: `Bearer ${side.token}`,
      },
      body: JSON.stringify({
        method: 'initialize',
        params: { protocolVersion: LEGACY_VERSION, capabilities, clientInfo: { name: 'agent', version: '1.0.0' } },
        jsonrpc: '2.0',
        id: 0,
      }),
    });
    await response.text();
    const sessionId = response.headers.get('mcp-session-id');
    if (!sessionId) throw new Error(`initialize answered no session (HTTP ${response.status})`);
    const initialized = await send(client, side, {
      path: '/mcp',
      headers: legacyHeaders(sessionId),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    expect(initialized.status).toBe(202);
    return sessionId;
  }

  /** A tools/call inside `sessionId` as the SDK's 2025 client writes it. */
  function legacyCall(sessionId: string, shape: Omit<CallShape, 'meta'> & { meta?: Json } = { name: '' }): Wire {
    const params: Json = { name: shape.name };
    if (shape.args !== 'absent') params.arguments = shape.args ?? {};
    if (shape.meta) params._meta = shape.meta;
    Object.assign(params, shape.params);
    const headers: Record<string, string | undefined> = { ...legacyHeaders(sessionId), ...shape.headers };
    const body = { method: 'tools/call', params, jsonrpc: '2.0', id: shape.id ?? 1, ...shape.extra };
    return { path: shape.path ?? '/mcp', headers: present(headers), body: JSON.stringify(body) };
  }

  /** Like `differential`, but each gateway gets the request in a session of its own. */
  async function legacyDifferential(
    sessions: { fast: string; sdk: string },
    shape: Parameters<typeof legacyCall>[1],
    taken: 0 | 1,
    normalise: (body: unknown) => unknown = (b) => b,
  ): Promise<Answer> {
    const before = await Promise.all([fastCalls(fast), fastCalls(sdk)]);
    const viaFast = await send(client, fast, legacyCall(sessions.fast, shape));
    const viaSdk = await send(client, sdk, legacyCall(sessions.sdk, shape));
    const after = await Promise.all([fastCalls(fast), fastCalls(sdk)]);
    expect(after[0] - before[0], 'fast-path requests on the fast gateway').toBe(taken);
    expect(after[1] - before[1], 'fast-path requests on the SDK-only gateway').toBe(0);
    expect(viaFast.status).toBe(viaSdk.status);
    if (taken === 0) {
      expect(viaFast.mediaType).toBe(viaSdk.mediaType);
      expect(normalise(viaFast.body)).toEqual(normalise(viaSdk.body));
    } else {
      // The SDK's session transport answers with a one-event stream; the fast path, answering before the first
      // keep-alive, sends that event's message as the JSON body (both are the spec's answers to a POST).
      expect(viaSdk.mediaType).toBe('text/event-stream');
      expect(viaFast.mediaType).toBe('application/json');
      expect(normalise([viaFast.body])).toEqual(normalise(viaSdk.body));
    }
    return viaSdk;
  }

  const sseMessage = (answer: Answer) => (answer.body as Json[])[0] as Json;

  it('2025 sessions: plain calls answer as JSON the message the SDK session transport sends as one event', async () => {
    const sessions = { fast: await openSession(fast), sdk: await openSession(sdk) };
    const ok = await legacyDifferential(sessions, { name: 'up__echo', args: { text: 'old' } }, 1);
    expect(ok.body).toEqual([
      { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'old' }], isError: false } },
    ]);
    await legacyDifferential(sessions, { name: 'up__add', args: { a: 1, b: 2 }, id: 'two' }, 1);
    await legacyDifferential(sessions, { name: 'up__fail', args: 'absent' }, 1);
    await legacyDifferential(sessions, { name: 'up__structured', args: {} }, 1);
    const unknown = await legacyDifferential(sessions, { name: 'up__nope', args: {} }, 1);
    expect(sseMessage(unknown).error).toEqual({ code: -32602, message: 'Tool up__nope not found' });
    await legacyDifferential(sessions, { name: 'up__big', args: { bytes: 1 } }, 1);
    await legacyDifferential(sessions, { name: 'up__blocks', args: { n: 1 } }, 1);
    await legacyDifferential(sessions, { name: 'up__add', args: { a: 'x' } }, 1);
    await legacyDifferential(sessions, { name: 'up__read_file', args: { path: 'a.txt' } }, 1, withoutApprovalIds);
  });

  it('2025 sessions: what the fast path leaves to the SDK session transport', async () => {
    const sessions = { fast: await openSession(fast), sdk: await openSession(sdk) };
    const echo = { name: 'up__echo', args: { text: 'x' } };
    await legacyDifferential(sessions, { ...echo, headers: { 'mcp-protocol-version': undefined } }, 0);
    await legacyDifferential(sessions, { ...echo, headers: { 'mcp-protocol-version': '2025-06-18' } }, 0);
    await legacyDifferential(sessions, { ...echo, headers: { accept: 'application/json' } }, 0);
    await legacyDifferential(sessions, { ...echo, meta: { progressToken: 'p1' } }, 0);
    await legacyDifferential(sessions, { ...echo, params: { task: {} } }, 0);
    await legacyDifferential(sessions, { ...echo, headers: { 'mcp-name': 'up__add' } }, 0);
    await legacyDifferential(sessions, { name: 'gatehouse__approval_status', args: { approval_id: 'apr_x' } }, 0);
    // A client that can answer input requests keeps the SDK's legacy shim for them.
    const asking = {
      fast: await openSession(fast, { elicitation: {} }),
      sdk: await openSession(sdk, { elicitation: {} }),
    };
    await legacyDifferential(asking, echo, 0);
  });

  it('2025 sessions: a fast call still running at the first keep-alive answers as a kept-alive event stream', async () => {
    // Its own gateway, whose keep-alive interval (the SDK's 15 s) is shorter than the call.
    const gw = await startTestGateway(target, { GATEHOUSE_CALL_TIMEOUT_MS: '120000' }, { sseKeepAliveMs: 100 });
    try {
      expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
        201,
      );
      const allowed = await gw.request('PATCH', '/api/mcp/servers/up/tools', { body: { allow: ['slow', 'echo'] } });
      expect(allowed.statusCode).toBe(200);
      expect((await gw.request('POST', '/api/mcp/servers/up/test')).json().ok).toBe(true);
      const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'patient' } })).json();
      const side = { gw, base: await gw.listen(), token: agent.token };
      const sessionId = await openSession(side);
      const before = await fastCalls(side);
      const wire = legacyCall(sessionId, { name: 'up__slow', args: {}, id: 9 });
      const response = await fetch(`${side.base}${wire.path}`, {
        dispatcher: client,
        method: 'POST',
        headers: { ...wire.headers, authorization: `Bearer ${side.token}` },
        body: wire.body,
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      expect(response.headers.get('mcp-session-id')).toBe(sessionId);
      const text = await response.text();
      expect(text).toContain(': keepalive\n\n');
      expect(parseBody(text, 'text/event-stream')).toEqual([
        { jsonrpc: '2.0', id: 9, result: { content: [{ type: 'text', text: 'slow' }], isError: false } },
      ]);
      expect(await fastCalls(side)).toBe(before + 1);
      // A quick call in the same session still answers as JSON.
      const quickWire = legacyCall(sessionId, { name: 'up__echo', args: { text: 'q' }, id: 10 });
      const quickResponse = await fetch(`${side.base}${quickWire.path}`, {
        dispatcher: client,
        method: 'POST',
        headers: { ...quickWire.headers, authorization: `Bearer ${side.token}` },
        body: quickWire.body,
      });
      const quickText = await quickResponse.text();
      expect(quickResponse.headers.get('content-length')).toBe(String(Buffer.byteLength(quickText)));
      expect(quickResponse.headers.get('mcp-session-id')).toBe(sessionId);
      const quick = { mediaType: quickResponse.headers.get('content-type'), body: JSON.parse(quickText) };
      expect(quick.mediaType).toBe('application/json');
      expect(quick.body).toEqual({
        jsonrpc: '2.0',
        id: 10,
        result: { content: [{ type: 'text', text: 'q' }], isError: false },
      });
    } finally {
      await gw.close();
    }
  });

  it('2025 sessions: a session id is only good for the token that opened it', async () => {
    const sessionId = await openSession(fast);
    const stranger = (
      await fast.gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'stranger' } })
    ).json();
    const before = await fastCalls(fast);
    const answer = await send(
      client,
      { ...fast, token: stranger.token },
      legacyCall(sessionId, { name: 'up__echo', args: { text: 'x' } }),
    );
    expect(answer.status).toBe(404);
    expect(await fastCalls(fast)).toBe(before);
  });

  it('2025 sessions: notifications/cancelled stops a fast call upstream', async () => {
    const sessionId = await openSession(fast);
    const started = hang.started;
    const aborted = hang.aborted;
    const before = await fastCalls(fast);
    const pending = send(client, fast, legacyCall(sessionId, { name: 'up__hang', args: {}, id: 77 }));
    await until('the upstream tool to start', () => hang.started > started);
    expect(await fastCalls(fast)).toBe(before + 1);
    const cancel = await send(client, fast, {
      path: '/mcp',
      headers: legacyHeaders(sessionId),
      body: JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 77, reason: 'no' },
      }),
    });
    expect(cancel.status).toBe(202);
    await until('the upstream to see the cancellation', () => hang.aborted > aborted);
    // Like the SDK, no answer for a cancelled request: its stream ends empty.
    expect((await pending).body).toEqual([]);
  });

  // ---- Cancellation -------------------------------------------------------------------------------------

  for (const path of ['fast', 'sdk'] as const) {
    it(`cancels the upstream call when the agent disconnects mid-call (${path} path)`, async () => {
      const side = path === 'fast' ? fast : sdk;
      const before = await Promise.all([fastCalls(fast), fastCalls(sdk)]);
      const started = hang.started;
      const aborted = hang.aborted;
      const controller = new AbortController();
      const pending = send(client, side, call({ name: 'up__hang', args: {} }), controller.signal).then(
        (answer) => new Error(`the call answered although the agent had gone: ${JSON.stringify(answer)}`),
        (error: unknown) => error,
      );
      await until('the upstream tool to start', () => hang.started > started);
      const after = await Promise.all([fastCalls(fast), fastCalls(sdk)]);
      expect(after[0] - before[0]).toBe(path === 'fast' ? 1 : 0);
      expect(after[1] - before[1]).toBe(0);
      expect(hang.aborted).toBe(aborted);
      controller.abort();
      expect(await pending).toMatchObject({ name: 'AbortError' });
      // The gateways' call timeout is 120 s, so within this bound only the disconnect can have cancelled it.
      await until('the upstream to see the cancellation', () => hang.aborted > aborted);
    });
  }
});
