/**
 * The dashboard shows a stdio server's sandbox, in Chromium against a real `gatehouse serve` with the
 * sandbox on (bubblewrap): a server run with the escape hatch (`sandbox.mode: "off"`) carries a
 * "sandbox off" badge in the servers list and in its drawer; a sandboxed one has no badge, and its
 * drawer shows the network mode and, while it runs, the uid that `/process` reports.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBwrap } from '../../src/upstream/stdio/index.js';
import { cleanUp, FIXTURE_READ_ONLY_PATHS, newMarker } from '../fixtures/stdio/index.js';
import { PLAIN_SERVER } from '../supervisor/helpers.js';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

const BWRAP = findBwrap() !== undefined;

describe.skipIf(!CHROMIUM_AVAILABLE || !BWRAP)('dashboard: the stdio sandbox', () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  const markers: string[] = [];
  const errors: string[] = [];

  const install = async (id: string, sandbox: Record<string, unknown>) => {
    const marker = newMarker();
    markers.push(marker);
    const installed = await serve.rest('POST', '/api/mcp/install', {
      manifest: {
        id,
        name: id,
        transport: 'stdio',
        command: process.execPath,
        args: [PLAIN_SERVER, `--gatehouse-test-marker=${marker}`],
        sandbox,
      },
    });
    expect(installed.status, JSON.stringify(installed.body)).toBe(201);
  };

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe({ env: { GATEHOUSE_STDIO_SANDBOX: 'on' } });
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, errors));
  }, 90_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
    expect(await cleanUp([], markers)).toEqual({});
  });

  it('shows "sandbox off" in the list and the drawer; a sandboxed server its network and uid', async () => {
    await install('boxed', { readOnlyPaths: FIXTURE_READ_ONLY_PATHS, network: 'none' });
    await install('unboxed', { mode: 'off' });
    const started = await serve.rest<{ process: { sandboxed: boolean; sandbox: { uid: number | null } } }>(
      'POST',
      '/api/mcp/servers/boxed/start',
    );
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    expect(started.body.process.sandboxed).toBe(true);
    const uid = started.body.process.sandbox.uid;

    await page.goto(`${serve.base}/#/servers`);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Servers' }).waitFor();

    // The list: the badge on the unsandboxed server only.
    const unboxedRow = page.locator('[data-server="unboxed"]');
    await unboxedRow.getByTestId('sandbox-off').waitFor();
    expect(await unboxedRow.getByTestId('sandbox-off').textContent()).toBe('sandbox off');
    await page.locator('[data-server="boxed"]').waitFor();
    expect(await page.locator('[data-server="boxed"]').getByTestId('sandbox-off').count()).toBe(0);

    // The sandboxed server's drawer: on, network none, the running child's uid.
    await page.locator('[data-server="boxed"]').getByRole('button', { name: 'boxed' }).click();
    const drawer = page.getByRole('dialog');
    const facts = drawer.getByTestId('drawer-sandbox');
    await facts.getByTestId('sandbox-network').waitFor();
    expect(await facts.getByTestId('sandbox-network').textContent()).toBe('none');
    if (uid !== null) {
      await facts.getByTestId('sandbox-uid').waitFor();
      expect(await facts.getByTestId('sandbox-uid').textContent()).toBe(String(uid));
    }
    expect(await facts.getByTestId('sandbox-off').count()).toBe(0);
    await page.keyboard.press('Escape');
    await drawer.waitFor({ state: 'detached' });

    // The escape hatch's drawer: the badge.
    await unboxedRow.getByRole('button', { name: 'unboxed' }).click();
    await page.getByRole('dialog').getByTestId('drawer-sandbox').getByTestId('sandbox-off').waitFor();
    await page.keyboard.press('Escape');

    expect((await serve.rest('POST', '/api/mcp/servers/boxed/stop')).status).toBe(200);
    expect(errors).toEqual([]);
  }, 90_000);
});
