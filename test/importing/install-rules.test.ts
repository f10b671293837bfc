/**
 * An import is held to the rules REST install and the config file apply: header names and values, env
 * names and the URL scheme. An entry they refuse is refused with the reason, the others are registered,
 * and nothing of a refused value is echoed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planImport } from '../../src/importing/plan.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const CONFIG = JSON.stringify({
  mcpServers: {
    a: { url: 'javascript:alert(1)//' },
    b: { url: 'http://127.0.0.2:9/mcp', headers: { Host: 'x', 'X Y': 'v', 'X-Crlf': 'a\r\nB: 1' } },
    c: { command: 'node', args: ['-e', '1'], env: { 'A=B': 'x', '': 'y', PATH: '/tmp/evil' } },
    host: { url: 'http://127.0.0.2:9/host', headers: { Host: 'x' } },
    crlf: { url: 'http://127.0.0.2:9/crlf', headers: { 'X-Crlf': 'a\r\nB: 1' } },
    good: { url: 'http://127.0.0.2:9/good', headers: { Authorization: 'Bearer t' } },
  },
});

type Item = { name: string; action: string; reason?: string };

describe('import: the install rules', { timeout: 60_000 }, () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('refuses, entry by entry, what REST install refuses, and registers the rest', async () => {
    const answer = await gw.request('POST', '/api/mcp/import', { body: { config: CONFIG } });
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.body).not.toContain('B: 1');
    const byName = Object.fromEntries((answer.json().items as Item[]).map((i) => [i.name, i]));
    expect(byName.a).toMatchObject({ action: 'refused', reason: expect.stringContaining('only http:// and https://') });
    expect(byName.b).toMatchObject({
      action: 'refused',
      reason: expect.stringContaining('not a valid HTTP header name'),
    });
    expect(byName.c).toMatchObject({
      action: 'refused',
      reason: expect.stringContaining('env.A=B: not an environment variable name'),
    });
    expect(byName.host).toMatchObject({
      action: 'refused',
      reason: expect.stringContaining('headers.Host: host is set by the MCP transport'),
    });
    expect(byName.crlf).toMatchObject({ action: 'refused', reason: expect.stringContaining('CR, LF or NUL') });
    expect(byName.good).toMatchObject({ action: 'register' });
    expect(answer.json().registered).toBe(1);
    for (const id of ['a', 'b', 'c', 'host', 'crlf']) {
      expect((await gw.request('GET', `/api/mcp/servers/${id}`)).statusCode).toBe(404);
    }

    // The same Host header through REST install: refused there too.
    const install = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: { name: 'h', transport: 'streamable-http', url: 'http://127.0.0.2:9/h', headers: { Host: 'x' } },
      },
    });
    expect(install.statusCode).toBe(400);
  });

  it('checks the names of values the client fills in, which are to be set later under that name', () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a client's own placeholder syntax, kept literally
    const filled = '${env:X}';
    const [item] = planImport({ x: { command: 'npx', args: ['y'], env: { 'BAD-NAME': filled } } }, [], ['npx']);
    expect(item).toMatchObject({ action: 'refused', reason: expect.stringContaining('env.BAD-NAME') });
  });
});
