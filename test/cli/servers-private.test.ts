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
});
