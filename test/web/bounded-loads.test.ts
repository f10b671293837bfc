/**
 * The dashboard with many servers, in Chromium against a real `gatehouse serve`: the Approvals page loads
 * with a bounded number of requests (it made one per server), and the Servers list shows servers past the
 * first page of 500.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

const SERVERS = 510;

async function nav(page: Page, name: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name }).click();
  await page.getByRole('heading', { level: 1, name }).waitFor();
}

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: bounded loads with many servers', { timeout: 240_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];
  const apiRequests: string[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe();
    // 510 HTTP servers through the import route, 200 entries a request.
    for (let from = 0; from < SERVERS; from += 200) {
      const servers: Record<string, unknown> = {};
      for (let i = from; i < Math.min(SERVERS, from + 200); i++) {
        servers[`s${String(i).padStart(3, '0')}`] = { url: `https://s${i}.example.com/mcp` };
      }
      const imported = await serve.rest<{ registered: number }>('POST', '/api/mcp/import', { servers });
      expect(imported.status).toBe(200);
    }
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, browserErrors));
    page.on('request', (request) => {
      const path = new URL(request.url()).pathname;
      if (path.startsWith('/api/')) apiRequests.push(path);
    });
    await page.goto(`${serve.base}/#/servers`);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Servers' }).waitFor();
  }, 180_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
  });

  it('lists servers past the first 500', async () => {
    await page.getByText(`0 connected of ${SERVERS}`).waitFor();
    await page.locator('tr[data-server="s509"]').waitFor();
    expect(await page.locator('tr[data-server]').count()).toBe(SERVERS);
  });

  it('opens Approvals with a bounded number of requests, none per server', async () => {
    apiRequests.length = 0;
    await nav(page, 'Approvals');
    await page.getByText('No tool is quarantined.', { exact: false }).waitFor();
    await page.getByText('No call is waiting for a decision.', { exact: false }).waitFor();
    expect(apiRequests.filter((p) => /^\/api\/mcp\/servers\/[^/]+\/pins/.test(p))).toEqual([]);
    expect(apiRequests).toContain('/api/mcp/pins/quarantined');
    expect(apiRequests.length).toBeLessThanOrEqual(6);
    expect(browserErrors).toEqual([]);
  });
});
