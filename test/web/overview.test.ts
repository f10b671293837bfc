/**
 * The Overview page in Chromium against a real `gatehouse serve`: one request for its numbers, the chart
 * drawn, servers by status, the window switch, and the links to what needs the operator.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: overview', { timeout: 180_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];
  const overviewRequests: string[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe();
    const imported = await serve.rest('POST', '/api/mcp/import', {
      servers: { one: { url: 'https://one.example.com/mcp' }, two: { url: 'https://two.example.com/mcp' } },
    });
    expect(imported.status).toBe(200);
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, browserErrors));
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.pathname === '/api/overview') overviewRequests.push(url.search);
    });
    await page.goto(serve.base);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // The landing page: no address, no click.
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
  });

  it('shows the numbers from one request, draws the chart, switches window, links to approvals', async () => {
    const nav = page.getByRole('navigation', { name: 'Main' });
    const first = nav.getByRole('button').first();
    expect(await first.textContent()).toContain('Overview');
    expect(await first.getAttribute('aria-current')).toBe('page');
    await page.getByTestId('calls-total').filter({ hasText: '0 calls in the last hour' }).waitFor();
    await page.getByTestId('calls-chart').locator('canvas').waitFor();
    await page.getByTestId('servers-by-status').filter({ hasText: 'unknown: 2' }).waitFor();
    // One route answers the whole page (a live event may refresh it once more): never a request per server.
    expect(overviewRequests.length).toBeGreaterThan(0);
    expect(new Set(overviewRequests)).toEqual(new Set(['?window=hour']));

    await page.getByLabel('Window').selectOption('day');
    await page.getByTestId('calls-total').filter({ hasText: '0 calls in the last day' }).waitFor();
    await page.getByTestId('pending-link').click();
    await page.getByRole('heading', { level: 1, name: 'Approvals' }).waitFor();
    expect(browserErrors).toEqual([]);
  });
});
