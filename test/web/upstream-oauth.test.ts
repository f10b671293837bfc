/**
 * The dashboard's Connect button for an OAuth upstream, in Chromium against a real `gatehouse serve`: the
 * server's drawer says "not connected" → Connect opens the authorization server's sign-in (oidc-provider)
 * in a new tab → login and consent → back at Gatehouse's `/oauth/callback` → the drawer, live, shows the
 * grant connected and the server tested with it.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: Connect an OAuth upstream', () => {
  let browser: Browser;
  let serve: ServeProcess;
  let as: AuthServer;
  let mcp: ProtectedServer;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    as = await startAuthServer();
    mcp = await startProtectedServer(as.issuer);
    // No GATEHOUSE_PUBLIC_URL: the callback is the served address itself, where the browser comes back.
    serve = await startServe({ env: { GATEHOUSE_ALLOW_HTTP: 'true' } });
    browser = await launchBrowser();
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, browserErrors));
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
    await mcp?.close();
    await as?.close();
  });

  it('server page → Connect → provider sign-in → back → connected', { timeout: 120_000 }, async () => {
    const installed = await serve.rest('POST', '/api/mcp/install', {
      manifest: {
        id: 'tracker',
        name: 'Tracker',
        transport: 'streamable-http',
        url: mcp.url,
        privateNetwork: true,
        auth: { type: 'oauth', mode: 'shared', issuer: as.issuer },
      },
    });
    expect(installed.status).toBe(201);

    await page.goto(serve.base);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Servers' }).click();
    await page.locator('[data-server="tracker"]').getByRole('button', { name: 'Tracker' }).click();
    const drawer = page.getByRole('dialog');
    await drawer.getByTestId('oauth-state').getByText('not connected').waitFor();
    expect(await drawer.getByTestId('oauth-issuer').textContent()).toBe(as.issuer);

    // Connect opens the authorization server in a new tab; the person signs in and consents there.
    const [signIn] = await Promise.all([context.waitForEvent('page'), drawer.getByTestId('oauth-connect').click()]);
    await signIn.waitForURL(`${serve.base}/oauth/callback?**`, { timeout: 30_000 });
    await signIn.getByRole('heading', { name: 'Connected' }).waitFor();
    expect(await signIn.textContent('body')).toContain('Gatehouse is connected to tracker');
    await signIn.close();

    // Back on the server page, live: the grant is connected and the server tested with it.
    await drawer
      .getByTestId('oauth-state')
      .getByText(/^connected · token until /)
      .waitFor({ timeout: 30_000 });
    await drawer
      .getByTestId('drawer-status')
      .getByText(/^connected/)
      .waitFor({ timeout: 30_000 });
    expect(await drawer.getByTestId('oauth-connect').textContent()).toBe('Reconnect');
    const auth = await serve.rest<{ auth: { state: string; issuer: string } }>('GET', '/api/mcp/servers/tracker/auth');
    expect(auth.body.auth).toMatchObject({ state: 'connected', issuer: as.issuer });
    // Its handshake got past the upstream's token check (it answers 401 to anything else): the tools are known.
    const detail = await serve.rest<{ discoveredTools: { name: string }[] }>('GET', '/api/mcp/servers/tracker');
    expect(detail.body.discoveredTools.map((t) => t.name)).toEqual(['whoami']);

    // The manual entry form takes an issuer; a bad one gets the API's own refusal, and nothing is installed.
    await drawer.getByRole('button', { name: 'Close', exact: true }).click();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Discover' }).click();
    const form = page.getByRole('form', { name: 'Manual entry' });
    await form.getByLabel('Name', { exact: true }).fill('Pinned');
    await form.getByLabel('URL').fill(mcp.url);
    await form.getByLabel('oauth', { exact: true }).check();
    await form.getByLabel(/^Issuer/).fill(`${as.issuer}?tenant=1`);
    await form.getByLabel(/Private network/).check();
    await form.getByRole('button', { name: 'Install' }).click();
    await page
      .getByRole('alert')
      .getByText(/auth\.issuer: an http\(s\) URL without query, fragment or credentials \(its metadata's issuer\)/)
      .waitFor();
    expect((await serve.rest('GET', '/api/mcp/servers/pinned')).status).toBe(404);
    expect(browserErrors).toEqual([]);
  });
});
