/**
 * The dashboard's toolsets and overrides (issue 22), in Chromium against a real `gatehouse serve`: the
 * Toolsets screen shows each entry's state (a gated tool, a tool that is gone), creates a toolset from
 * `server/tool` lines; the server drawer's tool list sets an override (display name, fixed argument).
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
});
