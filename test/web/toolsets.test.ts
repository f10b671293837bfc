/**
 * The dashboard's toolsets and overrides (issue 22), in Chromium against a real `gatehouse serve`: the
 * Toolsets screen shows each entry's state (a gated tool, a tool that is gone), creates a toolset from
 * `server/tool` lines; the server drawer's tool list sets an override (display name, fixed argument).
 * Settings: an agent token's tool view is chosen at creation and changed in the list (a toolset among
 * the choices), and the platform default `hub.toolView` is a picker too.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanUp, newMarker } from '../fixtures/stdio/index.js';
import { PLAIN_SERVER } from '../supervisor/helpers.js';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: toolsets and overrides', () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  const marker = newMarker();
  const errors: string[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe();
    const installed = await serve.rest('POST', '/api/mcp/install', {
      manifest: {
        id: 'plain',
        name: 'plain',
        transport: 'stdio',
        command: process.execPath,
        args: [PLAIN_SERVER, `--gatehouse-test-marker=${marker}`],
      },
    });
    expect(installed.status, JSON.stringify(installed.body)).toBe(201);
    const tested = await serve.rest<{ ok: boolean }>('POST', '/api/mcp/servers/plain/test');
    expect(tested.body.ok, JSON.stringify(tested.body)).toBe(true);
    const created = await serve.rest('POST', '/api/toolsets', {
      name: 'pair',
      tools: [
        { server: 'plain', tool: 'add' },
        { server: 'plain', tool: 'vanished' },
      ],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, errors));
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
    expect(await cleanUp([], [marker])).toEqual({});
  });

  it('shows toolset entries with their state, creates a toolset, and sets an override from the drawer', async () => {
    await page.goto(`${serve.base}/#/servers`);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Servers' }).waitFor();

    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Toolsets' }).click();
    await page.getByRole('heading', { level: 1, name: 'Toolsets' }).waitFor();
    const pair = page.locator('[data-toolset="pair"]');
    await pair.waitFor();
    expect(await pair.locator('[data-entry="plain/add"]').getByTestId('entry-state').textContent()).toBe('gated');
    expect(await pair.locator('[data-entry="plain/vanished"]').getByTestId('entry-state').textContent()).toBe(
      'missing',
    );
    expect(await pair.getByText('1 of 2 available').count()).toBe(1);

    await page.getByRole('button', { name: 'New toolset' }).click();
    const form = page.getByRole('form', { name: 'New toolset' });
    await form.getByLabel(/^Name/).fill('solo');
    await form.getByLabel('Tools, one', { exact: false }).fill('plain/echo\n');
    await form.getByRole('button', { name: 'Create toolset' }).click();
    await page.locator('[data-toolset="solo"] [data-entry="plain/echo"]').waitFor();
    const solo = await serve.rest<{ tools: { state: string }[] }>('GET', '/api/toolsets/solo');
    expect(solo.body.tools).toMatchObject([{ state: 'available' }]);

    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Servers' }).click();
    await page.locator('[data-server="plain"]').getByRole('button', { name: 'plain' }).click();
    const drawer = page.getByRole('dialog');
    await drawer.getByRole('button', { name: 'Override add' }).click();
    const editor = drawer.getByRole('form', { name: 'Override of add' });
    await editor.getByLabel('Display name', { exact: false }).fill('sum');
    await editor.getByLabel('Fixed arguments', { exact: false }).fill('{"b": 1}');
    await editor.getByRole('button', { name: 'Save override' }).click();
    const state = drawer.locator('[data-tool="add"]').getByTestId('override-state');
    await state.getByText('override as sum').waitFor();
    const override = await serve.rest<{ state: string; override: unknown }>(
      'GET',
      '/api/mcp/servers/plain/overrides/add',
    );
    expect(override.body).toMatchObject({
      state: 'active',
      override: { displayName: 'sum', fixedArguments: { b: 1 } },
    });
    expect(errors).toEqual([]);
  });

  it("picks an agent token's tool view at creation, changes it in the list, and sets the platform default", async () => {
    // The server drawer of the test before may still be open.
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Settings' }).click();
    await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
    const form = page.getByRole('form', { name: 'Create a token' });
    await form.getByLabel('Name').fill('finder');
    const picker = form.getByLabel('Tool view');
    // The toolsets are among the choices; the token's own default is the platform's, shown as what it is now.
    await picker.locator('option[value="toolset:pair"]').waitFor({ state: 'attached' });
    expect(await picker.locator('option[value=""]').textContent()).toBe('platform default (all)');
    await picker.selectOption('search');
    await form.getByRole('button', { name: 'Create token' }).click();
    await page.getByTestId('new-token').waitFor();
    const tokenNamed = async (name: string) => {
      const list = await serve.rest<{ tokens: Array<{ id: string; name: string; toolView: string | null }> }>(
        'GET',
        '/api/tokens?limit=500',
      );
      return list.body.tokens.find((t) => t.name === name);
    };
    expect(await tokenNamed('finder')).toMatchObject({ toolView: 'search' });

    const row = page.locator('[data-token="finder"]');
    const rowPicker = row.getByLabel('Tool view of finder');
    expect(await rowPicker.inputValue()).toBe('search');
    await rowPicker.selectOption('toolset:pair');
    await page.getByText('Tool view of finder: toolset:pair.').waitFor();
    expect(await tokenNamed('finder')).toMatchObject({ toolView: 'toolset:pair' });
    await rowPicker.selectOption('');
    await page.getByText('Tool view of finder: platform default (all).').waitFor();
    expect(await tokenNamed('finder')).toMatchObject({ toolView: null });

    // The platform default: a picker in the settings form, saved like any setting.
    const platform = page.getByRole('form', { name: 'Surfaces and scopes' });
    await platform.getByLabel('hub.toolView').selectOption('search');
    await platform.getByRole('button', { name: 'Save 1 change' }).click();
    await platform.getByText('Saved: hub.toolView.', { exact: false }).waitFor();
    const settings = await serve.rest<{ settings: Record<string, unknown> }>('GET', '/api/settings');
    expect(settings.body.settings['hub.toolView']).toBe('search');
    // The token list follows: its "platform default" now says what it resolves to.
    await rowPicker
      .locator('option[value=""]', { hasText: 'platform default (search)' })
      .waitFor({ state: 'attached' });
    expect(errors).toEqual([]);
  });
});
