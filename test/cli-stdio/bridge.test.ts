/**
 * `gatehouse stdio` as a real process between an SDK stdio client and a real gateway listening on loopback, with an
 * SDK upstream on 127.0.0.2 (public through the egress guard's test seam). Both client eras, progress on the wire,
 * cancellation, a session the hub forgot, a refused token, stdout carrying protocol only, and a clean exit when stdin
 * closes.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { gatehouse } from '../cli-connect/run.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { NODE_TS } from '../helpers/processes.js';
import { sqliteTarget } from '../helpers/stores.js';

const ENTRY = fileURLToPath(new URL('./bridge-entry.ts', import.meta.url));

type Era = 'legacy' | 'modern';

interface Bridged {
  client: Client;
  transport: StdioClientTransport;
  stderr: () => string;
  /** Errors the client transport reported (a non-protocol line on stdout would be one). */
  transportErrors: Error[];
  /** Resolves with the bridge's exit code once it has exited. */
  exited: Promise<number | null>;
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('gatehouse stdio', { timeout: 90_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let hubUrl: string;
  let agentToken: string;
  const open: Bridged[] = [];

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'progress', 'slow'] });
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'fix' } })).statusCode).toBe(
      201,
    );
    await gw.request('PATCH', '/api/mcp/servers/fix/tools', { body: { allow: ['echo', 'progress', 'slow'] } });
    expect((await gw.request('POST', '/api/mcp/servers/fix/test')).json().ok).toBe(true);
    agentToken = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'desktop' } })).json().token;
    hubUrl = `${await gw.listen()}/mcp`;
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((b) => b.client.close().catch(() => {})));
    await upstream?.close();
    await gw?.close();
  });

  async function bridge(era: Era, token: string | undefined = agentToken, url = hubUrl): Promise<Bridged> {
    const [node, ...flags] = NODE_TS;
    const transport = new StdioClientTransport({
      command: node,
      args: [...flags, ENTRY, 'stdio', '--url', url],
      env: {
        PATH: process.env.PATH ?? '',
        NODE_ENV: 'test',
        ...(token === undefined ? {} : { GATEHOUSE_TOKEN: token }),
      },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const transportErrors: Error[] = [];
    const client = new Client(
      { name: `bridge-test-${era}`, version: '1.0.0' },
      era === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {},
    );
    client.onerror = (error) => transportErrors.push(error);
    const bridged: Bridged = {
      client,
      transport,
      stderr: () => stderr,
      transportErrors,
      exited: new Promise((resolve) => {
        const watch = setInterval(() => {
          const child = (transport as unknown as { _process?: import('node:child_process').ChildProcess })._process;
          if (child) {
            clearInterval(watch);
            if (child.exitCode !== null) resolve(child.exitCode);
            else child.once('exit', (code) => resolve(code));
          }
        }, 5);
      }),
    };
    open.push(bridged);
    await client.connect(transport);
    return bridged;
  }

  for (const era of ['legacy', 'modern'] as const) {
    it(`relays a ${era} client to the hub: list and call`, async () => {
      const { client, transportErrors } = await bridge(era);
      expect(client.getProtocolEra()).toBe(era);
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['fix__echo', 'fix__progress', 'gatehouse__approval_status']));

      const echoed = await client.callTool({ name: 'fix__echo', arguments: { text: 'through the bridge' } });
      expect(echoed.content).toEqual([{ type: 'text', text: 'through the bridge' }]);

      // An unknown tool is the hub's protocol error, relayed as it is.
      await expect(client.callTool({ name: 'fix__nope', arguments: {} })).rejects.toThrow(/not found/i);
      expect(upstream.stats.calls.echo).toBe(1);
      expect(transportErrors).toEqual([]);
    });

    it(`relays the hub's own JSON-RPC error to a ${era} client as itself (a 2026 -32601 comes with HTTP 404)`, async () => {
      const { client, transportErrors } = await bridge(era);
      const unknown = client.request({ method: 'gatehouse/no-such-method', params: {} }, z.object({}));
      await expect(unknown).rejects.toMatchObject({ code: -32601 });
      await expect(unknown).rejects.not.toThrow(/switched off/);
      expect(transportErrors).toEqual([]);
    });

    it(`relays a ${era} client's cancellation to the upstream`, async () => {
      const { client } = await bridge(era);
      const controller = new AbortController();
      const call = client.callTool({ name: 'fix__slow', arguments: { ms: 30_000 } }, { signal: controller.signal });
      await until(() => (upstream.stats.calls.slow ?? 0) === 1);
      controller.abort();
      await expect(call).rejects.toThrow();
      await until(() => upstream.stats.cancelled === 1);
      // The bridge carries on.
      const after = await client.callTool({ name: 'fix__echo', arguments: { text: 'still here' } });
      expect(after.content).toEqual([{ type: 'text', text: 'still here' }]);
    });
  }

  it('relays progress notifications on the wire, in order, before the response', async () => {
    // Raw JSON-RPC lines, as Claude Desktop writes them: what the bridge prints is checked line by line.
    const [node, ...flags] = NODE_TS;
    const child = spawn(node, [...flags, ENTRY, 'stdio', '--url', hubUrl], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', GATEHOUSE_TOKEN: agentToken },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const lines = () =>
      out
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { id?: unknown; method?: string; params?: Record<string, unknown> });
    const send = (message: unknown) => child.stdin.write(`${JSON.stringify(message)}\n`);
    const answered = (id: number) => until(() => lines().some((m) => m.id === id), 15_000);

    send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    await answered(1);
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'fix__progress', arguments: { steps: 3 }, _meta: { progressToken: 'tok-2' } },
    });
    await answered(2);
    const after = lines().slice(1);
    expect(after.map((m) => (m.method === 'notifications/progress' ? m.params?.progress : m.id))).toEqual([1, 2, 3, 2]);
    expect(after[0]).toMatchObject({ params: { progressToken: 'tok-2', total: 3 } });
    expect(after[3]).toMatchObject({ result: { content: [{ type: 'text', text: '3 steps done' }] } });
    child.stdin.end();
    expect(await exited).toBe(0);
  });

  it('runs from the Claude Desktop entry `connect --write` made, launched the way Claude Desktop launches it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-desktop-'));
    try {
      // What `gatehouse` on PATH would be: this test's entry for the bridge.
      const launcher = join(dir, 'gatehouse');
      const [node, ...flags] = NODE_TS;
      writeFileSync(launcher, `#!/bin/sh\nexec ${[node, ...flags, ENTRY].map((a) => `'${a}'`).join(' ')} "$@"\n`, {
        mode: 0o755,
      });
      const config = join(dir, 'claude_desktop_config.json');
      writeFileSync(config, '{\n  "mcpServers": {}\n}\n');
      const wired = await gatehouse([
        'connect',
        '--client',
        'claude-desktop',
        '--url',
        hubUrl.replace(/\/mcp$/, ''),
        '--command',
        launcher,
        '--token-name',
        'claude-desktop',
        '--data-dir',
        gw.dataDir,
        '--write',
        config,
      ]);
      expect(wired.code, wired.stderr).toBe(0);
      const entry = JSON.parse(readFileSync(config, 'utf8')).mcpServers.gatehouse as {
        command: string;
        args: string[];
        env: Record<string, string>;
      };
      const transport = new StdioClientTransport({
        command: entry.command,
        args: entry.args,
        env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...entry.env },
        stderr: 'pipe',
      });
      const client = new Client({ name: 'claude-desktop-like', version: '1.0.0' });
      await client.connect(transport);
      try {
        expect((await client.listTools()).tools.map((t) => t.name)).toContain('fix__echo');
        const result = await client.callTool({ name: 'fix__echo', arguments: { text: 'from the written entry' } });
        expect(result.content).toEqual([{ type: 'text', text: 'from the written entry' }]);
      } finally {
        await client.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits cleanly when stdin closes, ending its hub session', async () => {
    const bridged = await bridge('legacy');
    await bridged.client.listTools();
    expect(gw.gateway.hub.endpoint.sessions.size).toBe(1);
    await bridged.client.close(); // closes the child's stdin
    expect(await bridged.exited).toBe(0);
    await until(() => gw.gateway.hub.endpoint.sessions.size === 0);
    expect(bridged.stderr()).toContain('relaying stdio to');
    expect(bridged.stderr()).not.toContain(agentToken);
  });

  it('opens a new hub session when the hub forgot the old one', async () => {
    const { client, stderr } = await bridge('legacy');
    await client.callTool({ name: 'fix__echo', arguments: { text: 'one' } });
    await gw.gateway.hub.endpoint.sessions.close(); // what an idle expiry or a restart does
    expect(gw.gateway.hub.endpoint.sessions.size).toBe(0);
    const again = await client.callTool({ name: 'fix__echo', arguments: { text: 'two' } });
    expect(again.content).toEqual([{ type: 'text', text: 'two' }]);
    expect(gw.gateway.hub.endpoint.sessions.size).toBe(1);
    expect(stderr()).toContain('opening a new one');
  });

  it('answers the client with the hub’s refusal instead of hanging', async () => {
    await expect(bridge('legacy', 'gh_not-a-real-token-000000000000')).rejects.toThrow(/HTTP 401.*GATEHOUSE_TOKEN/s);
    const refused = open.at(-1) as Bridged;
    expect(refused.stderr()).toContain('HTTP 401');
    expect(refused.stderr()).not.toContain('gh_not-a-real-token');
  });

  it('answers when the hub cannot be reached', async () => {
    await gw.gateway.app.close();
    await expect(bridge('legacy')).rejects.toThrow(/Cannot reach the Gatehouse hub/);
  });

  it('refuses to start without a usable URL', async () => {
    const [node, ...flags] = NODE_TS;
    const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        node,
        [...flags, ENTRY, 'stdio', '--url', 'ftp://x'],
        { env: { PATH: process.env.PATH ?? '' } },
        (e, o, s) => resolve({ code: e ? (e.code as number) : 0, stdout: o, stderr: s }),
      );
    });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/--url must be an http\(s\) URL/);
  });
});

describe('gatehouse stdio: stdout discipline', () => {
  it('writes nothing but JSON-RPC lines to stdout, even when the hub fails', async () => {
    const { startStdioBridge } = await import('../../src/cli/stdio-bridge.js');
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const lines: string[] = [];
    stdout.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
    const logged: string[] = [];
    // Nothing listens on port 9 of 127.0.0.1.
    const bridge = startStdioBridge({
      url: new URL('http://127.0.0.1:9/mcp'),
      stdin,
      stdout,
      log: (l) => logged.push(l),
    });
    stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} })}\n`);
    stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    await until(() => lines.length === 1 && logged.length >= 2);
    stdin.end();
    await bridge.closed;
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      {
        jsonrpc: '2.0',
        id: 7,
        error: { code: -32000, message: expect.stringMatching(/Cannot reach the Gatehouse hub/) },
      },
    ]);
    expect(logged.join('\n')).toMatch(/could not relay notifications\/initialized/);
  });
});
