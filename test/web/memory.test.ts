/**
 * The Memory screen end to end, in Debian's Chromium (playwright-core), against a real `gatehouse serve`
 * (no language-model endpoint): the empty bank; an agent (SDK client) adds memories on `/mcp/memory` and
 * they appear in the list and in a search once their operations complete; invalidating one shows its state
 * and history, and it is deleted after a confirmation; a directive is created; consolidation shows its
 * operation; a mental model's refresh says in words why it does not run (the REST route is missing, or no
 * language-model endpoint is configured). Then, with `mcp.memoryEnabled` off, the screen says why.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from './harness.js';

type Json = Record<string, unknown>;

async function memoryAgent(base: string, token: string): Promise<Client> {
  const client = new Client({ name: 'web-memory-agent', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp/memory`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

async function ok(client: Client, name: string, args: Json): Promise<Json> {
  const result = (await client.callTool({ name, arguments: args })) as { isError?: boolean; structuredContent: Json };
  expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
  return result.structuredContent;
}

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: memory', () => {
  let browser: Browser;
  let serve: ServeProcess;
  let context: BrowserContext;
  let page: Page;
  let agent: Client | undefined;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    browser = await launchBrowser();
    serve = await startServe();
    ({ context, page } = await openPage(browser, { width: 1366, height: 900 }, browserErrors));
  }, 90_000);

  afterAll(async () => {
    await agent?.close().catch(() => {});
    await context?.close();
    await browser?.close();
    await serve?.stop();
  });

  it('shows the bank an agent fills, and curates it', async () => {
    await page.goto(`${serve.base}/#/servers`);
    await page.getByLabel('Token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Servers' }).waitFor();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Memory' }).click();
    await page.getByRole('heading', { level: 1, name: 'Memory' }).waitFor();
    await page.getByText('The bank is empty: no agent has added a memory yet.', { exact: false }).waitFor();
    await page.getByText('No operations yet', { exact: false }).waitFor();
    await page.getByText('No directives yet.').waitFor();

    // An agent adds two memories on /mcp/memory; each retain operation completes in the background.
    const token = await serve.rest<{ token: string }>('POST', '/api/tokens', { role: 'agent', name: 'scribe' });
    agent = await memoryAgent(serve.base, token.body.token);
    const added = await ok(agent, 'memory_add', { text: 'The database is backed up hourly.', tags: ['db'] });
    expect(added.operation_id).toEqual(expect.any(String));
    await ok(agent, 'memory_add', { text: 'Releases leave on Thursdays at noon.', tags: ['release'] });
    await expect
      .poll(async () => {
        const ops = await serve.rest<{ operations: { status: string }[] }>('GET', '/api/memory/operations');
        return ops.body.operations.map((o) => o.status);
      })
      .toEqual(['completed', 'completed']);

    // The screen follows the operations until they complete: both units, their source and the counts.
    const units = page.getByRole('list', { name: 'Memory units' });
    await units.getByText('The database is backed up hourly.').waitFor();
    await units.getByText('Releases leave on Thursdays at noon.').waitFor();
    await expect.poll(() => units.locator('li.unit').count()).toBe(2);
    expect(await units.locator('li.unit').first().textContent()).toMatch(/shared.*from scribe/);
    await page.getByTestId('units-count').getByText('2 units').waitFor();
    await page.locator('[data-operation]').first().getByText('completed').waitFor();
    await page.getByRole('list', { name: 'Tags in use' }).getByText('release').waitFor();

    // Search finds one of them; clearing the box brings the list back.
    await page.getByRole('searchbox', { name: 'Search' }).fill('backed up');
    const results = page.getByRole('list', { name: 'Search results' });
    await results.getByText('The database is backed up hourly.').waitFor();
    await expect.poll(() => results.locator('li.unit').count()).toBe(1);
    await page.getByRole('searchbox', { name: 'Search' }).fill('');
    await expect.poll(() => units.locator('li.unit').count()).toBe(2);

    // Open the unit, invalidate it: its state and history say so, and the valid list no longer shows it.
    const row = units.locator('li.unit', { hasText: 'The database is backed up hourly.' });
    const unitId = (await row.getAttribute('data-unit')) as string;
    expect(unitId).toMatch(/^mem_/);
    await row.getByRole('button', { name: /^Open/ }).click();
    const detail = page.getByRole('region', { name: `Unit ${unitId}` });
    await detail.getByTestId('unit-state').getByText('valid').waitFor();
    await detail.getByRole('button', { name: 'Invalidate' }).click();
    await detail.getByText('Invalidated: agents no longer find it', { exact: false }).waitFor();
    await detail.getByTestId('unit-state').getByText('invalidated').waitFor();
    const history = detail.getByRole('list', { name: 'Curation history' });
    await history.getByText('state: valid → invalidated').waitFor();
    const me = await serve.rest<{ name: string }>('GET', '/api/platform/auth-context');
    expect(await history.textContent()).toContain(me.body.name);
    await page.getByLabel('State').selectOption('invalidated');
    await units.locator(`[data-unit="${unitId}"][data-state="invalidated"]`).waitFor();
    await expect.poll(() => units.locator('li.unit').count()).toBe(1);
    await page.getByTestId('memory-datasets').getByText('shared: 1 valid, 1 invalidated').waitFor();

    // Delete it, after confirming: it is gone from every list.
    await detail.getByRole('button', { name: 'Delete this unit…' }).click();
    await detail.getByRole('alertdialog').getByRole('button', { name: 'Yes, delete' }).click();
    await detail.waitFor({ state: 'detached' });
    await page.getByText('No units match these filters.').waitFor();
    expect((await serve.rest('GET', `/api/memory/units/${unitId}`)).status).toBe(404);

    // A directive, created from the form.
    await page.getByText('New directive').click();
    const form = page.getByRole('form', { name: 'New directive' });
    await form.getByLabel('Name').fill('Cite sources');
    await form.getByLabel('Instruction').fill('Say where a fact came from.');
    await form.getByRole('button', { name: 'Create directive' }).click();
    await page.getByText('Created directive “Cite sources”.').waitFor();
    await page.getByRole('list', { name: 'Directives' }).getByText('Say where a fact came from.').waitFor();

    // Consolidate: the answer names the operation, which shows in the list.
    await page.getByRole('button', { name: 'Consolidate' }).click();
    const done = page.getByText(/^Consolidated shared: operation (\S+), \d+ duplicates? invalidated\.$/);
    await done.waitFor();
    const opId = /operation (\S+),/.exec((await done.textContent()) ?? '')?.[1] as string;
    const op = page.locator(`[data-operation="${opId}"]`);
    await op.getByText('consolidation').waitFor();
    await op.getByText('completed').waitFor();

    // A mental model (made by the agent); its refresh says, in words, why there is no content.
    const model = await ok(agent, 'memory_mental_model_create', {
      name: 'Release rhythm',
      source_query: 'When do releases happen?',
    });
    expect(model.content_status).toBe('unsupported');
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Memory' }).waitFor();
    const card = page.locator(`[data-model="${String(model.mental_model_id)}"]`);
    await card.getByText('No content yet: it has never been refreshed.').waitFor();
    const probe = await serve.rest('POST', `/api/memory/mental-models/${String(model.mental_model_id)}/refresh`);
    await card.getByRole('button', { name: /^Refresh/ }).click();
    if (probe.status === 404) {
      await page
        .getByText("This gateway's REST API does not offer to refresh mental models (it answered 404).", {
          exact: false,
        })
        .waitFor();
    } else {
      expect(probe.body).toMatchObject({ status: 'unsupported' });
      await page.getByText(/^Not refreshed: No language-model endpoint is configured/).waitFor();
    }

    // Memory switched off: the nav item says so and the screen explains instead of failing.
    expect((await serve.rest('PATCH', '/api/settings', { 'mcp.memoryEnabled': false })).status).toBe(200);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Memory' }).waitFor();
    await page.getByText('The memory bank is switched off (mcp.memoryEnabled is false)', { exact: false }).waitFor();
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('button', { name: 'Memory (switched off)' })
      .waitFor();
    expect(browserErrors).toEqual([]);
  }, 120_000);
});
