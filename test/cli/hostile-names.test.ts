/**
 * Names and messages an upstream chose reach the operator's terminal escaped: a tool named with escape codes
 * (clear the screen, set the title, fake a row with a carriage return) printed raw by `servers pins` and
 * `servers test` could make a quarantined tool look pinned.
 */
import type { McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { runCli } from './helpers.js';

const HOSTILE = 'ok\u001b[2J\u001b]0;pwned\u0007\u001b[31mFAKE\u001b[0m\r\nall good';

describe('gatehouse servers output', { timeout: 180_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
    upstream = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: ['echo'],
      register: (server: McpServer) => {
        server.registerTool(HOSTILE, { inputSchema: z.object({}) }, async () => ({ content: [] }));
      },
    });
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'evil' } })).statusCode).toBe(
      201,
    );
  });
  afterAll(async () => {
    await upstream?.close();
    await gw?.close();
  });

  it('escapes control characters in `servers test` and `servers pins`', async () => {
    const tested = await runCli(['servers', 'test', 'evil'], env);
    const pins = await runCli(['servers', 'pins', 'evil'], env);
    for (const run of [tested, pins]) {
      expect(run.code).toBe(0);
      // No ESC, BEL or CR reaches the terminal; the name is still there, escaped.
      for (const control of ['\u001b', '\u0007', '\r']) expect(run.stdout).not.toContain(control);
      expect(run.stdout).toContain('ok\\u{1b}[2J');
    }
    // One line per pin: the name's CR LF is escaped, not a row of its own.
    expect(pins.stdout.split('\n').filter((line) => line.includes('all good'))).toHaveLength(1);
  });
});
