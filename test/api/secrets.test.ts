/**
 * No secret leaves in clear: a sentinel planted as a header, an env value and
 * a bearer token is searched for in every response, every log line, the
 * SQLite file and a pg_dump of the PostgreSQL schema. The upstream must still
 * receive it (sealing is useless if the value cannot be opened).
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, TEST_DATABASE_URL } from '../helpers/stores.js';

const SENTINEL = 'SENTINEL-7f3a9c-do-not-leak';

describeEachStore('sealed secrets', (target) => {
  let gw: TestGateway;
  let upstream: McpFixture;

  beforeEach(async () => {
    // Env references resolve from the gateway's own environment.
    process.env.MCP_SECRET_FROM_ENV = `${SENTINEL}-env-ref`;
    gw = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
  });
  afterEach(async () => {
    delete process.env.MCP_SECRET_FROM_ENV;
    await upstream.close();
    await gw.close();
  });

  it('never returns, logs or stores a secret in clear', async () => {
    const bodies: string[] = [];
    const call = async (...args: Parameters<TestGateway['request']>) => {
      const response = await gw.request(...args);
      bodies.push(response.body, JSON.stringify(response.headers));
      return response;
    };

    const installed = await call('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'secretive',
          name: 'Secretive',
          transport: 'streamable-http',
          url: upstream.url,
          headers: { 'X-Api-Key': `${SENTINEL}-header`, 'X-From-Env': { env: 'MCP_SECRET_FROM_ENV' } },
          auth: { type: 'bearer', token: `${SENTINEL}-bearer` },
        },
      },
    });
    expect(installed.statusCode).toBe(201);
    expect(installed.json().installed.headers).toEqual({
      'X-Api-Key': { set: true },
      'X-From-Env': { env: 'MCP_SECRET_FROM_ENV' },
    });
    expect(installed.json().installed.auth).toEqual({ type: 'bearer', token: { set: true } });

    await call('PATCH', '/api/mcp/servers/secretive/config', { body: { env: { OTHER: `${SENTINEL}-patched` } } });
    expect((await call('POST', '/api/mcp/servers/secretive/test')).json()).toMatchObject({ ok: true });
    await call('GET', '/api/mcp/servers');
    await call('GET', '/api/mcp/servers/secretive');
    await call('GET', '/api/mcp/servers/secretive/logs');
    await call('PATCH', '/api/mcp/servers/secretive/config', {
      body: { headers: { 'X-Api-Key': `${SENTINEL}-rotated` } },
    });
    // A bad value is refused without echoing it.
    await call('PATCH', '/api/mcp/servers/secretive/config', {
      body: { headers: { 'Bad Header': `${SENTINEL}-bad` } },
    });
    await call('PATCH', '/api/mcp/servers/secretive/config', {
      body: { headers: { 'X-Ref': { env: 'GATEHOUSE_SECRET_KEY' } } },
    });
    await gw.gateway.audit.flush();

    // The upstream received the opened values: sealing did not lose them.
    const received = upstream.log.records.map((r) => r.headers);
    expect(received.some((h) => h['x-api-key'] === `${SENTINEL}-header`)).toBe(true);
    expect(received.some((h) => h.authorization === `Bearer ${SENTINEL}-bearer`)).toBe(true);
    expect(received.some((h) => h['x-from-env'] === `${SENTINEL}-env-ref`)).toBe(true);

    for (const body of bodies) expect(body).not.toContain(SENTINEL);
    expect(gw.logs.length).toBeGreaterThan(0);
    for (const line of gw.logs) expect(line).not.toContain(SENTINEL);

    if (target.kind === 'sqlite') {
      // Every file of the data folder, the audit journal's included.
      const files = readdirSync(gw.dataDir, { recursive: true, encoding: 'utf8' })
        .map((file) => join(gw.dataDir, file))
        .filter((file) => statSync(file).isFile());
      expect(files.some((file) => file.includes('audit-journal'))).toBe(true);
      for (const file of files) expect(readFileSync(file).includes(SENTINEL)).toBe(false);
    } else {
      const schema = new URL(gw.databaseUrl as string).searchParams.get('options')?.split('=')[1] as string;
      // Not execFileSync: the gateway's event loop keeps running meanwhile, and a dump that hangs fails as such.
      const { stdout: dump } = await promisify(execFile)(
        'pg_dump',
        ['--dbname', TEST_DATABASE_URL, '--schema', schema, '--data-only'],
        { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 20_000 },
      );
      expect(dump).toContain('secretive'); // the dump is of the right schema
      expect(dump).not.toContain(SENTINEL);
    }
  });

  it('refuses env references outside the secret prefix and drops every credential when the URL changes', async () => {
    const refused = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'r',
          name: 'r',
          transport: 'streamable-http',
          url: upstream.url,
          headers: { X: { env: 'GATEHOUSE_SECRET_KEY' } },
        },
      },
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.code).toBe('mcp.secret_ref_refused');

    await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'moving',
          name: 'moving',
          transport: 'streamable-http',
          url: upstream.url,
          headers: { 'X-Sealed': 'value', 'X-Ref': { env: 'MCP_SECRET_FROM_ENV' } },
          auth: { type: 'bearer', token: { env: 'MCP_SECRET_BEARER' } },
        },
      },
    });
    // Re-pointing a server must not hand its credentials to the new target: env references included.
    const moved = await gw.request('PATCH', '/api/mcp/servers/moving/config', { body: { url: `${upstream.url}?v=2` } });
    expect(moved.json().server.headers).toEqual({});
    expect(moved.json().server.auth).toEqual({ type: 'none' });
    const regiven = await gw.request('PATCH', '/api/mcp/servers/moving/config', {
      body: { url: upstream.url, headers: { 'X-Sealed': 'again', 'X-Ref': { env: 'MCP_SECRET_FROM_ENV' } } },
    });
    expect(regiven.json().server.headers).toEqual({
      'X-Ref': { env: 'MCP_SECRET_FROM_ENV' },
      'X-Sealed': { set: true },
    });
    // A change that keeps the target keeps its credentials.
    const same = await gw.request('PATCH', '/api/mcp/servers/moving/config', { body: { enabled: true } });
    expect(same.json().server.headers).toEqual({
      'X-Ref': { env: 'MCP_SECRET_FROM_ENV' },
      'X-Sealed': { set: true },
    });
  });
});
