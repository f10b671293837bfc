/**
 * The seam with the egress guard: every upstream request goes through the injected fetch, and the
 * guard's typed errors come out unchanged, whether thrown at once or from a response body
 * mid-stream (JSON or SSE), at connect or at call time. Upstreams bind 127.0.0.2 here, the address
 * the guard's tests treat as public.
 */
import type http from 'node:http';
import type { FetchLike } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { createEgressGuard } from '../../src/egress/index.js';
import { GatehouseError } from '../../src/errors.js';
import { startHostileServer } from '../fixtures/hostile-servers.js';
import { listen } from '../fixtures/http.js';
import { startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { Cleanup, cappedFetch, expectFailure, makePool } from './helpers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const HOST = '127.0.0.2';

describe('egress seam', () => {
  it('sends every upstream request, GET stream and DELETE included, through the injected fetch', async () => {
    const fixture = cleanup.add(await startLegacyServer({ host: HOST }));
    const seen: string[] = [];
    const recording: FetchLike = (url, init) => {
      seen.push(`${init?.method ?? 'GET'} ${String(url)}`);
      return fetch(url, init);
    };
    const pool = makePool({ fetch: recording });
    await pool.listTools({ url: fixture.url });
    await pool.callTool({ url: fixture.url }, 'echo', { text: 'x' });
    await pool.close();
    expect(seen.length).toBe(fixture.log.records.length);
    expect(seen.every((s) => s.endsWith(` ${fixture.url}`))).toBe(true);
    expect(seen.filter((s) => s.startsWith('DELETE'))).toHaveLength(1);
    expect(seen.filter((s) => s.startsWith('GET'))).toHaveLength(1);
  });

  it('works through the real egress guard, both eras, its response cap included', async () => {
    // 127.0.0.2 counts as public for the guard under NODE_ENV=test; plain http is allowed here.
    const guard = cleanup.add(
      createEgressGuard({ testPublicAddresses: [HOST], allowHttp: true, maxResponseBytes: 256 * 1024 }),
    );
    const legacy = cleanup.add(await startLegacyServer({ host: HOST }));
    const modern = cleanup.add(await startModernServer({ host: HOST }));
    const pool = cleanup.add(makePool({ fetch: guard.fetch }));
    for (const fixture of [legacy, modern]) {
      expect((await pool.listTools({ url: fixture.url })).tools.map((t) => t.name)).toContain('echo');
      const headers = { authorization: 'Bearer through-the-guard' };
      expect((await pool.callTool({ url: fixture.url, headers }, 'add', { a: 1, b: 2 })).structuredContent).toEqual({
        sum: 3,
      });
      await expectFailure(pool.callTool({ url: fixture.url }, 'big', { bytes: 1_000_000 }), 'upstream_protocol_error', {
        reason: 'response_too_large',
      });
    }
    // Loopback proper is still refused.
    await expectFailure(pool.listTools({ url: legacy.url.replace(HOST, '127.0.0.1') }), 'private_network_blocked');
  });

  it.each([
    ['2025-era, SSE answers', () => startLegacyServer({ host: HOST })],
    ['2025-era, JSON answers', () => startLegacyServer({ host: HOST, jsonResponse: true })],
    ['modern', () => startModernServer({ host: HOST })],
  ])('%s: a body cut by the guard mid-stream surfaces as its own error, at once', async (_, start) => {
    const fixture = cleanup.add(await start());
    const pool = cleanup.add(makePool({ fetch: cappedFetch(64 * 1024), callTimeoutMs: 10_000 }));
    expect((await pool.callTool({ url: fixture.url }, 'big', { bytes: 1_000 })).content).toHaveLength(1);
    const started = performance.now();
    await expectFailure(pool.callTool({ url: fixture.url }, 'big', { bytes: 1_000_000 }), 'upstream_protocol_error', {
      reason: 'response_too_large',
    });
    expect(performance.now() - started).toBeLessThan(5_000);
    // The cut connection is retired; the next call works on a new one.
    expect((await pool.callTool({ url: fixture.url }, 'echo', { text: 'after' })).content).toEqual([
      { type: 'text', text: 'after' },
    ]);
  });

  it('passes a body cut during connect through the negotiation probe unchanged', async () => {
    const fixture = cleanup.add(await startModernServer({ host: HOST }));
    const pool = cleanup.add(makePool({ fetch: cappedFetch(16) }));
    await expectFailure(pool.listTools({ url: fixture.url }), 'upstream_protocol_error', {
      reason: 'response_too_large',
    });
  });

  it.each([
    new GatehouseError('private_network_blocked'),
    new GatehouseError('validation_error', 'Plain http is not allowed.', { reason: 'insecure_scheme' }),
    new GatehouseError('upstream_unreachable', 'No address.', { reason: 'dns' }),
  ])('rethrows the guard’s $code as is', async (refusal) => {
    const refusing: FetchLike = async () => {
      throw refusal;
    };
    const pool = cleanup.add(makePool({ fetch: refusing }));
    const error = await expectFailure(pool.listTools({ url: 'http://10.0.0.1/mcp' }), refusal.code);
    expect(error).toBe(refusal);
  });

  it('follows no redirect: a 307 fails the request and its target is never contacted', async () => {
    const target = cleanup.add(await startModernServer({ host: HOST }));
    const redirector = cleanup.add(
      await listen((_req: http.IncomingMessage, res: http.ServerResponse) => {
        res.writeHead(307, { location: target.url }).end();
      }, HOST),
    );
    const pool = cleanup.add(makePool());
    await expectFailure(pool.listTools({ url: `${redirector.origin}/mcp` }), 'upstream_protocol_error', {
      reason: 'redirect_refused',
      status: 307,
    });
    expect(target.log.records).toHaveLength(0);
  });

  it('never puts header values in errors', async () => {
    const secret = 'Bearer s3cr3t-value-never-shown';
    const hostile = cleanup.add(await startHostileServer({ mode: 'status-500', host: HOST }));
    const pool = cleanup.add(makePool());
    const failed = await expectFailure(
      pool.callTool({ url: hostile.url, headers: { authorization: secret } }, 'x', {}),
      'upstream_protocol_error',
    );
    expect(JSON.stringify(failed.toBody())).not.toContain('s3cr3t');
    // The header did reach the upstream it was meant for.
    expect(hostile.log.records.every((r) => r.headers.authorization === secret)).toBe(true);

    const invalid = await expectFailure(
      pool.listTools({ url: hostile.url, headers: { 'x-api-key': `${secret}\r\ninjected: 1` } }),
      'validation_error',
    );
    expect(JSON.stringify(invalid.toBody())).not.toContain('s3cr3t');
    expect(invalid.details).toMatchObject({ issues: [{ path: 'headers.x-api-key' }] });
  });
});
