/**
 * The OAuth consent page driven in Chromium, against a real `gatehouse serve` process: the SDK's own
 * OAuth client meets the 401, discovers, registers (RFC 7591) and is sent to /authorize; the browser
 * opens that URL, the person signs in on the page with a token they own and clicks Allow; the browser
 * lands on the client's loopback callback; the SDK exchanges the code and calls a tool through the hub
 * to a real SDK server. The grant then shows on the person's Account screen, and revoking it there
 * stops the client's token.
 */
import type http from 'node:http';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Listening, listen } from '../fixtures/http.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST } from '../helpers/gateway.js';
import { TestOAuthProvider } from '../helpers/oauth.js';
import { CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

describe.skipIf(!CHROMIUM_AVAILABLE)('OAuth consent in Chromium against gatehouse serve', { timeout: 180_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let upstream: McpFixture;
  let callback: Listening;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];
  const answers: URLSearchParams[] = [];
  let ownedToken: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe({
      env: { GATEHOUSE_ALLOW_HTTP: 'true', GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST },
    });
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    expect((await serve.rest('POST', '/api/mcp/install', { url: upstream.url, id: 'files' })).status).toBe(201);
    await serve.rest('PATCH', '/api/mcp/servers/files/tools', { allow: ['echo'], defaultTier: 'blocked' });
    expect((await serve.rest<{ ok: boolean }>('POST', '/api/mcp/servers/files/test')).body.ok).toBe(true);
    const user = await serve.rest<{ id: string }>('POST', '/api/users', {
      name: 'noor',
      role: 'member',
      groups: ['default'],
    });
    ownedToken = (
      await serve.rest<{ token: string }>('POST', '/api/tokens', {
        role: 'agent',
        name: 'noor-laptop',
        userId: user.body.id,
      })
    ).body.token;
    // The native client's loopback redirect: it records what the browser brings back.
    callback = await listen((req: http.IncomingMessage, res: http.ServerResponse) => {
      // Only the redirect itself: the browser also asks this origin for /favicon.ico, at a moment of its choosing.
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (url.pathname === '/callback') answers.push(url.searchParams);
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end('<!doctype html><title>Done</title><p>You may close this.');
    });
    ({ context, page } = await openPage(browser, { width: 1024, height: 800 }, browserErrors));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await context?.close();
    await browser?.close();
    await callback?.close();
    await upstream?.close();
    await serve?.stop();
  });

  it('401 → discovery → registration → consent in the browser → token → tools/call; revoked from Account', async () => {
    const mcp = new URL(`${serve.base}/mcp`);
    const provider = new TestOAuthProvider(`${callback.origin}/callback`);
    const first = new Client({ name: 'browser-consent', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    const firstTransport = new StreamableHTTPClientTransport(mcp, { authProvider: provider });
    clients.push(first);
    await expect(first.connect(firstTransport)).rejects.toBeInstanceOf(UnauthorizedError);
    const authorizationUrl = provider.authorizationUrl as URL;
    expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(`${serve.base}/authorize`);

    // The person: the consent page names the client, the endpoint and where the answer goes.
    await page.goto(authorizationUrl.toString());
    await page.getByRole('heading', { level: 1, name: 'Allow Test agent to use Gatehouse as you?' }).waitFor();
    await page.getByText(`${callback.origin}/callback`).waitFor();
    await page.getByText(`${serve.base}/mcp`, { exact: true }).waitFor();
    // A token that signs nobody in is refused on the page, in words.
    await page.getByLabel('Sign in with your Gatehouse token', { exact: false }).fill('gh_not-a-token');
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.getByText('That token does not sign in a person', { exact: false }).waitFor();
    expect(answers).toEqual([]);
    await page.getByLabel('Sign in with your Gatehouse token', { exact: false }).fill(ownedToken);
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL(`${callback.origin}/callback?**`);
    expect(answers).toHaveLength(1);
    const answer = answers[0] as URLSearchParams;
    expect(answer.get('iss')).toBe(serve.base);
    expect(answer.get('state')).toBe(authorizationUrl.searchParams.get('state'));

    // The SDK exchanges the code and calls a tool through the hub.
    await firstTransport.finishAuth(answer);
    const client = new Client({ name: 'browser-consent', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(mcp, { authProvider: provider }));
    const result = (await client.callTool({ name: 'files__echo', arguments: { text: 'from the browser' } })) as {
      content: { text: string }[];
    };
    expect(result.content[0]?.text).toContain('from the browser');
    const access = provider.saved?.access_token as string;

    // The grant is on the person's Account screen; revoking it there stops the client's token.
    await page.goto(serve.base);
    await page.getByLabel('Token').fill(ownedToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const apps = page.getByRole('region', { name: 'Connected apps' });
    const row = apps.locator('tr[data-grant="Test agent"]');
    await row.waitFor();
    await row.getByRole('button', { name: 'Revoke Test agent' }).click();
    await apps.getByText('Test agent no longer has access.').waitFor();
    const refused = await fetch(mcp, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${access}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(refused.status).toBe(401);
    expect(browserErrors).toEqual([]);
  });
});
