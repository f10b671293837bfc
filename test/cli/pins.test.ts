/** `gatehouse servers pins` and `pin-approve`: the operator approves the definition it reviewed, by its hash. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { runCli } from './helpers.js';

describe('gatehouse servers pins|pin-approve', { timeout: 180_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
    // Pinned with `echo` only; `add` appears at the next handshake and waits for review.
    const first = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: first.url, id: 'fx' } })).statusCode).toBe(201);
    expect((await gw.request('POST', '/api/mcp/servers/fx/test')).json().ok).toBe(true);
    await first.close();
    upstream = await startModernServer({
      host: PUBLIC_TEST_HOST,
      port: Number(new URL(first.url).port),
      tools: ['echo', 'add'],
    });
    expect((await gw.request('POST', '/api/mcp/servers/fx/test')).json().verdicts.add).toBe('quarantined');
  });
  afterAll(async () => {
    await upstream?.close();
    await gw?.close();
  });

  it('lists the pending hash, refuses another hash, and pins the reviewed one', async () => {
    const listed = await runCli(['servers', 'pins', 'fx'], env);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    const line = listed.stdout.split('\n').find((l) => l.startsWith('add '));
    const hash = line?.match(/[0-9a-f]{64}/)?.[0];
    expect(line).toMatch(/quarantined\s+new/);
    expect(hash).toBeDefined();

    const stale = await runCli(['servers', 'pin-approve', 'fx', 'add', 'f'.repeat(64)], env);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/pin\.changed/);

    const approved = await runCli(['servers', 'pin-approve', 'fx', 'add', hash as string], env);
    expect(approved).toMatchObject({ code: 0, stderr: '' });
    expect(approved.stdout).toMatch(/^pinned add on fx/);
    const pins = (await gw.request('GET', '/api/mcp/servers/fx/pins')).json().pins;
    expect(pins.find((p: { tool: string }) => p.tool === 'add')).toMatchObject({ state: 'pinned', pinHash: hash });
  });
});
