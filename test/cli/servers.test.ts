import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { runCli } from './helpers.js';

// Each CLI run is a fresh Node process compiling TypeScript: independent runs go in parallel.
describe('gatehouse servers list|add|test|remove against a listening gateway', { timeout: 180_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-cli-'));
  });
  afterAll(async () => {
    await upstream?.close();
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('adds, lists, tests and removes a server', async () => {
    const added = await runCli(['servers', 'add', upstream.url, '--id', 'fx'], env);
    expect(added).toMatchObject({ code: 0, stderr: '' });
    expect(added.stdout).toBe(
      `installed fx (streamable-http ${upstream.url})\ncheck it with: gatehouse servers test fx\n`,
    );

    const manifest = join(dir, 'manifest.yaml');
    writeFileSync(
      manifest,
      [
        'name: From a manifest',
        'transport: streamable-http',
        `url: ${upstream.url}`,
        'headers: {X-Key: {env: MCP_SECRET_CLI_KEY}}',
      ].join('\n'),
    );
    const [tested, fromManifest] = await Promise.all([
      runCli(['servers', 'test', 'fx'], env),
      runCli(['servers', 'add', '--manifest', manifest, '--id', 'manifested', '--json'], env),
    ]);
    expect(tested).toMatchObject({ code: 0, stderr: '' });
    expect(tested.stdout).toMatch(
      /^ok {7}yes\nlatency {2}\d+ ms\ntools {4}2: echo \(gated\), add \(gated\)\nerror {4}-\n$/,
    );
    expect(fromManifest.code).toBe(0);
    expect(JSON.parse(fromManifest.stdout).installed).toMatchObject({
      id: 'manifested',
      headers: { 'X-Key': { env: 'MCP_SECRET_CLI_KEY' } },
    });

    const [table, json] = await Promise.all([
      runCli(['servers', 'list'], env),
      runCli(['servers', 'list', '--json', '--url', env.GATEHOUSE_URL as string], {
        GATEHOUSE_TOKEN: TEST_ADMIN_TOKEN,
      }),
    ]);
    expect(table.code).toBe(0);
    // GATEHOUSE_TOKEN (the agent's variable in client configs) is still read for the CLI, with a warning.
    expect(json).toMatchObject({
      code: 0,
      stderr:
        'gatehouse: warning: reading the CLI token from GATEHOUSE_TOKEN; set GATEHOUSE_CLI_TOKEN instead ' +
        '(GATEHOUSE_TOKEN is the agent token of client configs).\n',
    });
    expect(table.stdout.split('\n')).toEqual([
      'ID          STATUS     STATE      TRANSPORT        TOOLS',
      'fx          connected  reachable  streamable-http  2',
      'manifested  unknown    reachable  streamable-http  0',
      '',
    ]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      count: 2,
      total: 2,
      servers: [{ id: 'fx' }, { id: 'manifested' }],
    });

    const removed = await runCli(['servers', 'remove', 'fx'], env);
    expect(removed).toMatchObject({ code: 0, stdout: 'removed fx\n' });
    expect((await gw.request('GET', '/api/mcp/servers')).json().servers.map((s: { id: string }) => s.id)).toEqual([
      'manifested',
    ]);
  });

  it('prints typed errors as code: message and exits non-zero', async () => {
    const closed = await startTestGateway(sqliteTarget);
    await closed.gateway.app.listen({ host: '127.0.0.1', port: 0 });
    const deadPort = (closed.gateway.app.server.address() as AddressInfo).port;
    await closed.close();

    const [missing, badToken, invalid, noToken, twoSources, unreachable, failing] = await Promise.all([
      runCli(['servers', 'remove', 'nope'], env),
      runCli(['servers', 'list'], { ...env, GATEHOUSE_CLI_TOKEN: 'gh_not-a-real-token-0123456789' }),
      runCli(['servers', 'add', upstream.url, '--id', 'Bad_Id'], env),
      runCli(['servers', 'list'], { GATEHOUSE_URL: env.GATEHOUSE_URL as string }),
      runCli(['servers', 'add', upstream.url, '--preset', 'x'], env),
      runCli(['servers', 'list', '--url', `http://127.0.0.1:${deadPort}`], env),
      (async () => {
        await gw.request('POST', '/api/mcp/install', {
          body: { url: `http://${PUBLIC_TEST_HOST}:${deadPort}/mcp`, id: 'gone' },
        });
        return runCli(['servers', 'test', 'gone'], env);
      })(),
    ]);
    expect(missing).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'gatehouse: mcp.not_found: No MCP server "nope" is installed.\n',
    });
    expect(badToken).toMatchObject({ code: 1, stderr: expect.stringMatching(/^gatehouse: unauthorized: /) });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^gatehouse: validation_error: .*\n {2}- body\.id: a server id is/);
    expect(noToken).toMatchObject({
      code: 2,
      stderr: 'gatehouse: No token: set GATEHOUSE_CLI_TOKEN (or pass --token).\n',
    });
    expect(twoSources).toMatchObject({
      code: 2,
      stderr: 'gatehouse: Give exactly one of <source>, --preset or --manifest.\n',
    });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toBe(
      `gatehouse: upstream_unreachable: Cannot reach the gateway at http://127.0.0.1:${deadPort} (ECONNREFUSED).\n`,
    );
    // A failed handshake is answered (200) but fails the command.
    expect(failing.code).toBe(1);
    expect(failing.stdout).toMatch(/^ok {7}no\n[\s\S]*error {4}upstream_unreachable: /);
  });
});
