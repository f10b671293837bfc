/**
 * Direct calls (`src/upstream/direct-call.ts`) against the SDK client path: the same calls through two
 * pools, one with `exchange` and one without, must reach the upstream the same way (headers, envelope
 * or session, body) and come back the same (results, input requests, typed errors), on 2026-07-28
 * upstreams and on 2025-era sessions (SSE and JSON answers). Then the misbehaviour the SDK fixtures do
 * not produce, from raw upstreams of both eras.
 */
import type http from 'node:http';
import type { McpServer } from '@modelcontextprotocol/server';
import { acceptedContent, inputRequired } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createEgressGuard } from '../../src/egress/index.js';
import { GatehouseError } from '../../src/errors.js';
import { notRelayed } from '../../src/upstream/asks.js';
import type { UpstreamPool, UpstreamTarget } from '../../src/upstream/index.js';
import { listen, type RequestRecord, readBody, sendJson } from '../fixtures/http.js';
import { type LegacyFixture, type McpFixture, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { Cleanup, eventually, makePool } from './helpers.js';

const cleanup = new Cleanup();

/** The outcome of a call as data: its result, or its typed error (code, message, details). */
async function outcome(work: Promise<unknown>): Promise<unknown> {
  try {
    return { result: await work };
  } catch (error) {
    if (!(error instanceof GatehouseError)) throw error;
    return { error: { code: error.code, message: error.message, details: error.details } };
  }
}

const register = (server: McpServer) => {
  server.registerTool(
    'envelope',
    { description: 'Returns the per-request envelope it received.', inputSchema: z.object({}) },
    async (_args, ctx) => ({
      content: [{ type: 'text', text: 'seen' }],
      structuredContent: { envelope: (ctx.mcpReq.envelope ?? null) as Record<string, unknown> | null },
    }),
  );
  server.registerTool(
    'chatty',
    { description: 'Logs before answering (the answer becomes an SSE stream).', inputSchema: z.object({}) },
    async (_args, ctx) => {
      await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data: 'working' } });
      return { content: [{ type: 'text', text: 'done' }] };
    },
  );
  const confirmation = z.object({ yes: z.boolean() });
  server.registerTool(
    'confirm',
    { description: 'Asks the user first.', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const answer = acceptedContent(ctx.mcpReq.inputResponses, 'ok', confirmation);
      if (!answer) {
        return inputRequired({
          inputRequests: { ok: inputRequired.elicit({ message: 'Proceed?', requestedSchema: confirmation }) },
          requestState: 'asked',
        });
      }
      return { content: [{ type: 'text', text: `yes=${answer.yes} state=${String(ctx.mcpReq.requestState())}` }] };
    },
  );
};

/** One call through both pools: the direct pool must count it as direct, the SDK pool never. */
async function through(
  pools: { direct: UpstreamPool; sdk: UpstreamPool },
  send: (pool: UpstreamPool) => Promise<unknown>,
) {
  const before = pools.direct.stats().directCalls;
  const viaDirect = await outcome(send(pools.direct));
  expect(pools.direct.stats().directCalls).toBe(before + 1);
  const viaSdk = await outcome(send(pools.sdk));
  expect(pools.sdk.stats().directCalls).toBe(0);
  return { viaDirect, viaSdk };
}

/** An interactive call (the hub's) through both pools. */
const both = (
  pools: { direct: UpstreamPool; sdk: UpstreamPool },
  target: UpstreamTarget,
  name: string,
  args: Record<string, unknown> | undefined,
  opts = {},
) => through(pools, (pool) => pool.callToolInteractive(target, name, args, opts));

/** A plain call (`callTool`, the conduit's) through both pools. */
const bothPlain = (
  pools: { direct: UpstreamPool; sdk: UpstreamPool },
  target: UpstreamTarget,
  name: string,
  args: Record<string, unknown> | undefined,
) => through(pools, (pool) => pool.callTool(target, name, args));

/** A recorded request's headers in arrival order, without the ones a connection sets for itself. */
const standard = (record: RequestRecord) =>
  Object.entries(record.headers).filter(([name]) => name !== 'content-length' && name !== 'connection');

/** The calls both eras answer the same way through both paths (`chatty` notifies before it answers: an SSE answer). */
const RESULT_CASES: [string, string, Record<string, unknown> | undefined][] = [
  ['a plain result', 'echo', { text: 'hi' }],
  ['structured content and an outputSchema', 'add', { a: 2, b: 3 }],
  ['a tool error (isError)', 'fail', {}],
  ['a result _meta', 'structured', {}],
  ['an answer with a notification first', 'chatty', {}],
  ['arguments left out', 'envelope', undefined],
  ['an unknown tool (JSON-RPC error)', 'nope', {}],
  ['arguments the upstream rejects', 'add', { a: 'x' }],
  // More than the exchange keeps unread before it holds the upstream back (64 KiB): read whole all the same.
  ['an answer of 150 KB', 'echo', { text: 'x'.repeat(150_000) }],
];

type Differential = (
  name: string,
  args: Record<string, unknown> | undefined,
) => Promise<{ viaDirect: unknown; viaSdk: unknown }>;

/** Every result case through both pools, as an interactive call and as a plain one: the same outcomes. */
function answersEveryResultCase(interactive: Differential, plain: Differential) {
  it.each(RESULT_CASES)('answers %s as the SDK does', async (_label, name, args) => {
    const { viaDirect, viaSdk } = await interactive(name, args);
    expect(viaDirect).toEqual(viaSdk);
  });

  it.each(RESULT_CASES)('answers %s to a plain call (callTool) as the SDK does', async (_label, name, args) => {
    const { viaDirect, viaSdk } = await plain(name, args);
    expect(viaDirect).toEqual(viaSdk);
  });
}

describe('direct calls against the SDK client path', () => {
  let fixture: McpFixture;
  let direct: UpstreamPool;
  let sdk: UpstreamPool;
  const target = () => ({ url: fixture.url, headers: { 'x-upstream-key': 'k1' } });

  beforeAll(async () => {
    fixture = cleanup.add(await startModernServer({ register }));
    // Both paths through one real egress guard, as in the gateway.
    const guard = cleanup.add(createEgressGuard({ policy: 'private' }));
    direct = cleanup.add(makePool({ fetch: guard.fetch, exchange: guard.exchange }));
    sdk = cleanup.add(makePool({ fetch: guard.fetch }));
  });
  afterAll(() => cleanup.run());

  const call = (name: string, args: Record<string, unknown> | undefined, opts = {}) =>
    both({ direct, sdk }, target(), name, args, opts);

  answersEveryResultCase(call, (name, args) => bothPlain({ direct, sdk }, target(), name, args));

  it('answers a plain call to a tool that would ask for input (none declared) as the SDK does', async () => {
    const { viaDirect, viaSdk } = await bothPlain({ direct, sdk }, target(), 'confirm', {});
    expect(viaDirect).toEqual(viaSdk);
  });

  it('sends the envelope and headers the SDK client sends', async () => {
    fixture.log.clear();
    const capabilities = { elicitation: { form: {} } };
    const { viaDirect, viaSdk } = await call('envelope', {}, { inputCapabilities: capabilities });
    expect(viaDirect).toEqual(viaSdk);
    expect(
      (viaDirect as { result: { structuredContent: { envelope: unknown } } }).result.structuredContent.envelope,
    ).toEqual(expect.objectContaining({ 'io.modelcontextprotocol/clientCapabilities': capabilities }));
    const calls = fixture.log.withMethod('tools/call');
    expect(calls).toHaveLength(2);
    expect(standard(calls[0]!)).toEqual(standard(calls[1]!));
    expect(calls[0]!.headers).toMatchObject({
      'x-upstream-key': 'k1',
      'mcp-method': 'tools/call',
      'mcp-name': 'envelope',
      'mcp-protocol-version': '2026-07-28',
    });
  });

  it('relays an input request and the answer round as the SDK does', async () => {
    const inputCapabilities = { elicitation: { form: {} } };
    const first = await call('confirm', {}, { inputCapabilities });
    expect(first.viaDirect).toEqual(first.viaSdk);
    const asked = (first.viaDirect as { result: { inputRequired: { inputRequests: object; requestState: string } } })
      .result.inputRequired;
    expect(Object.keys(asked.inputRequests)).toEqual(['ok']);
    expect(asked.requestState).toBe('asked');
    const continuation = {
      inputResponses: { ok: { action: 'accept', content: { yes: true } } },
      requestState: asked.requestState,
    };
    const second = await call('confirm', {}, { continuation, inputCapabilities });
    expect(second.viaDirect).toEqual(second.viaSdk);
    expect(second.viaDirect).toMatchObject({ result: { content: [{ type: 'text', text: 'yes=true state=asked' }] } });
  });

  it('leaves calls that report progress to the SDK path', async () => {
    const before = direct.stats().directCalls;
    const steps: unknown[] = [];
    await direct.callToolInteractive(target(), 'progress', { steps: 2 }, { onProgress: (p) => steps.push(p) });
    expect(direct.stats().directCalls).toBe(before);
    expect(steps).toHaveLength(2);
  });
});

/** The client requests a 2025-era server may send mid-call, with params the SDK server accepts. */
const ASKED = {
  ping: {},
  'roots/list': {},
  'elicitation/create': { message: 'Proceed?', requestedSchema: { type: 'object', properties: {} } },
  'sampling/createMessage': { messages: [], maxTokens: 1 },
} as const;
type Asked = keyof typeof ASKED;

/** `asks {method}`: sends the client a request before answering, and reports the client's answer. */
const registerAsks = (server: McpServer) => {
  server.registerTool(
    'asks',
    {
      description: 'Asks the client something, then answers.',
      inputSchema: z.object({ method: z.enum(Object.keys(ASKED) as [Asked, ...Asked[]]) }),
    },
    async ({ method }, ctx) => {
      try {
        const answer = await ctx.mcpReq.send({ method, params: ASKED[method] });
        return { content: [{ type: 'text', text: `answered ${JSON.stringify(answer)}` }] };
      } catch (error) {
        const { code, message } = error as { code?: unknown; message: string };
        return { content: [{ type: 'text', text: `refused ${String(code)} ${message}` }], isError: true };
      }
    },
  );
};

const NOT_RELAYED = (method: string) => notRelayed(method).message;

/** A body with its JSON-RPC id (or cancelled request id) masked, the rest byte for byte. */
const withoutId = (body: string | undefined) => body?.replace(/"(id|requestId)":\d+/, '"$1":0');

const sessionOf = (record: RequestRecord | undefined) => record?.headers['mcp-session-id'];

describe.each([
  { answers: 'SSE', jsonResponse: false },
  { answers: 'JSON', jsonResponse: true },
])('direct calls on a 2025-era session ($answers answers) against the SDK client path', ({ jsonResponse }) => {
  const local = new Cleanup();
  let fixture: LegacyFixture;
  let direct: UpstreamPool;
  let sdk: UpstreamPool;
  const target = () => ({ url: fixture.url, headers: { 'x-upstream-key': 'k1' } });

  beforeAll(async () => {
    fixture = local.add(
      await startLegacyServer({
        jsonResponse,
        register: (server) => {
          register(server);
          registerAsks(server);
        },
      }),
    );
    const guard = local.add(createEgressGuard({ policy: 'private' }));
    direct = local.add(makePool({ fetch: guard.fetch, exchange: guard.exchange }));
    sdk = local.add(makePool({ fetch: guard.fetch }));
  });
  afterAll(() => local.run());
  beforeEach(() => fixture.log.clear());

  const call = (name: string, args: Record<string, unknown> | undefined, opts = {}) =>
    both({ direct, sdk }, target(), name, args, opts);

  answersEveryResultCase(call, (name, args) => bothPlain({ direct, sdk }, target(), name, args));

  it('sends the headers (in their order) and the body the SDK client sends', async () => {
    await call('echo', { text: 'hi' });
    await call('fail', undefined);
    const calls = fixture.log.withMethod('tools/call');
    expect(calls).toHaveLength(4);
    for (const [viaDirect, viaSdk] of [[calls[0]!, calls[1]!] as const, [calls[2]!, calls[3]!] as const]) {
      // Each pool has its own session; everything else is the same, byte for byte.
      const masked = (record: RequestRecord) =>
        standard(record).map(([name, value]) => [name, name === 'mcp-session-id' ? 'session' : value]);
      expect(masked(viaDirect)).toEqual(masked(viaSdk));
      expect(withoutId(viaDirect.body)).toBe(withoutId(viaSdk.body));
      expect(sessionOf(viaDirect)).toMatch(/^[0-9a-f-]{36}$/);
      expect(sessionOf(viaDirect)).not.toBe(sessionOf(viaSdk));
    }
    expect(calls[0]!.headers).toMatchObject({
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-protocol-version': '2025-11-25',
      'x-upstream-key': 'k1',
    });
    expect(calls[0]!.headers).not.toHaveProperty('mcp-method');
    expect(calls[0]!.headers).not.toHaveProperty('mcp-name');
    expect(JSON.parse(calls[0]!.body!)).toEqual({
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'hi' } },
      jsonrpc: '2.0',
      id: expect.any(Number),
    });
    expect(JSON.parse(calls[2]!.body!)).toMatchObject({ params: { name: 'fail' } });
  });

  it('leaves calls with a continuation or progress to the SDK path', async () => {
    const before = direct.stats().directCalls;
    const echo = (opts: object) => direct.callToolInteractive(target(), 'echo', { text: 'x' }, opts);
    await echo({ continuation: { requestState: 'asked' } });
    await echo({ onProgress: () => {} });
    expect(direct.stats().directCalls).toBe(before);
    // Input capabilities go direct: that era's asks are relayed on the direct path too (`asks.ts`).
    await echo({ inputCapabilities: { elicitation: { form: {} } } });
    await echo({});
    expect(direct.stats().directCalls).toBe(before + 2);
  });

  it('reconnects and retries once when the upstream forgot the session (404), as the SDK path does', async () => {
    // A fixture and pools of its own: forgetting the sessions must not touch the other tests' pools.
    const own = new Cleanup();
    try {
      const forgetful = own.add(await startLegacyServer({ jsonResponse }));
      const guard = own.add(createEgressGuard({ policy: 'private' }));
      const forgetAndCall = async (pool: UpstreamPool) => {
        const upstream = { url: forgetful.url };
        await pool.callToolInteractive(upstream, 'echo', { text: 'before' });
        forgetful.log.clear();
        const opened = forgetful.sessionsOpened;
        await forgetful.forgetSessions();
        const after = await outcome(pool.callToolInteractive(upstream, 'echo', { text: 'after' }));
        const calls = forgetful.log.withMethod('tools/call');
        return {
          after,
          statuses: calls.map((record) => record.status),
          newSession: sessionOf(calls[0]) !== sessionOf(calls[1]),
          sessionsOpened: forgetful.sessionsOpened - opened,
        };
      };
      const ownDirect = own.add(makePool({ fetch: guard.fetch, exchange: guard.exchange }));
      const viaDirect = await forgetAndCall(ownDirect);
      // The call before, then both attempts of the call after.
      expect(ownDirect.stats().directCalls).toBe(3);
      expect(viaDirect).toEqual({
        after: { result: { isError: false, content: [{ type: 'text', text: 'after' }] } },
        statuses: [404, undefined],
        newSession: true,
        sessionsOpened: 1,
      });
      expect(await forgetAndCall(own.add(makePool({ fetch: guard.fetch })))).toEqual(viaDirect);
    } finally {
      await own.run();
    }
  });

  it('tells the upstream when the caller gives up (notifications/cancelled), as the SDK path does', async () => {
    const giveUp = async (pool: UpstreamPool) => {
      fixture.log.clear();
      const started = fixture.stats.calls.slow ?? 0;
      const cancelled = fixture.stats.cancelled;
      const caller = new AbortController();
      const call = outcome(pool.callToolInteractive(target(), 'slow', { ms: 20_000 }, { signal: caller.signal }));
      await eventually(() => fixture.stats.calls.slow === started + 1);
      caller.abort();
      const result = await call;
      // The tool stops because it was told to: the fixture counts the cancellation.
      await eventually(() => fixture.stats.cancelled === cancelled + 1);
      const [request] = fixture.log.withMethod('tools/call');
      const [notice] = fixture.log.withMethod('notifications/cancelled');
      expect(sessionOf(notice)).toBe(sessionOf(request));
      expect(JSON.parse(notice!.body!).params.requestId).toBe(JSON.parse(request!.body!).id);
      return { result, body: withoutId(notice!.body), headers: standard(notice!).map(([name]) => name) };
    };
    const before = direct.stats().directCalls;
    const viaDirect = await giveUp(direct);
    expect(direct.stats().directCalls).toBe(before + 1);
    expect(viaDirect.result).toMatchObject({ error: { code: 'upstream_timeout', details: { reason: 'cancelled' } } });
    expect(await giveUp(sdk)).toEqual(viaDirect);
  });

  // On a JSON answer the SDK server has no stream to send its request on (neither path ever sees it).
  it.skipIf(jsonResponse).each(Object.keys(ASKED) as Asked[])(
    'answers a %s request the upstream sends mid-call as the SDK client does',
    async (method) => {
      const { viaDirect, viaSdk } = await call('asks', { method });
      expect(viaDirect).toEqual(viaSdk);
      // Gatehouse declares the asks to 2025-era upstreams; a call that relays none refuses them.
      const answer = method === 'ping' ? 'answered {}' : `refused -32601 ${NOT_RELAYED(method)}`;
      expect(viaDirect).toMatchObject({ result: { content: [{ type: 'text', text: answer }] } });
      // Both answers were POSTed on the caller's session, with the same headers and bodies.
      const [fromDirect, fromSdk] = fixture.log.withMethod('(response)');
      const [callDirect, callSdk] = fixture.log.withMethod('tools/call');
      expect(sessionOf(fromDirect)).toBe(sessionOf(callDirect));
      expect(sessionOf(fromSdk)).toBe(sessionOf(callSdk));
      expect(standard(fromDirect!).map(([name]) => name)).toEqual(standard(fromSdk!).map(([name]) => name));
      expect(withoutId(fromDirect!.body)).toBe(withoutId(fromSdk!.body));
    },
  );
});

describe('direct calls on a 2025-era session whose upstream closes the stream to be polled', () => {
  const local = new Cleanup();
  let fixture: LegacyFixture;
  let direct: UpstreamPool;
  let sdk: UpstreamPool;

  beforeAll(async () => {
    const register = (server: McpServer) =>
      server.registerTool('polled', { description: 'Closes its stream, then answers.' }, async (ctx) => {
        // The client must come back with `Last-Event-ID` for the answer.
        ctx.http?.closeSSE?.();
        await new Promise((resolve) => setTimeout(resolve, 50));
        return { content: [{ type: 'text', text: ctx.http?.closeSSE ? 'polled' : 'not resumable' }] };
      });
    fixture = local.add(await startLegacyServer({ register, resumable: { retryInterval: 10 } }));
    const guard = local.add(createEgressGuard({ policy: 'private' }));
    direct = local.add(makePool({ fetch: guard.fetch, exchange: guard.exchange }));
    sdk = local.add(makePool({ fetch: guard.fetch }));
  });
  afterAll(() => local.run());

  it('resumes the stream with Last-Event-ID, as the SDK does', async () => {
    const { viaDirect, viaSdk } = await both({ direct, sdk }, { url: fixture.url }, 'polled', {});
    expect(viaDirect).toEqual(viaSdk);
    expect(viaDirect).toEqual({ result: { isError: false, content: [{ type: 'text', text: 'polled' }] } });
    const resumed = fixture.log.records.filter((record) => record.headers['last-event-id'] !== undefined);
    expect(resumed).toHaveLength(2);
    const [fromDirect, fromSdk] = resumed as [RequestRecord, RequestRecord];
    const masked = (record: RequestRecord) =>
      standard(record).map(([name, value]) =>
        name === 'mcp-session-id' || name === 'last-event-id' ? [name, typeof value] : [name, value],
      );
    expect(fromDirect.httpMethod).toBe('GET');
    expect(masked(fromDirect)).toEqual(masked(fromSdk));
    expect(fromDirect.headers).toMatchObject({ accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25' });
  });
});

/** What the raw upstream does with a `tools/call`; `server/discover` is always answered properly. */
type Misbehaviour = (res: http.ServerResponse, id: unknown) => void;

const DISCOVER = {
  supportedVersions: ['2026-07-28'],
  capabilities: { tools: {} },
  serverInfo: { name: 'raw', version: '1.0.0' },
  resultType: 'complete',
  ttlMs: 0,
  cacheScope: 'private',
};

describe('direct calls to a misbehaving 2026-07-28 upstream', () => {
  let misbehaviour: Misbehaviour = () => {};
  let url = '';
  const pools = new Cleanup();
  const guard = pools.add(createEgressGuard({ policy: 'private' }));

  beforeAll(async () => {
    const server = await listen((req, res) => {
      void (async () => {
        const body = JSON.parse((await readBody(req)).toString('utf8')) as { id: unknown; method: string };
        if (body.method === 'server/discover')
          return sendJson(res, 200, { jsonrpc: '2.0', id: body.id, result: DISCOVER });
        misbehaviour(res, body.id);
      })().catch(() => res.destroy());
    });
    url = `${server.origin}/mcp`;
    pools.add(server);
  });
  afterAll(() => pools.run());

  const call = async (behave: Misbehaviour) => {
    misbehaviour = behave;
    const pool = makePool({ fetch: guard.fetch, exchange: guard.exchange });
    try {
      const result = await outcome(pool.callToolInteractive({ url }, 'x', {}));
      expect(pool.stats().directCalls).toBe(1);
      return result;
    } finally {
      await pool.close();
    }
  };
  const sse = (res: http.ServerResponse, events: string[], end = true) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const event of events) res.write(event);
    if (end) res.end();
  };

  it('fails a plain call (callTool) answered with an input request, as the SDK client does', async () => {
    const asked = { message: 'Proceed?', requestedSchema: { type: 'object', properties: {} } };
    misbehaviour = (res, id) =>
      sendJson(res, 200, {
        jsonrpc: '2.0',
        id,
        result: {
          resultType: 'input_required',
          inputRequests: { ok: { method: 'elicitation/create', params: asked } },
          requestState: 'asked',
        },
      });
    const direct = makePool({ fetch: guard.fetch, exchange: guard.exchange });
    const sdk = makePool({ fetch: guard.fetch });
    try {
      const { viaDirect, viaSdk } = await bothPlain({ direct, sdk }, { url }, 'x', {});
      expect(viaDirect).toEqual(viaSdk);
      expect(viaDirect).toMatchObject({
        error: { code: 'upstream_protocol_error', details: { reason: 'input_required' } },
      });
    } finally {
      await Promise.all([direct.close(), sdk.close()]);
    }
  });

  it.each<[string, Misbehaviour, string, Record<string, unknown>]>([
    [
      'a result of the wrong shape',
      (res, id) => sendJson(res, 200, { jsonrpc: '2.0', id, result: { content: 'not a list' } }),
      'upstream_protocol_error',
      { reason: 'invalid_result' },
    ],
    [
      'a JSON-RPC error',
      (res, id) => sendJson(res, 200, { jsonrpc: '2.0', id, error: { code: -32603, message: 'boom' } }),
      'upstream_protocol_error',
      { reason: 'rpc_error', rpcCode: -32603 },
    ],
    [
      'HTTP 400 carrying the JSON-RPC error to the call',
      (res, id) => sendJson(res, 400, { jsonrpc: '2.0', id, error: { code: -32602, message: 'bad' } }),
      'upstream_protocol_error',
      { reason: 'rpc_error', rpcCode: -32602 },
    ],
    [
      'HTTP 500',
      (res) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('secret stack trace');
      },
      'upstream_protocol_error',
      { reason: 'http_status', status: 500 },
    ],
    [
      'a redirect',
      (res) => {
        res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' });
        res.end();
      },
      'upstream_protocol_error',
      { reason: 'redirect_refused', status: 302 },
    ],
    [
      'a body that is not JSON',
      (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jsonrpc": nope');
      },
      'upstream_protocol_error',
      { reason: 'invalid_json' },
    ],
    [
      'an HTML page',
      (res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html></html>');
      },
      'upstream_protocol_error',
      { reason: 'unexpected_content_type' },
    ],
    [
      'the answer to another request',
      (res) => sendJson(res, 200, { jsonrpc: '2.0', id: 'someone-else', result: { content: [] } }),
      'upstream_protocol_error',
      { reason: 'invalid_message' },
    ],
    [
      'an SSE stream that ends without the answer',
      (res) =>
        sse(res, [
          ': hello\n\n',
          'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}\n\n',
        ]),
      'upstream_unreachable',
      { reason: 'stream_ended' },
    ],
    [
      'an SSE event that is not JSON',
      (res) => sse(res, ['event: message\ndata: {nope\n\n']),
      'upstream_protocol_error',
      { reason: 'invalid_json' },
    ],
    [
      'an unknown result type',
      (res, id) => sendJson(res, 200, { jsonrpc: '2.0', id, result: { resultType: 'task', content: [] } }),
      'upstream_protocol_error',
      { reason: 'input_required' },
    ],
  ])('maps %s to a typed error without echoing the upstream', async (_label, behave, code, details) => {
    const result = (await call(behave)) as { error?: { code: string; message: string; details: unknown } };
    expect(result.error).toBeDefined();
    expect(result.error!.code).toBe(code);
    expect(result.error!.details).toMatchObject(details);
    expect(result.error!.message).not.toMatch(/boom|bad|secret|nope/);
  });

  it('finds the answer after notifications in an SSE stream', async () => {
    const result = await call((res, id) =>
      sse(res, [
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}\n\n',
        `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'ok' }] } })}\n\n`,
      ]),
    );
    expect(result).toEqual({ result: { isError: false, content: [{ type: 'text', text: 'ok' }] } });
  });

  it('reads an SSE answer that opens with a byte order mark and splits a character across chunks', async () => {
    const text = 'caf\u00e9 \u{1F600}';
    const result = await call((res, id) => {
      const event = Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        // No `event:` line: the mark stands right before the `data` field, which must still be read as such.
        Buffer.from(
          `data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } })}\n\n`,
        ),
      ]);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // One byte at a time, with a pause: the BOM and every multi-byte character arrive in pieces.
      let at = 0;
      const next = () => {
        if (at >= event.length) return void res.end();
        res.write(event.subarray(at, at + 1));
        at += 1;
        setImmediate(next);
      };
      next();
    });
    expect(result).toEqual({ result: { isError: false, content: [{ type: 'text', text }] } });
  });
});

/** What the raw 2025-era upstream does with a `tools/call` on its session. */
type LegacyMisbehaviour = (res: http.ServerResponse, id: unknown) => void;

describe('direct calls to a misbehaving 2025-era upstream, against the SDK client path', () => {
  let misbehaviour: LegacyMisbehaviour = () => {};
  let url = '';
  /** The JSON-RPC responses clients POSTed (answers to the upstream's own requests). */
  const replies: unknown[] = [];
  /** The headers of every `tools/call`, as they arrived. */
  const callHeaders: http.IncomingHttpHeaders[] = [];
  /** Open no session: a stateless 2025 server. */
  let stateless = false;
  /** The id of the last `tools/call`. */
  let lastCallId: unknown;
  /** The headers of every GET resuming a stream (with `Last-Event-ID`). */
  const resumes: http.IncomingHttpHeaders[] = [];
  /** What the upstream does with a GET (a stream resumed with `Last-Event-ID`): 405 unless a test says. */
  let onGet: (res: http.ServerResponse, req: http.IncomingMessage) => void = (res) => res.writeHead(405).end();
  const local = new Cleanup();
  const guard = local.add(createEgressGuard({ policy: 'private' }));

  beforeAll(async () => {
    const server = await listen((req, res) => {
      void (async () => {
        if (req.method === 'GET') {
          if (req.headers['last-event-id'] !== undefined) resumes.push(req.headers);
          return onGet(res, req);
        }
        if (req.method !== 'POST') {
          res.writeHead(req.method === 'DELETE' ? 200 : 405).end();
          return;
        }
        const body = JSON.parse((await readBody(req)).toString('utf8')) as {
          id?: unknown;
          method?: string;
          params?: { protocolVersion?: string };
        };
        if (body.method === 'initialize') {
          if (!stateless) res.setHeader('mcp-session-id', 'raw-session');
          const result = {
            protocolVersion: body.params?.protocolVersion,
            capabilities: { tools: {} },
            serverInfo: { name: 'raw', version: '1.0.0' },
          };
          return sendJson(res, 200, { jsonrpc: '2.0', id: body.id, result });
        }
        // The connect-time modern probe, and any request without the session, are refused the SDK's way.
        if (body.method === 'server/discover' || (!stateless && req.headers['mcp-session-id'] !== 'raw-session')) {
          return sendJson(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'No session' } });
        }
        if (body.method === 'tools/call') {
          callHeaders.push(req.headers);
          lastCallId = body.id;
          return misbehaviour(res, body.id);
        }
        if (body.method === undefined) replies.push(body);
        res.writeHead(202).end();
      })().catch(() => res.destroy());
    });
    url = `${server.origin}/mcp`;
    local.add(server);
  });
  afterAll(() => local.run());

  const run = async (behave: LegacyMisbehaviour, exchange: boolean) => {
    misbehaviour = behave;
    const pool = makePool({ fetch: guard.fetch, ...(exchange && { exchange: guard.exchange }) });
    try {
      const result = await outcome(pool.callToolInteractive({ url }, 'x', {}));
      expect(pool.stats().directCalls).toBe(exchange ? 1 : 0);
      return result;
    } finally {
      await pool.close();
    }
  };
  const sse = (res: http.ServerResponse, messages: unknown[]) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const message of messages) res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    res.end();
  };
  const text = [{ type: 'text', text: 'ok' }];

  it.each<[string, LegacyMisbehaviour, Record<string, unknown>]>([
    [
      'HTTP 400 carrying the JSON-RPC error to the call (an HTTP error in 2025)',
      (res, id) => sendJson(res, 400, { jsonrpc: '2.0', id, error: { code: -32602, message: 'bad' } }),
      { error: { details: { reason: 'rpc_error', rpcCode: -32602, status: 400 } } },
    ],
    [
      'HTTP 500',
      (res) => res.writeHead(500, { 'content-type': 'text/plain' }).end('secret stack trace'),
      { error: { details: { reason: 'http_status', status: 500 } } },
    ],
    [
      'structuredContent that is not an object',
      (res, id) => sendJson(res, 200, { jsonrpc: '2.0', id, result: { content: text, structuredContent: [1] } }),
      { error: { details: { reason: 'invalid_result' } } },
    ],
    [
      'an input request (no such thing in 2025)',
      (res, id) =>
        sendJson(res, 200, { jsonrpc: '2.0', id, result: { resultType: 'input_required', inputRequests: {} } }),
      { error: { details: { reason: 'invalid_result' } } },
    ],
    [
      'a result type the 2025 era ignores',
      (res, id) => sendJson(res, 200, { jsonrpc: '2.0', id, result: { resultType: 'task', content: text } }),
      { result: { isError: false, content: text } },
    ],
    [
      'a result without content',
      (res, id) => sendJson(res, 200, { jsonrpc: '2.0', id, result: { isError: true } }),
      { result: { isError: true, content: [] } },
    ],
    [
      'a JSON batch holding the response',
      (res, id) => sendJson(res, 200, [{ jsonrpc: '2.0', id, result: { content: text } }]),
      { result: { content: text } },
    ],
    [
      'an SSE stream that ends without the answer',
      (res) => sse(res, [{ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } }]),
      { error: { code: 'upstream_unreachable', details: { reason: 'stream_ended' } } },
    ],
  ])('answers %s as the SDK does', async (_label, behave, expected) => {
    const viaDirect = await run(behave, true);
    expect(viaDirect).toEqual(await run(behave, false));
    expect(viaDirect).toMatchObject(expected);
    expect(JSON.stringify(viaDirect)).not.toMatch(/bad|secret/);
  });

  describe('a stream closed before the answer, after an event id', () => {
    const primed: LegacyMisbehaviour = (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('id: e1\nretry: 10\ndata: \n\n');
    };
    /** Resumes with the answer to the last call (the SDK client's standalone GET stream gets none). */
    const answering = (res: http.ServerResponse, req: http.IncomingMessage) => {
      if (req.headers['last-event-id'] === undefined) return void res.writeHead(405).end();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const answer = { jsonrpc: '2.0', id: lastCallId, result: { content: text } };
      res.end(`id: e2\ndata: ${JSON.stringify(answer)}\n\n`);
    };
    afterAll(() => {
      onGet = (res) => res.writeHead(405).end();
    });

    it.each<[string, (res: http.ServerResponse, req: http.IncomingMessage) => void, Record<string, unknown>]>([
      [
        'that will not resume (405)',
        (res) => void res.writeHead(405).end(),
        { error: { details: { reason: 'stream_ended' } } },
      ],
      [
        'that fails to resume (500, twice)',
        (res) => void res.writeHead(500).end('secret'),
        { error: { details: { reason: 'http_status', status: 500 } } },
      ],
    ])('ends with an upstream %s as the SDK does', async (_label, get, expected) => {
      onGet = get;
      resumes.length = 0;
      const viaDirect = await run(primed, true);
      const attempts = resumes.splice(0).length;
      expect(viaDirect).toEqual(await run(primed, false));
      expect(viaDirect).toMatchObject(expected);
      expect(attempts).toBe(resumes.length);
    });

    it('is resumed with Last-Event-ID, as the SDK does', async () => {
      resumes.length = 0;
      onGet = answering;
      const viaDirect = await run(primed, true);
      expect(viaDirect).toEqual(await run(primed, false));
      expect(viaDirect).toEqual({ result: { isError: false, content: text } });
      const [fromDirect, fromSdk] = resumes.map((headers) =>
        Object.entries(headers).filter(([name]) => name !== 'connection'),
      );
      expect(fromDirect).toEqual(fromSdk);
      expect(resumes[0]).toMatchObject({ 'last-event-id': 'e1', accept: 'text/event-stream' });
    });
  });

  it('calls a stateless 2025 upstream (no session id) as the SDK does', async () => {
    stateless = true;
    callHeaders.length = 0;
    try {
      const behave: LegacyMisbehaviour = (res, id) =>
        sendJson(res, 200, { jsonrpc: '2.0', id, result: { content: text } });
      const viaDirect = await run(behave, true);
      expect(viaDirect).toEqual(await run(behave, false));
      expect(viaDirect).toEqual({ result: { isError: false, content: text } });
    } finally {
      stateless = false;
    }
    const [viaDirect, viaSdk] = callHeaders.map((headers) =>
      Object.entries(headers).filter(([name]) => name !== 'content-length' && name !== 'connection'),
    );
    expect(viaDirect).toEqual(viaSdk);
    expect(callHeaders[0]).not.toHaveProperty('mcp-session-id');
    expect(callHeaders[0]).toHaveProperty('mcp-protocol-version', '2025-11-25');
  });

  it('answers the requests it meets before the response, as the SDK does', async () => {
    const behave: LegacyMisbehaviour = (res, id) =>
      sse(res, [
        { jsonrpc: '2.0', id: 'p1', method: 'ping' },
        { jsonrpc: '2.0', id: 7, method: 'roots/list', params: {} },
        { jsonrpc: '2.0', id, result: { content: text } },
      ]);
    replies.length = 0;
    const viaDirect = await run(behave, true);
    const fromDirect = replies.splice(0);
    expect(viaDirect).toEqual(await run(behave, false));
    // The SDK answers without holding the stream, so its answers may land after the call returned,
    // and in another order (it answers "method not found" at once, `ping` a tick later).
    await eventually(() => replies.length === 2);
    expect(fromDirect).toHaveLength(2);
    expect(fromDirect).toEqual(expect.arrayContaining(replies));
    expect(fromDirect).toEqual([
      { result: {}, jsonrpc: '2.0', id: 'p1' },
      { jsonrpc: '2.0', id: 7, error: { code: -32601, message: NOT_RELAYED('roots/list') } },
    ]);
  });

  it('fails a call whose upstream floods it with requests (the SDK would answer every one)', async () => {
    replies.length = 0;
    const pings = Array.from({ length: 40 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }));
    const result = await run(
      (res, id) => sse(res, [...pings, { jsonrpc: '2.0', id, result: { content: text } }]),
      true,
    );
    expect(result).toMatchObject({
      error: { code: 'upstream_protocol_error', details: { reason: 'too_many_requests' } },
    });
    expect(replies).toHaveLength(32);
  });
});
