/**
 * Trace ids on the dashboard (issue 20), in Chromium against a real `gatehouse serve` with tracing on
 * (its OTLP/HTTP exporter pointed at a plain receiver here): Activity shows each traced row's trace id
 * short, whole on hover and when copied, and filters by it (typed, or from a row); the approval card
 * shows the trace of the call that waits and leads to its Activity, where the approved execution
 * appears under the same trace once an operator approves.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST } from '../helpers/gateway.js';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

const newTraceId = () => randomBytes(16).toString('hex');
const traceparent = (traceId: string) => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: trace ids', { timeout: 180_000 }, () => {
  let browser: Browser;
  let serve: ServeProcess;
  let upstream: McpFixture;
  let receiver: Server;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];
  const auditQueries: string[] = [];
  let agentToken: string;
  const echoTrace = newTraceId();
  const gatedTrace = newTraceId();
  let approvalId: string;

  async function call(traceId: string, name: string, args: Record<string, unknown>) {
    const agent = await connectAgent(`${serve.base}/mcp`, agentToken, {
      era: 'modern',
      headers: { traceparent: traceparent(traceId) },
    });
    try {
      return await agent.callTool({ name, arguments: args });
    } finally {
      await agent.close();
    }
  }

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    browser = await launchBrowser();
    serve = await startServe({
      env: {
        GATEHOUSE_ALLOW_HTTP: 'true',
        GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
      },
    });
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    expect((await serve.rest('POST', '/api/mcp/install', { url: upstream.url, id: 'files' })).status).toBe(201);
    await serve.rest('PATCH', '/api/mcp/servers/files/tools', { mode: 'all', allow: ['echo'], gated: ['add'] });
    expect((await serve.rest<{ ok: boolean }>('POST', '/api/mcp/servers/files/test')).body.ok).toBe(true);
    agentToken = (await serve.rest<{ token: string }>('POST', '/api/tokens', { role: 'agent', name: 'tracer' })).body
      .token;
    // Two traced calls: one answered at once, one waiting for an operator.
    const echoed = await call(echoTrace, 'files__echo', { text: 'traced' });
    expect(echoed.isError).toBeFalsy();
    const waited = await call(gatedTrace, 'files__add', { a: 2, b: 3 });
    const answer = JSON.parse((waited.content as Array<{ text: string }>)[0]?.text as string);
    expect(answer.status).toBe('pending_approval');
    approvalId = answer.approval_id;

    ({ context, page } = await openPage(browser, { width: 1440, height: 900 }, browserErrors));
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: serve.base });
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.pathname === '/api/audit') auditQueries.push(url.search);
    });
    await page.goto(serve.base);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await upstream?.close();
    await serve?.stop();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  it('shows trace ids in Activity, short with the whole id on hover and copy, and filters by them', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Activity' }).click();
    await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
    const echoCell = page.locator(`tr [data-trace-id="${echoTrace}"]`).first();
    await echoCell.waitFor();
    const code = echoCell.locator('code');
    expect(await code.textContent()).toBe(echoTrace.slice(0, 8));
    expect(await code.getAttribute('title')).toBe(echoTrace);
    // Copy takes the whole id.
    await echoCell.getByRole('button', { name: `Copy trace id ${echoTrace}` }).click();
    await echoCell.getByRole('status').filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(echoTrace);

    // Filter from the row: only that trace's events remain, and the REST query carried it.
    await echoCell.getByRole('button', { name: `Show the events of trace ${echoTrace}` }).click();
    expect(await page.getByRole('textbox', { name: 'Trace', exact: true }).inputValue()).toBe(echoTrace);
    await page.locator(`tr [data-trace-id="${gatedTrace}"]`).first().waitFor({ state: 'detached' });
    const shown = await page.locator('table.audit tbody tr').count();
    expect(shown).toBeGreaterThan(0);
    expect(await page.locator(`table.audit tbody tr [data-trace-id="${echoTrace}"]`).count()).toBe(shown);
    expect(auditQueries.some((q) => new URLSearchParams(q).get('trace') === echoTrace)).toBe(true);

    // A partial id is not sent (it would match nothing): the screen says what a trace id is.
    const before = auditQueries.length;
    await page.getByRole('textbox', { name: 'Trace', exact: true }).fill(gatedTrace.slice(0, 12));
    await page.getByText('A trace id is 32 hexadecimal digits').waitFor();
    expect(auditQueries.slice(before).some((q) => new URLSearchParams(q).has('trace'))).toBe(false);
    await page.getByRole('button', { name: 'Clear trace' }).click();
    await page.locator(`tr [data-trace-id="${gatedTrace}"]`).first().waitFor();
    expect(browserErrors).toEqual([]);
  });

  it('shows the trace on the approval card and leads to its Activity, where the execution joins it', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Approvals' }).click();
    const card = page.locator(`article[data-approval="${approvalId}"]`);
    await card.waitFor();
    const trace = card.locator(`[data-trace-id="${gatedTrace}"]`);
    expect(await trace.locator('code').textContent()).toBe(gatedTrace.slice(0, 8));
    expect(await trace.locator('code').getAttribute('title')).toBe(gatedTrace);
    await card.getByRole('link', { name: 'activity' }).click();
    await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
    expect(await page.getByRole('textbox', { name: 'Trace', exact: true }).inputValue()).toBe(gatedTrace);
    const rows = page.locator('table.audit tbody tr');
    await rows.filter({ hasText: 'pending_approval' }).first().waitFor();
    expect(await page.locator(`tr [data-trace-id="${echoTrace}"]`).count()).toBe(0);

    // The operator approves; the approved execution is audited under the same trace (the live view updates).
    expect((await serve.rest('POST', `/api/approvals/${approvalId}/approve`, {})).status).toBe(200);
    // Cells' text runs together in a row's: the outcome is matched on its own cell.
    await rows
      .filter({ hasText: 'hub.call' })
      .filter({ has: page.locator('td', { hasText: /^ok$/ }) })
      .first()
      .waitFor();
    expect(await rows.count()).toBe(await page.locator(`table.audit tbody tr [data-trace-id="${gatedTrace}"]`).count());
    expect(browserErrors).toEqual([]);
  });
});
