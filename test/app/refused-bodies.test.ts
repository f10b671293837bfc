/**
 * Bodies and URLs refused before any route sees them say what was wrong, in the shape their client reads:
 * the catalogue's error on REST, a JSON-RPC error on an MCP endpoint (as the SDK's transport answers), and
 * never Fastify's own `FST_ERR_*` bodies. A real gateway through `inject()`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_BODY_DEPTH } from '../../src/json-body.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2026-07-28',
  'mcp-method': 'tools/call',
  'mcp-name': 'up__echo',
};
const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** A 2026-07-28 tools/call whose `arguments` JSON text is spliced in as it is. */
const callWithArguments = (argumentsJson: string) =>
  `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":${argumentsJson},"_meta":${JSON.stringify(MODERN_META)}}}`;

describe('refused bodies and URLs', () => {
  let gw: TestGateway;
  let agent: string;
  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_MAX_BODY_SIZE: '4096' });
    agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'a' } })).json().token;
  });
  afterEach(async () => gw.close());

  it('says on REST whether a body is empty, not JSON, or carries a prototype-poisoning key', async () => {
    const cases = [
      ['', 'empty_body'],
      ['{"role":"agent",', 'invalid_json'],
      ['{"role":"agent","name":"x","__proto__":{"admin":true}}', 'forbidden_key'],
      ['{"role":"agent","name":"x","groups":[{"constructor":{"prototype":{"admin":true}}}]}', 'forbidden_key'],
      ['{"role":"agent","name":"x","\\u005f_proto__":{}}', 'forbidden_key'],
    ] as const;
    for (const [body, reason] of cases) {
      const answer = await gw.request('POST', '/api/tokens', { body, headers: JSON_HEADERS });
      expect({ body, status: answer.statusCode }).toEqual({ body, status: 400 });
      expect(answer.json().error).toMatchObject({ code: 'validation_error', reason, issues: [{ path: 'body' }] });
    }
    const broken = await gw.request('POST', '/api/tokens', { body: '{"role":"agent",', headers: JSON_HEADERS });
    expect(broken.json().error.message).toBe('The body is not valid JSON.');
    // A plain `constructor` key is data like any other.
    const fine = await gw.request('POST', '/api/tokens', {
      body: '{"role":"agent","name":"constructor","groups":["constructor"]}',
      headers: JSON_HEADERS,
    });
    expect(fine.statusCode).toBe(201);
    // Nothing was created by the refused bodies: the admin, `a`, and the last one.
    expect((await gw.request('GET', '/api/tokens')).json().total).toBe(3);
  });

  it('answers an MCP endpoint a refused body with a JSON-RPC error and the refusal status', async () => {
    const post = (body: string, headers: Record<string, string> = MCP_HEADERS) =>
      gw.request('POST', '/mcp', { body, token: agent, headers });
    const parse = await post('{"jsonrpc":"2.0",');
    expect(parse.statusCode).toBe(400);
    expect(parse.json()).toEqual({
      jsonrpc: '2.0',
      error: {
        code: -32700,
        message: 'Parse error: the request body is not valid JSON',
        data: { code: 'validation_error', reason: 'invalid_json' },
      },
      id: null,
    });
    expect((await post('')).json().error).toMatchObject({ code: -32700, data: { reason: 'empty_body' } });

    for (const args of ['{"text":"a","__proto__":{"x":1}}', '{"text":"a","constructor":{"prototype":{"x":1}}}']) {
      const poisoned = await post(callWithArguments(args));
      expect(poisoned.statusCode).toBe(400);
      expect(poisoned.json()).toMatchObject({
        jsonrpc: '2.0',
        error: {
          code: -32600,
          message: expect.stringContaining('"__proto__"'),
          data: { code: 'validation_error', reason: 'forbidden_key' },
        },
        id: null,
      });
    }

    // Nesting past the limit is refused before any recursive code meets it; up to the limit is the route's to judge.
    const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
    const deep = await post(callWithArguments(`{"text":${nested(MAX_BODY_DEPTH + 1)}}`));
    expect(deep.statusCode).toBe(400);
    expect(deep.json().error).toMatchObject({ code: -32600, data: { reason: 'too_deep' } });
    const deepRest = await gw.request('POST', '/api/tokens', {
      body: `{"role":"agent","name":"x","groups":${nested(MAX_BODY_DEPTH + 1)}}`,
      headers: JSON_HEADERS,
    });
    expect(deepRest.json().error).toMatchObject({ code: 'validation_error', reason: 'too_deep' });
    const atLimit = await gw.request('POST', '/api/tokens', {
      // Brackets inside a string are text, not nesting.
      body: `{"role":"agent","name":"x","groups":${nested(MAX_BODY_DEPTH - 1)},"pad":"[[[[\\"[["}`,
      headers: JSON_HEADERS,
    });
    expect(atLimit.json().error.reason).not.toBe('too_deep');

    const plain = await post('hello', { ...MCP_HEADERS, 'content-type': 'text/plain' });
    expect(plain.statusCode).toBe(415);
    expect(plain.json().error).toMatchObject({ code: -32000, data: { code: 'unsupported_media_type' } });

    const large = await post(callWithArguments(JSON.stringify({ text: 'x'.repeat(5000) })));
    expect(large.statusCode).toBe(413);
    expect(large.json().error).toMatchObject({ code: -32000, data: { code: 'payload_too_large' } });

    // The same refusals on REST keep the catalogue's shape.
    const rest = await gw.request('POST', '/api/tokens', { body: 'hello', headers: { 'content-type': 'text/plain' } });
    expect(rest.statusCode).toBe(415);
    expect(rest.json().error.code).toBe('unsupported_media_type');
  });

  it('refuses a URL the router cannot take apart from the catalogue, without echoing it', async () => {
    for (const [url, word] of [
      ['/api/approvals/%ZZ/approve', 'percent-encoding'],
      [`/api/approvals/${'x'.repeat(300)}/approve`, 'longer than any id'],
    ] as const) {
      const answer = await gw.request('POST', url, { body: {} });
      expect({ url, status: answer.statusCode }).toEqual({ url, status: 400 });
      const { error } = answer.json();
      expect(error).toMatchObject({ code: 'validation_error', issues: [{ path: 'url' }] });
      expect(error.message).toContain(word);
      expect(answer.body).not.toContain('FST_ERR');
      expect(answer.body).not.toContain('%ZZ');
      expect(answer.headers['x-request-id']).toEqual(expect.any(String));
    }
    // A long id on a route that has none that long is no route: said without echoing the whole path.
    const long = await gw.request('GET', `/api/mcp/servers/${'x'.repeat(5000)}`);
    expect(long.statusCode).toBe(404);
    expect(long.json().error.message.length).toBeLessThan(300);
  });
});
