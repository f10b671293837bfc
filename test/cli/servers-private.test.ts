import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { runCli } from './helpers.js';

describe('a server on a private address', { timeout: 180_000 }, () => {
  let gw: TestGateway;
  let local: McpFixture;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
    local = await startModernServer({ host: '127.0.0.1', tools: ['echo'] });
  });
  afterAll(async () => {
    await local?.close();
    await gw?.close();
  });

  it('is refused with a message that names the fix, and admitted by servers add --private-network', async () => {
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: local.url, id: 'plain' } })).statusCode).toBe(
      201,
    );
    const [refused, added] = await Promise.all([
      runCli(['servers', 'test', 'plain', '--json'], env),
      runCli(['servers', 'add', local.url, '--id', 'local', '--private-network'], env),
    ]);
    expect(refused.code).toBe(1);
    const { error } = JSON.parse(refused.stdout) as { error: { code: string; message: string } };
    expect(error.code).toBe('private_network_blocked');
    expect(error.message).toContain('`gatehouse servers add <url> --private-network`');
    expect(error.message).toContain('PATCH /api/mcp/servers/plain/config {"privateNetwork": true}');

    expect(added.code, added.stderr).toBe(0);
    const tested = await runCli(['servers', 'test', 'local'], env);
    expect(tested.code, tested.stderr).toBe(0);
    expect(tested.stdout).toMatch(/^ok {7}yes\n/);
    expect((await gw.request('GET', '/api/mcp/servers/local')).json()).toMatchObject({ privateNetwork: true });

    // Widening what a server may reach is an admin's call.
    const operator = (await gw.request('POST', '/api/tokens', { body: { name: 'op', role: 'operator' } })).json() as {
      token: string;
    };
    const byOperator = await gw.request('POST', '/api/mcp/install', {
      token: operator.token,
      body: { url: local.url, id: 'sneaky', privateNetwork: true },
    });
    expect(byOperator.statusCode).toBe(403);
  });

  it('servers add --preset takes what the preset needs as --env/--arg, and says what is missing', async () => {
    const preset = 'io.github.modelcontextprotocol/filesystem';
    const [configured, bare] = await Promise.all([
      runCli(['servers', 'add', '--preset', preset, '--id', 'fs', '--arg', '/srv/a', '--json'], env),
      runCli(['servers', 'add', '--preset', preset, '--id', 'fs-bare'], env),
    ]);
    expect(configured.code, configured.stderr).toBe(0);
    expect(JSON.parse(configured.stdout).installed).toMatchObject({
      args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv/a'],
      lastError: null,
    });
    expect(bare.code, bare.stderr).toBe(0);
    expect(bare.stdout).toBe(
      'installed fs-bare (stdio npx -y @modelcontextprotocol/server-filesystem), status unknown\n',
    );
    expect(bare.stderr).toBe(
      'gatehouse: needs_configuration: Needs configuration: arguments: one or more folders it may use (absolute paths).\n' +
        'Give it with --env NAME=VALUE / --arg VALUE when adding, or PATCH /api/mcp/servers/fs-bare/config.\n',
    );
  });
});
