/**
 * The dashboard's static serving (src/web-serve.ts) on a Fastify app assembled like the gateway's, over a
 * build folder the test writes: index.html fallback, hashed assets, ETags, a missing build, reserved paths.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createLogger } from '../../src/logging.js';
import { DASHBOARD_CSP, dashboardRoutes } from '../../src/web-serve.js';

const INDEX = '<!doctype html><html><head><script type="module" src="/assets/app-1a2b.js"></script></head></html>';

describe('dashboard static serving', () => {
  let dir: string;
  let app: FastifyInstance;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-web-serve-'));
    app = await buildApp({
      config: { maxBodySize: 1024 },
      logger: createLogger({ logLevel: 'silent' }),
      authenticate: () => undefined,
      routes: dashboardRoutes({ dir: join(dir, 'web') }),
    });
  });

  afterEach(async () => {
    await app.close();
    await rm(dir, { recursive: true, force: true });
  });

  const build = async () => {
    await mkdir(join(dir, 'web', 'assets'), { recursive: true });
    await writeFile(join(dir, 'web', 'index.html'), INDEX);
    await writeFile(join(dir, 'web', 'assets', 'app-1a2b.js'), 'console.log(1);');
    await writeFile(join(dir, 'web', 'assets', 'notes.unknown'), 'not served: no known type');
  };

  it('says the dashboard is not built (503, with the CSP) until it is, then serves it without a restart', async () => {
    const missing = await app.inject({ method: 'GET', url: '/' });
    expect(missing.statusCode).toBe(503);
    expect(missing.headers['content-security-policy']).toBe(DASHBOARD_CSP);
    expect(missing.body).toContain('npm run build');
    await build();
    const served = await app.inject({ method: 'GET', url: '/' });
    expect(served.statusCode).toBe(200);
    expect(served.body).toBe(INDEX);
  });

  it('serves assets immutably, app routes as index.html, answers 304 to a matching ETag, and nothing else', async () => {
    await build();
    const index = await app.inject({ method: 'GET', url: '/' });
    expect(index.headers['cache-control']).toBe('no-cache');
    expect(index.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(index.headers['x-frame-options']).toBe('DENY');
    const etag = index.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    expect((await app.inject({ method: 'GET', url: '/', headers: { 'if-none-match': etag } })).statusCode).toBe(304);

    const deep = await app.inject({ method: 'GET', url: '/servers/github?tab=tools' });
    expect(deep.statusCode).toBe(200);
    expect(deep.body).toBe(INDEX);

    const asset = await app.inject({ method: 'GET', url: '/assets/app-1a2b.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(asset.body).toBe('console.log(1);');

    for (const url of ['/assets/nope.js', '/assets/notes.unknown', '/assets/app-1a2b.js.map']) {
      expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(404);
    }
    expect((await app.inject({ method: 'POST', url: '/' })).statusCode).toBe(404);
  });

  it('never answers the app under the API and protocol prefixes', async () => {
    await build();
    for (const url of [
      '/api',
      '/api/mcp/nothing',
      '/mcp',
      '/mcp/s/x',
      '/ops/call-tool',
      '/info',
      '/healthz',
      '/metrics',
    ]) {
      const answer = await app.inject({ method: 'GET', url });
      expect(answer.statusCode, url).toBe(404);
      expect(answer.json().error.code, url).toBe('not_found');
    }
    // A path that only starts like a prefix is an app route.
    expect((await app.inject({ method: 'GET', url: '/information' })).body).toBe(INDEX);
    expect((await app.inject({ method: 'GET', url: '/apis' })).body).toBe(INDEX);
  });
});
