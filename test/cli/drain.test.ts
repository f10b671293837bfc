/**
 * Graceful drain: a real `gatehouse serve` process gets SIGTERM while a call is in flight and an
 * event stream is open. `/readyz` turns 503 (`drain`) at once while `/healthz` stays 200; the call
 * in flight finishes, a new call is still served, the open stream still receives events, and the
 * process exits 0 after `GATEHOUSE_DRAIN_S`. And `/readyz` says why a replica is not ready.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Client } from '@modelcontextprotocol/client';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { Readiness } from '../../src/readiness.js';
import { openStore } from '../../src/store/db.js';
import { hubRequest, openQueue, operator } from '../approvals/helpers.js';
import { freePort } from '../fixtures/http.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import {
  PUBLIC_TEST_HOST,
  startTestGateway,
  TEST_ADMIN_TOKEN,
  TEST_SECRET_KEY,
  type TestGateway,
} from '../helpers/gateway.js';
import { NODE_TS } from '../helpers/processes.js';
import { describeEachStore } from '../helpers/stores.js';
import { CLI_MAIN } from './helpers.js';

describeEachStore('graceful drain', (target) => {
  let child: ChildProcess | undefined;
  let upstream: McpFixture | undefined;
  let gw: TestGateway | undefined;
  const clients: Client[] = [];
  const cleanups: Array<() => Promise<void>> = [];

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    child = undefined;
    await gw?.close();
    gw = undefined;
    await upstream?.close();
    upstream = undefined;
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it('on SIGTERM: not ready, in-flight calls and open streams served, then exits', { timeout: 120_000 }, async () => {
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'slow'] });
    const place = await target.fresh();
    cleanups.push(() => place.cleanup());
    const port = await freePort();
    const [node, ...flags] = NODE_TS;
    const proc = spawn(node, [...flags, CLI_MAIN, 'serve', '--port', String(port)], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        GATEHOUSE_DATA_DIR: place.dataDir,
        ...(place.databaseUrl ? { GATEHOUSE_DATABASE_URL: place.databaseUrl } : {}),
        GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
        GATEHOUSE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        GATEHOUSE_ALLOW_HTTP: 'true',
        GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST,
        GATEHOUSE_LIST_WATCH: 'false',
        GATEHOUSE_LOG_LEVEL: 'info',
        GATEHOUSE_DRAIN_S: '4',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    let output = '';
    proc.stdout?.on('data', (chunk) => {
      output += String(chunk);
    });
    proc.stderr?.on('data', (chunk) => {
      output += String(chunk);
    });
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    await eventually(() => {
      if (proc.exitCode !== null) throw new Error(`serve exited:\n${output}`);
      expect(output).toContain('gatehouse serve listening');
    }, 90_000);
    const base = `http://127.0.0.1:${port}`;
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });

    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    expect((await api('POST', '/api/mcp/install', { url: upstream.url, id: 'files' })).status).toBe(201);
    expect((await api('PATCH', '/api/mcp/servers/files/tools', { allow: ['echo', 'slow'] })).status).toBe(200);
    expect((await (await api('POST', '/api/mcp/servers/files/test')).json()).ok).toBe(true);
    const agent = await (await api('POST', '/api/tokens', { role: 'agent', name: 'a' })).json();
    const client = await connectAgent(`${base}/mcp`, agent.token, { era: 'modern' });
    clients.push(client);

    // An open event stream, read as it arrives.
    const stream = await fetch(`${base}/api/mcp/stream`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
    expect(stream.status).toBe(200);
    let streamed = '';
    const reader = stream.body!.getReader();
    void (async () => {
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) return;
        streamed += new TextDecoder().decode(value);
      }
    })();

    const inFlight = client.callTool({ name: 'files__slow', arguments: { ms: 1_500 } });
    await eventually(() => expect(upstream!.stats.calls.slow).toBe(1));
    proc.kill('SIGTERM');

    await eventually(async () => {
      const draining = await fetch(`${base}/readyz`);
      expect(draining.status).toBe(503);
      expect(await draining.json()).toMatchObject({ status: 'not_ready', reason: 'drain' });
    });
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    // What the balancer still sends while it notices is served.
    const during = await client.callTool({ name: 'files__echo', arguments: { text: 'during the drain' } });
    expect(during.isError).toBeFalsy();
    expect(JSON.stringify(during.content)).toContain('during the drain');
    // The call in flight finishes.
    const finished = await inFlight;
    expect(finished.isError).toBeFalsy();
    expect(JSON.stringify(finished.content)).toContain('slept 1500ms');
    // The stream opened before the drain still carries events: both calls'.
    await eventually(() => expect(streamed.match(/event: tool\.called/g)?.length ?? 0).toBe(2));

    expect(await exited).toBe(0);
    expect(output).toContain('shutting down');
  });

  it('/readyz answers why a replica is not ready: starting, migrations, store', async () => {
    gw = await startTestGateway(target);
    const { store } = gw.gateway;
    expect((await gw.request('GET', '/readyz', { token: null })).json()).toEqual({ status: 'ready' });

    const starting = new Readiness(store);
    expect(await starting.check()).toMatchObject({ ready: false, reason: 'starting' });
    starting.started();
    expect(await starting.check()).toEqual({ ready: true });

    // A store whose schema is behind this release (its last migration not applied).
    const latest = await store.db
      .selectFrom('gatehouse_migrations')
      .select((eb) => eb.fn.max('version').as('v'))
      .executeTakeFirstOrThrow();
    await sql`delete from gatehouse_migrations where version = ${Number(latest.v)}`.execute(store.db);
    const behind = await gw.request('GET', '/readyz', { token: null });
    expect(behind.statusCode).toBe(503);
    expect(behind.json()).toMatchObject({ status: 'not_ready', reason: 'migrations' });

    // Draining wins over everything.
    await gw.gateway.drain();
    expect((await gw.request('GET', '/readyz', { token: null })).json()).toMatchObject({ reason: 'drain' });

    // A store that cannot answer.
    const other = await startTestGateway(target);
    cleanups.push(() => other.close().catch(() => {}));
    const orphan = new Readiness(other.gateway.store);
    orphan.started();
    await other.gateway.store.close();
    expect(await orphan.check()).toMatchObject({ ready: false, reason: 'store' });
  });
});

describeEachStore('graceful drain: approvals', (target) => {
  it('a draining replica claims no approved call; another replica runs it', async () => {
    const place = await target.fresh();
    const stores = [await openStore(place), await openStore(place)];
    const [draining, other] = [await openQueue(stores[0]!), await openQueue(stores[1]!)];
    try {
      draining.queue.stopClaiming();
      const created = await draining.queue.create(hubRequest());
      await draining.queue.decide(created.id, 'approve', operator);
      await draining.queue.idle();
      expect(draining.executor.calls).toHaveLength(0);
      expect((await draining.queue.get(created.id)).status).toBe('approved');
      // Another replica's pass over what nobody runs picks it up.
      await other.queue.resume();
      await other.queue.idle();
      expect(other.executor.calls.map((c) => c.id)).toEqual([created.id]);
    } finally {
      await draining.close();
      await other.close();
      for (const store of stores) await store.close();
      await place.cleanup();
    }
  });
});

describe('graceful drain: configuration', () => {
  it('accepts GATEHOUSE_DRAIN_S from 0, defaults to 10, and refuses a negative one', async () => {
    const { loadConfig } = await import('../../src/config.js');
    expect(loadConfig({ env: {} }).drainS).toBe(10);
    expect(loadConfig({ env: { GATEHOUSE_DRAIN_S: '0' } }).drainS).toBe(0);
    expect(() => loadConfig({ env: { GATEHOUSE_DRAIN_S: '-1' } })).toThrow(/GATEHOUSE_DRAIN_S/);
  });
});
