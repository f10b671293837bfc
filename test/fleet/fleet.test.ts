/**
 * A fleet: three real gateway processes on one PostgreSQL behind a real HAProxy (round-robin, health
 * checks on `/readyz`), every port chosen at run time. Through the balancer: 2025-era sessions (the SDK
 * v1 client) and 2026-07-28 clients (SDK v2) complete every call while their requests spread over the
 * replicas; a 2025-era upstream's asks reach 2026-07-28 agents in rounds that land on any replica; every
 * replica's event stream receives every event written concurrently by all three; a
 * token's rate limit holds for the fleet; a `kill -9` of a replica mid-session loses no session; a
 * rolling restart under steady load fails no call; an upstream's change is heard by one replica and
 * refreshed once.
 *
 * Skipped, saying why, when HAProxy (`/usr/sbin/haproxy`, Debian package `haproxy`) or PostgreSQL is
 * absent; CI installs and starts both (`.ci/run`).
 */
import { type ChildProcess, type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Client as ModernClient } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startLegacyServer, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, TEST_ADMIN_TOKEN, TEST_SECRET_KEY } from '../helpers/gateway.js';
import { NODE_TS } from '../helpers/processes.js';
import { POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

const HAPROXY = '/usr/sbin/haproxy';
const HAVE_HAPROXY = existsSync(HAPROXY);
const GATEWAY = new URL('../helpers/gateway-process.ts', import.meta.url).pathname;
const REPLICAS = 3;
/** Seconds a replica keeps serving after SIGTERM while `/readyz` says 503 (the balancer moves off it). */
const DRAIN_S = 2;
const REPLICA_HEADER = 'x-gatehouse-replica';

if (!HAVE_HAPROXY) process.stderr.write(`\n[gatehouse tests] ${HAPROXY} is missing: SKIPPING the fleet test.\n`);
if (!POSTGRES_AVAILABLE)
  process.stderr.write('\n[gatehouse tests] PostgreSQL is unreachable: SKIPPING the fleet test.\n');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

interface Replica {
  name: string;
  port: number;
  child: ChildProcessWithoutNullStreams;
}

describe.skipIf(!HAVE_HAPROXY || !POSTGRES_AVAILABLE)('a fleet of three replicas behind HAProxy', () => {
  let place: Awaited<ReturnType<typeof postgresTarget.fresh>>;
  let upstream: McpFixture;
  /** A 2025-era upstream whose tool asks its caller during the call (held calls, `held-relay.ts`). */
  let asker: McpFixture;
  let haproxy: ChildProcess | undefined;
  let base = '';
  const replicas: Replica[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  /** A tool no agent calls, whose description the upstream changes (so a refresh has something to record). */
  let notesDescription = 'keeps notes';

  /** Starts (or restarts) replica `name` on `port`; resolves once it listens. */
  function startReplica(name: string, port: number): Promise<Replica> {
    const [node, ...flags] = NODE_TS;
    const child = spawn(node, [...flags, GATEWAY], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        TEST_GATEWAY_PORT: String(port),
        TEST_GATEWAY_LIFETIME_S: '900',
        GATEHOUSE_DATA_DIR: join(place.dataDir, name),
        GATEHOUSE_DATABASE_URL: place.databaseUrl,
        GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
        GATEHOUSE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        GATEHOUSE_ALLOW_HTTP: 'true',
        GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST,
        GATEHOUSE_LOG_LEVEL: 'warn',
        GATEHOUSE_DRAIN_S: String(DRAIN_S),
      },
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    return new Promise((resolve, reject) => {
      let buffer = '';
      const early = (code: number | null, signal: string | null) =>
        reject(new Error(`replica ${name} exited (${code ?? signal}) before listening\n${stderr}`));
      child.once('exit', early);
      child.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        const line = buffer.split('\n').find((l) => l.startsWith('{'));
        if (line) {
          child.off('exit', early);
          const replica = { name, port: Number(new URL((JSON.parse(line) as { url: string }).url).port), child };
          const at = replicas.findIndex((r) => r.name === name);
          if (at >= 0) replicas[at] = replica;
          else replicas.push(replica);
          resolve(replica);
        }
      });
    });
  }

  const api = async (method: string, path: string, body?: unknown, token = TEST_ADMIN_TOKEN) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  /** The replicas the balancer answered from, as it stamps them on every response. */
  function countingFetch(seen: string[]): typeof fetch {
    return async (input, init) => {
      const response = await fetch(input, init);
      const replica = response.headers.get(REPLICA_HEADER);
      if (replica) seen.push(replica);
      return response;
    };
  }

  /** A 2025-era agent: the SDK v1 client (initialize, `Mcp-Session-Id`, GET stream). */
  async function legacyAgent(token: string, seen: string[] = []) {
    const client = new V1Client({ name: 'fleet-legacy', version: '1.0.0' });
    const transport = new V1Transport(new URL(`${base}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: countingFetch(seen),
    });
    await client.connect(transport);
    closers.push(() => client.close());
    return { client, sessionId: transport.sessionId as string, seen };
  }

  async function modernAgent(token: string): Promise<ModernClient> {
    const client = await connectAgent(`${base}/mcp`, token, { era: 'modern' });
    closers.push(() => client.close());
    return client;
  }

  async function echo(client: V1Client | ModernClient, text: string): Promise<boolean> {
    const result = (await client.callTool({ name: 'files__echo', arguments: { text } })) as {
      content: Array<{ text?: string }>;
      isError?: boolean;
    };
    return result.isError !== true && result.content[0]?.text === text;
  }

  async function agentToken(name: string, extra: Record<string, unknown> = {}): Promise<string> {
    const created = await api('POST', '/api/tokens', { role: 'agent', name, rateLimit: 1_000_000, ...extra });
    expect(created.status).toBe(201);
    return created.body.token as string;
  }

  /** Waits until the balancer sends requests to `name` again (its health check passed). */
  async function servedBy(name: string): Promise<void> {
    await eventually(async () => {
      const seen: string[] = [];
      for (let i = 0; i < REPLICAS; i++) {
        const response = await countingFetch(seen)(`${base}/healthz`);
        await response.arrayBuffer();
      }
      expect(seen).toContain(name);
    }, 60_000);
  }

  beforeAll(async () => {
    place = await postgresTarget.fresh();
    upstream = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: ['echo'],
      register: (server) =>
        server.registerTool(
          'notes',
          { description: notesDescription, inputSchema: z.object({ text: z.string() }) },
          async () => ({ content: [{ type: 'text', text: 'noted' }] }),
        ),
    });
    asker = await startLegacyServer({
      host: PUBLIC_TEST_HOST,
      tools: [],
      register: (server) =>
        server.registerTool(
          'ask_name',
          { description: 'Asks the name.', inputSchema: z.object({}) },
          async (_a, ctx) => {
            const answer = await ctx.mcpReq.elicitInput({
              message: 'Your name?',
              requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
            });
            return { content: [{ type: 'text', text: `hello ${String(answer.content?.name)}` }] };
          },
        ),
    });
    // Together: the migrations run once, under their lock.
    await Promise.all(['r1', 'r2', 'r3'].map((name) => startReplica(name, 0)));
    replicas.sort((a, b) => a.name.localeCompare(b.name));
    const front = await freePort();
    const cfg = join(place.dataDir, 'haproxy.cfg');
    writeFileSync(
      cfg,
      [
        'global',
        '  maxconn 2000',
        'defaults',
        '  mode http',
        '  timeout connect 2s',
        '  timeout client 120s',
        '  timeout server 120s',
        // Longer than the gateway's keep-alive (Fastify's 72 s, which it announces to the client): an agent
        // never sends on a connection the balancer is closing as idle.
        '  timeout http-keep-alive 120s',
        // A busy machine may take a while to answer a check: late is not down.
        '  timeout check 5s',
        'frontend fleet',
        `  bind 127.0.0.1:${front}`,
        '  default_backend replicas',
        'backend replicas',
        '  balance roundrobin',
        '  option httpchk GET /readyz',
        '  http-check expect status 200',
        '  retries 3',
        '  option redispatch 1',
        '  retry-on conn-failure empty-response junk-response response-timeout 503',
        `  http-response set-header ${REPLICA_HEADER} %s`,
        '  default-server inter 250ms fall 1 rise 1',
        ...replicas.map((r) => `  server ${r.name} 127.0.0.1:${r.port} check`),
        '',
      ].join('\n'),
    );
    haproxy = spawn(HAPROXY, ['-f', cfg, '-db'], { stdio: ['ignore', 'ignore', 'inherit'] });
    base = `http://127.0.0.1:${front}`;
    for (const r of replicas) await servedBy(r.name);

    expect((await api('POST', '/api/mcp/install', { url: upstream.url, id: 'files' })).status).toBeLessThan(300);
    expect((await api('PATCH', '/api/mcp/servers/files/tools', { mode: 'all', allow: ['echo'] })).status).toBe(200);
    expect((await api('POST', '/api/mcp/servers/files/test')).body.ok).toBe(true);
    expect((await api('POST', '/api/mcp/install', { url: asker.url, id: 'asker' })).status).toBeLessThan(300);
    expect((await api('PATCH', '/api/mcp/servers/asker/tools', { mode: 'all', allow: ['ask_name'] })).status).toBe(200);
    expect((await api('POST', '/api/mcp/servers/asker/test')).body.ok).toBe(true);
  }, 300_000);

  afterAll(async () => {
    await Promise.all(closers.splice(0).map((close) => close().catch(() => {})));
    if (haproxy && haproxy.exitCode === null) {
      haproxy.kill('SIGKILL');
      await exited(haproxy);
    }
    for (const { child } of replicas) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited(child);
    }
    await upstream?.close();
    await asker?.close();
    await place?.cleanup();
  }, 60_000);

  it('completes every call of 2025 sessions and 2026 clients, round-robin over the replicas', async () => {
    const token = await agentToken('fleet-eras');
    const legacy = await legacyAgent(token);
    const modern = await modernAgent(token);
    const results: boolean[] = [];
    for (let i = 0; i < 30; i++) {
      results.push(await echo(legacy.client, `legacy-${i}`));
      results.push(await echo(modern, `modern-${i}`));
    }
    expect(results.filter((ok) => ok)).toHaveLength(60);
    // One session, served by every replica.
    expect(new Set(legacy.seen)).toEqual(new Set(replicas.map((r) => r.name)));
  }, 60_000);

  it('continues held calls whichever replica each round reaches: a 2025 upstream asks 2026 agents', async () => {
    const token = await agentToken('fleet-rounds');
    const client = await connectAgent(`${base}/mcp/s/asker`, token, {
      client: { capabilities: { elicitation: { form: {} } } },
      prepare: (c) =>
        c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Ada' } })),
    });
    closers.push(() => client.close());
    const texts: string[] = [];
    // Each call takes two rounds; round-robin sends the second to another replica than the first.
    for (let i = 0; i < 6; i++) {
      const result = (await client.callTool({ name: 'ask_name', arguments: {} })) as {
        content: Array<{ text?: string }>;
      };
      texts.push(result.content[0]?.text ?? '');
    }
    expect(texts).toEqual(Array(6).fill('hello Ada'));
    // Each call ran once upstream: no round started it over.
    expect(asker.log.count('tools/call')).toBe(6);
  }, 60_000);

  it('delivers every event to every replica’s stream while all three write at once', async () => {
    const token = await agentToken('fleet-events');
    const counts = new Map<string, number>();
    const streams = await Promise.all(
      replicas.map(async (r) => {
        const abort = new AbortController();
        const response = await fetch(`http://127.0.0.1:${r.port}/api/mcp/stream`, {
          headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
          signal: abort.signal,
        });
        const reader = (response.body as ReadableStream<Uint8Array>).getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        const pump = (async () => {
          for (;;) {
            const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
            if (done) return;
            buffer += decoder.decode(value, { stream: true });
            let end = buffer.indexOf('\n\n');
            while (end >= 0) {
              const frame = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              const data = frame.split('\n').find((l) => l.startsWith('data: '));
              if (frame.includes('event: tool.called') && data) {
                const event = JSON.parse(data.slice(6)) as { clientName?: string };
                if (event.clientName === 'fleet-events') counts.set(r.name, (counts.get(r.name) ?? 0) + 1);
              }
              end = buffer.indexOf('\n\n');
            }
          }
        })();
        return { abort, pump };
      }),
    );
    const agents = await Promise.all(Array.from({ length: 6 }, () => modernAgent(token)));
    const CALLS_EACH = 25;
    const done = await Promise.all(
      agents.map(async (agent, a) => {
        let ok = 0;
        for (let i = 0; i < CALLS_EACH; i++) if (await echo(agent, `e-${a}-${i}`)) ok++;
        return ok;
      }),
    );
    const total = agents.length * CALLS_EACH;
    expect(done.reduce((a, b) => a + b, 0)).toBe(total);
    await eventually(() => {
      for (const r of replicas) expect(counts.get(r.name) ?? 0).toBe(total);
    }, 20_000);
    for (const { abort, pump } of streams) {
      abort.abort();
      await pump;
    }
  }, 90_000);

  it('refreshes an upstream once per change: one replica watches it for the fleet', async () => {
    // Each replica refreshes with its own debounce; a refresh that finds the lists as they were is not audited,
    // so count the upstream's subscriptions too: a replica that does not subscribe cannot hear a change.
    const refreshes = async () =>
      (
        (await api('GET', '/api/audit?server=files&limit=200')).body.events as Array<{
          action: string;
          data: Record<string, unknown> | null;
        }>
      ).filter((e) => e.action === 'server.refresh' && e.data?.trigger === 'list_changed');
    // One watcher for the fleet (the replicas contend for the server's lock since the install).
    await eventually(() => expect(upstream.log.count('subscriptions/listen')).toBe(1));
    expect(await refreshes()).toHaveLength(0);
    for (const [i, change] of ['keeps notes <b>and mails them</b>', 'keeps notes for a week'].entries()) {
      notesDescription = change;
      await upstream.toolsChanged();
      // The next change waits for this one's refresh. A second replica's refresh of the same change would follow
      // within its debounce; the next change's refresh comes after the minimum interval between refreshes (5 s).
      await eventually(async () => expect((await refreshes()).length).toBeGreaterThanOrEqual(i + 1), 30_000);
    }
    expect(await refreshes()).toHaveLength(2);
    expect(upstream.log.count('subscriptions/listen')).toBe(1);
  }, 60_000);

  it('holds a token’s rate limit across the fleet', async () => {
    const LIMIT = 30;
    const token = await agentToken('fleet-limited', { rateLimit: LIMIT });
    const agent = await modernAgent(token);
    const windowOf = () => Math.floor(Date.now() / 60_000);
    const startWindow = windowOf();
    let admitted = 0;
    let limited = 0;
    for (let i = 0; i < 2 * LIMIT; i++) {
      const result = (await agent.callTool({ name: 'files__echo', arguments: { text: `l-${i}` } })) as {
        isError?: boolean;
        structuredContent?: { error?: { code?: string } };
      };
      if (!result.isError) admitted++;
      else if (result.structuredContent?.error?.code === 'rate_limited') limited++;
    }
    expect(admitted + limited).toBe(2 * LIMIT);
    // Within one window the fleet admits at most the limit, and refuses at most what the other two
    // replicas leased and did not use (see the error bound in `policy/fleet-limits.ts`; 1-call leases here).
    // The connect's own session opening is no call. A run straddling two windows may see twice the limit.
    const windows = windowOf() - startWindow + 1;
    expect(admitted).toBeLessThanOrEqual(LIMIT * windows);
    if (windows === 1) expect(admitted).toBeGreaterThanOrEqual(LIMIT - 2 * 2);
  }, 60_000);

  it('continues a 2025 session on another replica after a kill -9 of one', async () => {
    const token = await agentToken('fleet-kill');
    const agent = await legacyAgent(token);
    for (let i = 0; i < 6; i++) expect(await echo(agent.client, `before-${i}`)).toBe(true);
    const victim = replicas[1] as Replica;
    expect(agent.seen).toContain(victim.name);
    victim.child.kill('SIGKILL');
    await exited(victim.child);
    const after: boolean[] = [];
    for (let i = 0; i < 12; i++) after.push(await echo(agent.client, `after-${i}`));
    expect(after.every((ok) => ok)).toBe(true);
    // The same session throughout (no new initialize), now served by the two that live.
    expect(agent.client.transport?.sessionId ?? agent.sessionId).toBe(agent.sessionId);
    // The replica comes back at its address for what follows.
    await startReplica(victim.name, victim.port);
    await servedBy(victim.name);
  }, 180_000);

  it('fails no call of a steady load during a rolling restart', async () => {
    const token = await agentToken('fleet-rolling');
    const legacy = await Promise.all([legacyAgent(token), legacyAgent(token)]);
    const modern = await Promise.all([modernAgent(token), modernAgent(token)]);
    let running = true;
    const failures: string[] = [];
    let calls = 0;
    const load = [...legacy.map((l) => l.client), ...modern].map(async (client, w) => {
      for (let i = 0; running; i++) {
        try {
          if (await echo(client, `r-${w}-${i}`)) calls++;
          else failures.push(`r-${w}-${i}: wrong answer`);
        } catch (error) {
          failures.push(`r-${w}-${i}: ${(error as Error).message}`);
        }
      }
    });
    for (const replica of [...replicas]) {
      const before = calls;
      replica.child.kill('SIGTERM');
      await exited(replica.child);
      expect(replica.child.exitCode).toBe(0);
      await startReplica(replica.name, replica.port);
      await servedBy(replica.name);
      // The load kept going meanwhile.
      await eventually(() => expect(calls).toBeGreaterThan(before + 10), 60_000);
    }
    running = false;
    await Promise.all(load);
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThan(30);
  }, 400_000);
});
