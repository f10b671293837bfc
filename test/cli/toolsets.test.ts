/** `gatehouse toolsets …` and `gatehouse overrides …` against a running gateway, in a real CLI process. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { runCli } from './helpers.js';

describe('gatehouse toolsets|overrides', { timeout: 180_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'fx' } })).statusCode).toBe(
      201,
    );
    expect((await gw.request('POST', '/api/mcp/servers/fx/test')).json().ok).toBe(true);
  });
  afterAll(async () => {
    await upstream?.close();
    await gw?.close();
  });

  it('creates and shows a toolset with each tool’s state', async () => {
    const created = await runCli(
      ['toolsets', 'create', 'maths', '--tool', 'fx/add', '--tool', 'fx/gone', '--description', 'Sums.'],
      env,
    );
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toContain('maths  /mcp/t/maths  (1 of 2 available)');
    expect(created.stdout).toMatch(/fx\/add\tfx__add\tavailable\tgated/);
    expect(created.stdout).toMatch(/fx\/gone\t-\tmissing\t-/);
    const bad = await runCli(['toolsets', 'create', 'other', '--tool', 'no-slash'], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('server/tool');
  });

  it('sets an override with a fixed argument, refuses one the schema does not allow, and removes it', async () => {
    const set = await runCli(
      ['overrides', 'set', 'fx', 'add', '--display-name', 'plus', '--fix', 'b=2', '--annotation', 'readOnlyHint=true'],
      env,
    );
    expect(set).toMatchObject({ code: 0, stderr: '' });
    expect(set.stdout).toContain('fx/add  active');
    expect(set.stdout).toContain('name:        plus  [aggregated fx__add]');
    expect(set.stdout).toContain('fixed:       {"b":2}');
    const refused = await runCli(['overrides', 'set', 'fx', 'add', '--fix', 'b=two'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^override\.invalid:/);
    const removed = await runCli(['overrides', 'delete', 'fx', 'add'], env);
    expect(removed).toMatchObject({ code: 0, stdout: 'deleted the override of fx/add\n' });
  });
});
