/**
 * Day-one stumbles in the dashboard, in Debian's Chromium against a real `gatehouse serve`: a preset that needs
 * configuration asks for it before installing; the catalog marks what is installed; the id check says our rule;
 * an admin can allow a private network on an installed server; a failed test is not `ok` in Activity; the live
 * badge stops saying live when the gateway dies.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_SERVER, TSX_LOADER } from '../fixtures/stdio/index.js';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

const ID_RULE = 'An id is 1–32 lower-case letters, digits and “-”, starting with a letter or digit (no “_”).';

async function nav(page: Page, name: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name }).click();
  await page.getByRole('heading', { level: 1, name }).waitFor();
}

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: day one', { timeout: 180_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  let dir: string;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-web-day-one-'));
    const catalog = join(dir, 'catalog.json');
    await writeFile(
      catalog,
      JSON.stringify({
        version: 1,
        servers: [
          {
            name: 'dev.gatehouse.test/needy',
            title: 'Needy',
            description: 'Needs a token and a folder before it can work.',
            category: 'files',
            transport: 'stdio',
            command: process.execPath,
            args: ['--import', TSX_LOADER, FIXTURE_SERVER],
            envRequired: ['NEEDY_TOKEN'],
            argsRequired: 'one or more folders',
          },
        ],
      }),
    );
    browser = await launchBrowser();
    serve = await startServe({ catalog });
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, browserErrors));
    await page.goto(`${serve.base}/#/servers`);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Servers' }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('asks a preset for what it needs before installing it, then marks it installed', async () => {
    await nav(page, 'Discover');
    const card = page.locator('[data-preset="dev.gatehouse.test/needy"]');
    await card.getByRole('button', { name: 'Install Needy' }).click();
    const form = card.getByRole('form', { name: 'Configure Needy' });
    await form.getByLabel('NEEDY_TOKEN (sealed, never shown again)').fill('needy-secret-1');
    await form.getByLabel('Arguments: one or more folders (one per line)').fill('/srv/data\n/srv/more');
    await form.getByRole('button', { name: 'Install Needy' }).click();
    await page.getByText('Installed Needy as “needy”.').waitFor();
    await card.getByRole('button', { name: 'Open Needy, installed as needy' }).waitFor();

    const { body } = await serve.rest<Record<string, unknown>>('GET', '/api/mcp/servers/needy');
    expect(body).toMatchObject({
      env: { NEEDY_TOKEN: { set: true } },
      args: ['--import', TSX_LOADER, FIXTURE_SERVER, '/srv/data', '/srv/more'],
      lastError: null,
    });
  });

  it('says the id rule in its own words', async () => {
    const id = page.getByRole('form', { name: 'Manual entry' }).getByLabel('Id (optional; derived from the name)');
    await id.fill('Bad_Id');
    await page.getByRole('alert').filter({ hasText: ID_RULE }).waitFor();
    expect(await id.evaluate((input: HTMLInputElement) => input.validationMessage)).toBe(ID_RULE);
    await id.fill('good-id');
    expect(await id.evaluate((input: HTMLInputElement) => input.validationMessage)).toBe('');
  });

  it('lets an admin allow a private network on an installed server; a failed test is not ok in Activity', async () => {
    const installed = await serve.rest('POST', '/api/mcp/install', { url: 'http://127.0.0.1:9/mcp', id: 'local' });
    expect(installed.status).toBe(201);
    await nav(page, 'Servers');
    await page.getByRole('button', { name: '127.0.0.1:9' }).click();
    const drawer = page.getByRole('dialog');
    const toggle = drawer.getByRole('checkbox', { name: 'Private network' });
    expect(await toggle.isChecked()).toBe(false);
    await toggle.check();
    await drawer.getByText('Private network allowed: it may be on loopback or your LAN.').waitFor();
    expect((await serve.rest<{ privateNetwork: boolean }>('GET', '/api/mcp/servers/local')).body.privateNetwork).toBe(
      true,
    );
    await drawer.getByRole('button', { name: 'Test', exact: true }).click();
    await drawer.getByTestId('test-result').filter({ hasText: 'Failed' }).waitFor();
    await page.keyboard.press('Escape');

    await nav(page, 'Activity');
    const row = page.locator('tr', { hasText: 'server.test' }).first();
    await row.waitFor();
    expect(await row.locator('td').nth(5).textContent()).toBe('upstream_unreachable');
  });

  it('stops saying live when the gateway dies', async () => {
    const badge = page.locator('.live');
    await expect.poll(() => badge.textContent(), { timeout: 15_000 }).toBe('live');
    // A gateway that hangs (or a host that vanished) closes nothing: only its silence tells.
    serve.signal('SIGSTOP');
    try {
      await expect.poll(() => badge.textContent(), { timeout: 70_000, interval: 1000 }).not.toBe('live');
    } finally {
      serve.signal('SIGCONT');
    }
    await expect.poll(() => badge.textContent(), { timeout: 30_000 }).toBe('live');
    // And one that stops closes its stream.
    await serve.kill();
    await expect.poll(() => badge.textContent(), { timeout: 30_000 }).not.toBe('live');
    await serve.restart();
    await expect.poll(() => badge.textContent(), { timeout: 30_000 }).toBe('live');
    expect(browserErrors).toEqual([]);
  });
});
