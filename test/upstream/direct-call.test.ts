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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createEgressGuard } from '../../src/egress/index.js';
import { GatehouseError } from '../../src/errors.js';
import type { UpstreamPool, UpstreamTarget } from '../../src/upstream/index.js';
import { listen, type RequestRecord, readBody, sendJson } from '../fixtures/http.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { Cleanup, makePool } from './helpers.js';

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
async function both(
  pools: { direct: UpstreamPool; sdk: UpstreamPool },
  target: UpstreamTarget,
  name: string,
  args: Record<string, unknown> | undefined,
  opts = {},
) {
  const before = pools.direct.stats().directCalls;
  const viaDirect = await outcome(pools.direct.callToolInteractive(target, name, args, opts));
  expect(pools.direct.stats().directCalls).toBe(before + 1);
  const viaSdk = await outcome(pools.sdk.callToolInteractive(target, name, args, opts));
  expect(pools.sdk.stats().directCalls).toBe(0);
  return { viaDirect, viaSdk };
}

/** A recorded request's headers in arrival order, without the ones a connection sets for itself. */
const standard = (record: RequestRecord) =>
  Object.entries(record.headers).filter(([name]) => name !== 'content-length' && name !== 'connection');

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

  it.each([
    ['a plain result', 'echo', { text: 'hi' }],
    ['structured content and an outputSchema', 'add', { a: 2, b: 3 }],
    ['a tool error (isError)', 'fail', {}],
    ['a result _meta', 'structured', {}],
    ['an answer that streams a notification first (SSE)', 'chatty', {}],
    ['arguments left out', 'envelope', undefined],
    ['an unknown tool (JSON-RPC error)', 'nope', {}],
    ['arguments the upstream rejects', 'add', { a: 'x' }],
  ])('answers %s as the SDK does', async (_label, name, args) => {
    const { viaDirect, viaSdk } = await call(name, args);
    expect(viaDirect).toEqual(viaSdk);
  });

  it('sends the envelope and headers the SDK client sends', async () => {
    fixture.log.records.length = 0;
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
});
