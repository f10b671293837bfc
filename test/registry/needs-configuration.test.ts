import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const stdio = (name: string, extra: Record<string, unknown>) => ({
  name,
  title: name,
  description: `The ${name} server.`,
  category: 'files',
  transport: 'stdio',
  command: 'npx',
  args: ['-y', `@example/${name}`],
  ...extra,
});

describe('presets that need configuration', { timeout: 60_000 }, () => {
  let dir: string;
  let gw: TestGateway;
  let upstream: McpFixture;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-needs-config-'));
    const catalog = join(dir, 'catalog.json');
    writeFileSync(
      catalog,
      JSON.stringify({
        version: 1,
        servers: [
          stdio('io.example/slack', { envRequired: ['SLACK_BOT_TOKEN', 'SLACK_TEAM_ID'] }),
          stdio('io.example/files', { argsRequired: 'one or more folders it may use' }),
          stdio('io.example/plain', {}),
        ],
      }),
    );
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_CATALOG: catalog });
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
  });
  afterAll(async () => {
    await upstream?.close();
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const server = async (id: string) => (await gw.request('GET', `/api/mcp/servers/${id}`)).json();

  it('install without what they need as unknown with needs_configuration, and are not started by a test', async () => {
    const slack = await gw.request('POST', '/api/mcp/install', { body: { preset: 'io.example/slack' } });
    expect(slack.statusCode).toBe(201);
    expect(slack.json().installed).toMatchObject({
      id: 'slack',
      status: 'unknown',
      lastError: 'needs_configuration: Needs configuration: env SLACK_BOT_TOKEN, SLACK_TEAM_ID.',
    });
    const tested = await gw.request('POST', '/api/mcp/servers/slack/test');
    expect(tested.statusCode).toBe(409);
    expect(tested.json().error).toMatchObject({ code: 'needs_configuration' });

    // Given later: the server is no longer held back.
    await gw.request('PATCH', '/api/mcp/servers/slack/config', { body: { env: { SLACK_BOT_TOKEN: 'xoxb-1' } } });
    expect((await server('slack')).lastError).toBe('needs_configuration: Needs configuration: env SLACK_TEAM_ID.');
    await gw.request('PATCH', '/api/mcp/servers/slack/config', { body: { env: { SLACK_TEAM_ID: 'T1' } } });
    expect(await server('slack')).toMatchObject({ status: 'unknown', lastError: null });

    const files = (await gw.request('POST', '/api/mcp/install', { body: { preset: 'io.example/files' } })).json();
    expect(files.installed.lastError).toBe(
      'needs_configuration: Needs configuration: arguments: one or more folders it may use.',
    );
  });

  it('install configured when the install gives env (sealed) and extra arguments', async () => {
    const answer = await gw.request('POST', '/api/mcp/install', {
      body: { preset: 'io.example/files', id: 'files2', args: ['/srv/a', '/srv/b'] },
    });
    expect(answer.json().installed).toMatchObject({
      args: ['-y', '@example/io.example/files', '/srv/a', '/srv/b'],
      lastError: null,
    });
    const slack = await gw.request('POST', '/api/mcp/install', {
      body: { preset: 'io.example/slack', id: 'slack2', env: { SLACK_BOT_TOKEN: 'xoxb-2', SLACK_TEAM_ID: 'T2' } },
    });
    expect(slack.json().installed).toMatchObject({
      env: { SLACK_BOT_TOKEN: { set: true }, SLACK_TEAM_ID: { set: true } },
      lastError: null,
    });
    const stray = await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, args: ['x'] } });
    expect(stray.statusCode).toBe(400);
  });

  it('the catalog marks what is installed', async () => {
    const { items } = (await gw.request('GET', '/api/mcp/catalog')).json() as {
      items: Array<{ name: string; installed: boolean; installedAs?: string }>;
    };
    expect(items.map((i) => [i.name, i.installed, i.installedAs])).toEqual([
      ['io.example/slack', true, 'slack'],
      ['io.example/files', true, 'files'],
      ['io.example/plain', false, undefined],
    ]);
    expect((await gw.request('GET', '/api/mcp/catalog/io.example/plain')).json()).toMatchObject({ installed: false });
  });

  it('a disabled server is unknown and disabled, whatever its last handshake said', async () => {
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'web' } });
    expect((await gw.request('POST', '/api/mcp/servers/web/test')).json()).toMatchObject({ ok: true });
    expect(await server('web')).toMatchObject({ status: 'connected', state: 'reachable' });
    await gw.request('PATCH', '/api/mcp/servers/web/config', { body: { enabled: false } });
    expect(await server('web')).toMatchObject({ status: 'unknown', state: 'disabled' });
    const slack = await server('slack'); // a stdio server
    await gw.request('PATCH', '/api/mcp/servers/slack/config', { body: { enabled: false } });
    expect(slack.state).not.toBe('disabled');
    expect(await server('slack')).toMatchObject({ status: 'unknown', state: 'disabled' });
  });
});
