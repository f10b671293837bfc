/**
 * The Connect-a-client screen in Chromium against a real `gatehouse serve`: each client's entry carries this
 * gateway's hub URL in that client's own shape (the writers of `gatehouse connect`), the Copy button copies it,
 * and a token created for a client is shown once, written into a clear-text client's entry, and works on /mcp.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: connect a client', { timeout: 180_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe();
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, browserErrors));
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: serve.base });
    await page.goto(`${serve.base}/#/connect`);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Connect a client' }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await serve?.stop();
  });

  it('shows each client its entry with the hub URL, copies it, and creates a token for a client', async () => {
    const hub = `${serve.base}/mcp`;
    const snippet = page.getByTestId('connect-snippet');
    await page.getByTestId('hub-url').filter({ hasText: hub }).waitFor();

    // Claude Desktop launches `gatehouse stdio` by absolute path, with the token left as a placeholder.
    await snippet.filter({ hasText: '"stdio"' }).waitFor();
    const desktop = JSON.parse((await snippet.textContent()) as string);
    const entry = desktop.mcpServers.gatehouse;
    expect(entry.args.slice(-3)).toEqual(['stdio', '--url', hub]);
    expect(entry.command).toMatch(/^\//);
    expect(entry.env).toEqual({ GATEHOUSE_TOKEN: '<gatehouse agent token>' });

    // Claude Code and VS Code: HTTP, the token by reference (a variable, a prompted input), never in the file.
    await page.getByLabel('Client', { exact: true }).selectOption('claude-code');
    await snippet.filter({ hasText: '"type": "http"' }).waitFor();
    expect(JSON.parse((await snippet.textContent()) as string)).toEqual({
      mcpServers: {
        gatehouse: { type: 'http', url: hub, headers: { Authorization: `Bearer ${'$'}{GATEHOUSE_TOKEN}` } },
      },
    });
    await page.getByLabel('Client', { exact: true }).selectOption('vscode');
    await snippet.filter({ hasText: '"inputs"' }).waitFor();
    expect(JSON.parse((await snippet.textContent()) as string).servers.gatehouse.url).toBe(hub);

    // The entry name is the user's; Copy puts the exact text on the clipboard.
    await page.getByLabel('Client', { exact: true }).selectOption('cursor');
    await page.getByLabel('Entry name').fill('hub');
    await snippet.filter({ hasText: '"hub"' }).waitFor();
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(await snippet.textContent());

    // A token for LM Studio (clear-text client): shown once and written into the entry; it works on /mcp.
    await page.getByLabel('Client', { exact: true }).selectOption('lmstudio');
    await page.getByLabel('Token name').fill('studio');
    await page.getByRole('button', { name: 'Create agent token' }).click();
    const created = page.getByTestId('created-token');
    await created.waitFor();
    const token = (await created.locator('code').textContent()) as string;
    expect(token).toMatch(/^gh_/);
    expect(JSON.parse((await snippet.textContent()) as string).mcpServers.hub.headers.Authorization).toBe(
      `Bearer ${token}`,
    );
    const tokens = await serve.rest<{ tokens: { name: string; role: string }[] }>('GET', '/api/tokens');
    expect(tokens.body.tokens).toContainEqual(expect.objectContaining({ name: 'studio', role: 'agent' }));
    const mcp = await fetch(hub, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    expect(mcp.status).not.toBe(401);
    await mcp.body?.cancel();

    // A second live token of that name is refused in words (the first one's value cannot be shown again).
    await page.getByRole('button', { name: 'Create agent token' }).click();
    await page.getByRole('alert').filter({ hasText: 'A live token named "studio" exists' }).waitFor();
    expect(browserErrors).toEqual([]);
  });
});
