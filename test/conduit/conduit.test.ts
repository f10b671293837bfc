/**
 * `gatehouse conduit` end to end: real HTTP on port 0, real SDK-built upstreams of both eras on
 * 127.0.0.2 (public through the egress guard's test seam), hostile upstreams, and the contract of
 * hadrontool-mcp (routes, env names, typed errors).
 */

import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConduit } from '../../src/conduit.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logging.js';
import { startHostileServer } from '../fixtures/hostile-servers.js';
import { type LegacyFixture, type McpFixture, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';

const TOKEN = 'conduit-test-token-0123456789';
const HOST = '127.0.0.2';

async function start(env: Record<string, string> = {}) {
  const config = loadConfig({
    env: {
      NODE_ENV: 'test',
      MCP_TOOL_TOKEN: TOKEN,
      MCP_ALLOW_HTTP: 'true',
      GATEHOUSE_TEST_PUBLIC_ADDRESSES: HOST,
      MCP_LIST_TIMEOUT_MS: '2000',
      MCP_CALL_TIMEOUT_MS: '2000',
      GATEHOUSE_LOG_LEVEL: 'debug',
      ...env,
    },
  });
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _e, done) {
      logs.push(String(chunk));
      done();
    },
  });
  const conduit = await createConduit(config, { logger: createLogger(config, sink) });
  await conduit.app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(conduit.app.server.address() as AddressInfo).port}`;
  const post = async (path: string, body: unknown, token: string | null = TOKEN) => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  return { conduit, base, post, logs };
}

describe('gatehouse conduit', () => {
  let modern: McpFixture;
  let legacy: LegacyFixture;
  let ctx: Awaited<ReturnType<typeof start>>;

  beforeAll(async () => {
    modern = await startModernServer({ host: HOST });
    legacy = await startLegacyServer({ host: HOST });
    ctx = await start();
  });
  afterAll(async () => {
    await ctx.conduit.app.close();
    await modern.close();
    await legacy.close();
  });

  it('answers /healthz publicly and /info behind the token', async () => {
    expect(await (await fetch(`${ctx.base}/healthz`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${ctx.base}/info`)).status).toBe(401);
    const info = await (await fetch(`${ctx.base}/info`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();
    expect(info).toMatchObject({
      name: 'gatehouse',
      operations: ['list-tools', 'call-tool'],
      transports: ['streamable-http'],
      capabilities: ['ops'],
    });
  });

  it('lists and calls tools on both protocol eras (plain calls without the SDK client)', async () => {
    const direct = ctx.conduit.pool.stats().directCalls;
    for (const upstream of [modern, legacy]) {
      const listed = await ctx.post('/ops/list-tools', { url: upstream.url });
      expect(listed.status).toBe(200);
      expect(listed.body.tools.map((t: { name: string }) => t.name)).toContain('echo');
      expect(listed.body.tools[0]).toHaveProperty('inputSchema');
      const called = await ctx.post('/ops/call-tool', { url: upstream.url, name: 'add', arguments: { a: 2, b: 3 } });
      expect(called.status).toBe(200);
      expect(called.body).toMatchObject({ isError: false, content: [{ type: 'text', text: '5' }] });
    }
    expect(ctx.conduit.pool.stats().directCalls - direct).toBe(2);
  });

  it('sends every call through the SDK client with GATEHOUSE_HUB_FAST_PATH=false, with the same answer', async () => {
    const sdkOnly = await start({ GATEHOUSE_HUB_FAST_PATH: 'false' });
    try {
      for (const upstream of [modern, legacy]) {
        const body = { url: upstream.url, name: 'add', arguments: { a: 2, b: 3 } };
        const [viaSdk, viaDefault] = [
          await sdkOnly.post('/ops/call-tool', body),
          await ctx.post('/ops/call-tool', body),
        ];
        expect(viaSdk).toEqual(viaDefault);
      }
      expect(sdkOnly.conduit.pool.stats().directCalls).toBe(0);
    } finally {
      await sdkOnly.conduit.app.close();
    }
  });

  it('reuses one upstream session for many calls (pooled by default)', async () => {
    const before = legacy.sessionsOpened;
    for (let i = 0; i < 10; i++)
      await ctx.post('/ops/call-tool', { url: legacy.url, name: 'echo', arguments: { text: `n${i}` } });
    expect(legacy.sessionsOpened - before).toBeLessThanOrEqual(1);
  });

  it('returns a tool error as a normal 200 with isError', async () => {
    const failed = await ctx.post('/ops/call-tool', { url: modern.url, name: 'fail' });
    expect(failed.status).toBe(200);
    expect(failed.body.isError).toBe(true);
  });

  it('requires the bearer token, compared whole', async () => {
    expect((await ctx.post('/ops/list-tools', { url: modern.url }, null)).body.error.code).toBe('unauthorized');
    expect((await ctx.post('/ops/list-tools', { url: modern.url }, `${TOKEN}x`)).status).toBe(401);
    expect((await ctx.post('/ops/list-tools', { url: modern.url }, TOKEN.slice(0, -1))).status).toBe(401);
  });

  it('validates bodies with named issues and never crashes on hostile input', async () => {
    const missing = await ctx.post('/ops/call-tool', { url: modern.url });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({
      code: 'validation_error',
      issues: [expect.objectContaining({ path: 'body.name' })],
    });
    expect((await ctx.post('/ops/list-tools', { url: modern.url, extra: 1 })).body.error.code).toBe('validation_error');
    expect((await ctx.post('/ops/list-tools', '{"url": ')).body.error.code).toBe('validation_error');
    expect((await ctx.post('/ops/list-tools', { url: 42 })).status).toBe(400);
    expect((await ctx.post('/ops/list-tools', '{"url":"x","__proto__":{"polluted":true}}')).status).toBe(400);
    expect((await ctx.post('/ops/list-tools', { url: modern.url, headers: { 'mcp-session-id': 'x' } })).status).toBe(
      400,
    );
    expect((await ctx.post('/ops/list-tools', { url: modern.url, headers: { 'x-a': 'line\r\nbreak' } })).status).toBe(
      400,
    );
    const huge = await ctx.post('/ops/call-tool', {
      url: modern.url,
      name: 'echo',
      arguments: { text: 'x'.repeat(3 * 1024 * 1024) },
    });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('payload_too_large');
    expect((await fetch(`${ctx.base}/healthz`)).status).toBe(200);
  });

  it('refuses private targets and insecure schemes with typed codes', async () => {
    const loopback = await ctx.post('/ops/list-tools', { url: 'http://127.0.0.1:1/mcp' });
    expect(loopback).toMatchObject({ status: 400, body: { error: { code: 'private_network_blocked' } } });
    const metadata = await ctx.post('/ops/list-tools', { url: 'http://[::ffff:169.254.169.254]/mcp' });
    expect(metadata.body.error.code).toBe('private_network_blocked');
    const ftp = await ctx.post('/ops/list-tools', { url: `ftp://${HOST}/mcp` });
    expect(ftp.body.error).toMatchObject({ code: 'validation_error', reason: 'unsupported_scheme' });
  });

  it('maps hostile upstreams onto the catalogue and bounds what comes back', async () => {
    const silent = await startHostileServer({ mode: 'never-answers', host: HOST });
    const garbage = await startHostileServer({ mode: 'not-json', host: HOST });
    try {
      const timedOut = await ctx.post('/ops/list-tools', { url: silent.url });
      expect(timedOut).toMatchObject({ status: 504, body: { error: { code: 'upstream_timeout' } } });
      const bad = await ctx.post('/ops/list-tools', { url: garbage.url });
      expect(bad).toMatchObject({ status: 502, body: { error: { code: 'upstream_protocol_error' } } });
      const closed = await ctx.post('/ops/list-tools', { url: `http://${HOST}:1/mcp` });
      expect(closed).toMatchObject({ status: 502, body: { error: { code: 'upstream_unreachable' } } });
    } finally {
      await silent.close();
      await garbage.close();
    }
    const flood = await ctx.post('/ops/call-tool', { url: modern.url, name: 'blocks', arguments: { n: 500 } });
    expect(flood.body.content).toHaveLength(100);
    expect(flood.body.truncated).toBe(true);
  });

  it('keeps credentials out of the logs', async () => {
    const secret = 'upstream-secret-value-123456';
    await ctx.post('/ops/call-tool', {
      url: modern.url,
      name: 'echo',
      arguments: { text: 'hi' },
      headers: { 'X-Api-Key': secret },
    });
    await ctx.post('/ops/list-tools', { url: modern.url }, `${TOKEN}-wrong`);
    const text = ctx.logs.join('');
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(TOKEN);
  });
});

describe('conduit exposure rules', () => {
  it('refuses a non-loopback bind without a token, and production without a token', async () => {
    const open = loadConfig({ env: { HOST: '0.0.0.0' } });
    await expect(createConduit(open)).rejects.toMatchObject({ code: 'validation_error' });
    const production = loadConfig({ env: { NODE_ENV: 'production' } });
    await expect(createConduit(production)).rejects.toThrow(/MCP_TOOL_TOKEN/);
  });

  it('is open on loopback without a token, like hadrontool-mcp in development', async () => {
    const { conduit, base } = await start({ MCP_TOOL_TOKEN: '' });
    try {
      expect((await fetch(`${base}/info`)).status).toBe(200);
    } finally {
      await conduit.app.close();
    }
  });
});
