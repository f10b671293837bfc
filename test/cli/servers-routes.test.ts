/**
 * Stumble 5 of day one: the CLI could not configure a server after adding it. Every route of one server
 * is a `gatehouse servers` command generated from its declaration; these run the real CLI against a
 * listening gateway and read the change back over REST.
 */
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientOptions, RestClient } from '../../src/cli/rest-client.js';
import { addRouteCommands, commandNameOf, serverRouteTools } from '../../src/cli/route-commands.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { runCli } from './helpers.js';

describe('gatehouse servers config|policy|expose|enable|disable|auth, generated from the routes', {
  timeout: 180_000,
}, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let env: Record<string, string>;
  const server = async (id: string) => (await gw.request('GET', `/api/mcp/servers/${id}`)).json();

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    for (const id of ['cfg', 'pol', 'exp', 'onoff', 'au']) {
      const installed = await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id } });
      expect(installed.statusCode, installed.body).toBe(201);
    }
  });
  afterAll(async () => {
    await upstream?.close();
    await gw?.close();
  });

  it('reaches every route of one server that the gateway serves', () => {
    const served = gw.gateway.app.routeTable
      .flatMap((r) => (r.url.startsWith('/api/mcp/servers/:id') && r.declaration ? [r.declaration.mcp] : []))
      .flatMap((mcp) => ('tool' in mcp ? [mcp.tool] : []));
    const distinct = [...new Set(served)].sort();
    expect(distinct.length).toBeGreaterThan(8);
    expect(
      serverRouteTools()
        .map((t) => t.name)
        .sort(),
    ).toEqual(distinct);
    expect(commandNameOf('mcp_server_config_write')).toBe('config');
    expect(commandNameOf('mcp_server_tools_write')).toBe('policy');
    expect(commandNameOf('mcp_server_exposure_write')).toBe('expose');
  });

  /** The generated commands in this process, over real HTTP, as `gatehouse servers …` builds them. */
  const run = async (...args: string[]): Promise<unknown> => {
    const servers = new Command('servers').exitOverride();
    let printed: unknown;
    addRouteCommands(
      servers,
      serverRouteTools(),
      new Set(),
      (c) => c.option('--url <url>').option('--token <token>').option('--timeout-ms <ms>').option('--json'),
      {
        client: () => new RestClient(clientOptions({}, env)),
        print: (value) => {
          printed = value;
        },
      },
    );
    await servers.parseAsync(args, { from: 'user' });
    return printed;
  };
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => expect.unreachable('accepted'),
      (error: Error & { code?: string }) => ({ code: error.code, message: error.message }),
    );

  it('changes config, policy, exposure, enabled and auth; bad flags get a clear error', async () => {
    const config = await run('config', 'cfg', '--trust-new-tools', 'true', '--headers', 'X-Team=blue');
    // The header's value is sealed: never echoed.
    expect(JSON.stringify(config)).not.toContain('blue');
    expect(await server('cfg')).toMatchObject({ trustNewTools: true, headers: { 'X-Team': { set: true } } });

    const policy = (await run('policy', 'pol', '--default-tier', 'allow', '--blocked', 'add')) as {
      server: { toolPolicy: unknown };
    };
    expect(policy.server.toolPolicy).toMatchObject({ defaultTier: 'allow', blocked: ['add'] });
    await run('expose', 'exp', '--groups', 'ops', '--groups', 'default');
    expect((await server('exp')).exposure).toEqual(['ops', 'default']);
    await run('disable', 'onoff');
    expect((await server('onoff')).enabled).toBe(false);
    await run('enable', 'onoff');
    expect((await server('onoff')).enabled).toBe(true);
    await run('auth', 'au', 'bearer', '--token-env', 'MCP_SECRET_AU_TOKEN');
    expect((await server('au')).auth).toEqual({ type: 'bearer', token: { env: 'MCP_SECRET_AU_TOKEN' } });
    await run('config', 'cfg', '--body', '{"lazyStart": true}', '--headers', 'X-Team=null');
    expect((await server('cfg')).headers).toEqual({});
    const logs = (await run('logs', 'cfg', '--limit', '2')) as { server: string; events: unknown[] };
    expect(logs.server).toBe('cfg');
    expect(logs.events).toHaveLength(2);

    expect(await refusal(run('config', 'cfg', '--enabled', 'maybe'))).toEqual({
      code: 'validation_error',
      message: '--enabled takes true or false, not "maybe".',
    });
    expect(await refusal(run('auth', 'au', 'bearer'))).toEqual({
      code: 'validation_error',
      message: 'bearer needs --token-env <NAME> or --token-stdin.',
    });
    // What the route's own schema refuses comes back typed from the gateway.
    expect(await refusal(run('config', 'cfg', '--idle-shutdown-s', '-5'))).toMatchObject({ code: 'validation_error' });
    expect(await refusal(run('config', 'nope', '--enabled', 'false'))).toMatchObject({ code: 'mcp.not_found' });
  });

  it('is wired into the real CLI: `servers --help` lists them and `servers disable` runs', async () => {
    const [help, disabled] = await Promise.all([
      runCli(['servers', '--help'], env),
      runCli(['servers', 'disable', 'exp'], env),
    ]);
    for (const name of ['config', 'policy', 'expose', 'enable', 'disable', 'auth', 'logs', 'process', 'get']) {
      expect(help.stdout).toMatch(new RegExp(`\\n {2}${name} \\[options\\]`));
    }
    expect(disabled, disabled.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(disabled.stdout).server).toMatchObject({ id: 'exp', enabled: false });
  });
});
