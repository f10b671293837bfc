/**
 * A member uses the dashboard: signed in with a token it owns (a cookie session as the person, no
 * bearer kept in the tab), it sees its own tokens, its connected apps and its own activity, and no
 * screen it may not use; from that same browser session the API refuses everything else. Chromium
 * against a real `gatehouse serve`.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

interface Token {
  id: string;
  name: string;
  token: string;
}

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: a member sees its own and nothing else', { timeout: 180_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];
  let mia: { id: string };
  let miaLaptop: Token;
  let otherBot: Token;

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe();
    mia = (await serve.rest<{ id: string }>('POST', '/api/users', { name: 'mia', role: 'member', groups: ['default'] }))
      .body;
    miaLaptop = (await serve.rest<Token>('POST', '/api/tokens', { role: 'agent', name: 'mia-laptop', userId: mia.id }))
      .body;
    otherBot = (await serve.rest<Token>('POST', '/api/tokens', { role: 'agent', name: 'other-bot' })).body;
    ({ context, page } = await openPage(browser, { width: 1280, height: 860 }, browserErrors));
  }, 90_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
  });

  /** A request from the page itself, with its session cookie and CSRF header (what a script there could send). */
  const fromPage = (method: string, path: string, body?: unknown) =>
    page.evaluate(
      async ({ method, path, body }) => {
        const csrf = /(?:^|; )gatehouse_csrf=([^;]+)/.exec(document.cookie)?.[1];
        const response = await fetch(path, {
          method,
          headers: {
            ...(csrf ? { 'x-gatehouse-csrf': decodeURIComponent(csrf) } : {}),
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
        return { status: response.status, body: await response.json().catch(() => null) };
      },
      { method, path, body },
    );

  it('signs the member in as the person and shows only its own screens', async () => {
    await page.goto(serve.base);
    await page.getByLabel('Token').fill(miaLaptop.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Account' }).waitFor();
    const tabs = await page.getByRole('navigation', { name: 'Main' }).getByRole('button').allInnerTexts();
    expect(tabs.map((t) => t.trim())).toEqual(['Account', 'Activity']);
    // The tab holds no bearer: the session cookie is the person, with the member role.
    expect(await page.evaluate(() => sessionStorage.getItem('gatehouse.token'))).toBeNull();
    await page.getByText('mia (member)', { exact: false }).waitFor();

    const mine = page.getByRole('region', { name: 'My tokens' });
    await mine.locator('tr[data-token="mia-laptop"]').waitFor();
    expect(await mine.locator('tbody tr').count()).toBe(1);
    expect(await page.getByLabel('Role').count()).toBe(0);
    await page
      .getByRole('region', { name: 'Connected apps' })
      .getByText('No app signed in with your account.')
      .waitFor();
  });

  it('creates and revokes its own agent token, within its groups', async () => {
    const mine = page.getByRole('region', { name: 'My tokens' });
    await mine.getByLabel('Name').fill('mia-ci');
    await mine.getByRole('button', { name: 'Create token' }).click();
    const shown = await page.getByLabel('The new token').inputValue();
    expect(shown).toMatch(/^gh_/);
    await page.getByRole('button', { name: 'Done' }).click();
    const row = mine.locator('tr[data-token="mia-ci"]');
    await row.waitFor();
    expect(await row.locator('td').nth(2).textContent()).toBe('default');
    const listed = await serve.rest<{ tokens: { name: string; userId: string | null; role: string }[] }>(
      'GET',
      '/api/tokens',
    );
    expect(listed.body.tokens.find((t) => t.name === 'mia-ci')).toMatchObject({ userId: mia.id, role: 'agent' });

    await row.getByRole('button', { name: 'Revoke mia-ci' }).click();
    await row.getByRole('button', { name: 'Confirm revoke' }).click();
    await row.waitFor({ state: 'detached' });
    expect((await fetch(`${serve.base}/info`, { headers: { authorization: `Bearer ${shown}` } })).status).toBe(401);
  });

  it('shows only its own activity', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Activity' }).click();
    await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
    const own = await fromPage('GET', '/api/audit?limit=500');
    expect(own.status).toBe(200);
    const events = (own.body as { events: { userId: string | null }[]; total: number }).events;
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((e) => e.userId === mia.id)).toBe(true);
    await page.getByText(`${events.length} events`).waitFor();
    const all = await serve.rest<{ total: number }>('GET', '/api/audit?limit=1');
    expect(all.body.total).toBeGreaterThan(events.length);
  });

  it("refuses from the member's own session what the screens do not offer", async () => {
    for (const [method, path] of [
      ['GET', '/api/mcp/servers'],
      ['GET', '/api/approvals'],
      ['GET', '/api/users'],
      ['GET', '/api/settings'],
      ['GET', '/api/mcp/stream'],
      ['GET', '/api/platform/auth-context'],
    ] as const) {
      expect((await fromPage(method, path)).status, `${method} ${path}`).toBe(403);
    }
    const listed = await fromPage('GET', '/api/tokens');
    expect((listed.body as { tokens: { name: string }[] }).tokens.map((t) => t.name)).toEqual(['mia-laptop']);
    for (const body of [
      { role: 'admin', name: 'mia-root' },
      { role: 'agent', name: 'mia-wide', groups: ['platform'] },
      { role: 'agent', name: 'mia-fast', rateLimit: 100_000 },
      { role: 'agent', name: 'mia-theirs', userId: 'someone-else' },
    ]) {
      const refused = await fromPage('POST', '/api/tokens', body);
      expect(refused.status, JSON.stringify(body)).toBe(403);
      expect((refused.body as { error: { code: string } }).error.code).toBe('forbidden');
    }
    const theirs = await fromPage('DELETE', `/api/tokens/${otherBot.id}`);
    expect(theirs.status).toBe(404);
    expect((await fetch(`${serve.base}/info`, { headers: { authorization: `Bearer ${otherBot.token}` } })).status).toBe(
      200,
    );
    expect(browserErrors).toEqual([]);
  });
});
