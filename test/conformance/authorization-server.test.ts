/**
 * The conformance suite's authorization-server scenarios against Gatehouse's own authorization server, a real
 * `gatehouse serve` process: `authorization-server-metadata-endpoint` and `authorization-code-grant`. The second
 * prints an authorization URL for a person; Chromium opens it, signs in on the consent page with an operator
 * token and clicks Allow, and the suite's own callback receives the code and redeems it (PKCE S256, RFC 8707
 * resource, RFC 9207 iss). Every check must succeed.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../fixtures/http.js';
import { CHROMIUM_AVAILABLE, launchBrowser, openPage, type ServeProcess, startServe } from '../web/harness.js';
import { BIN, SHIM } from './suite.js';

describe.skipIf(!CHROMIUM_AVAILABLE)('conformance: authorization server scenarios', { timeout: 240_000 }, () => {
  let serve: ServeProcess;
  let browser: Browser;
  let out: string;

  beforeAll(async () => {
    serve = await startServe();
    browser = await launchBrowser();
    out = await mkdtemp(path.join(tmpdir(), 'gatehouse-as-conformance-'));
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await serve?.stop();
    if (out) await rm(out, { recursive: true, force: true });
  });

  it('passes the metadata and authorization-code-grant scenarios', async () => {
    const port = await freePort();
    const registered = await fetch(`${serve.base}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Conformance', redirect_uris: [`http://127.0.0.1:${port}/callback`] }),
    });
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const person = await serve.rest<{ token: string }>('POST', '/api/tokens', { role: 'operator', name: 'conf' });

    const child = spawn(
      process.execPath,
      [
        '--import',
        SHIM,
        BIN,
        'authorization',
        '--url',
        serve.base,
        '--client-id',
        clientId,
        '--resource',
        `${serve.base}/mcp`,
        '-p',
        String(port),
        '-o',
        out,
      ],
      { cwd: out, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let text = '';
    const authorizeUrl = new Promise<string>((resolve) => {
      const look = (chunk: Buffer) => {
        text += chunk.toString('utf8');
        const found = new RegExp(`${serve.base}/authorize\\?\\S+`).exec(text)?.[0];
        if (found) resolve(found);
      };
      child.stdout.on('data', look);
      child.stderr.on('data', look);
    });
    const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
    const first = await Promise.race([authorizeUrl, exited.then(() => undefined)]);
    expect(first, text.slice(-2000)).toBeTruthy();

    const { context, page } = await openPage(browser, { width: 1024, height: 800 });
    try {
      await page.goto(first as string);
      await page.getByLabel('Sign in with your Gatehouse token', { exact: false }).fill(person.body.token);
      await page.getByRole('button', { name: 'Allow' }).click();
      await exited;
    } finally {
      await context.close();
    }

    const checks: { id: string; status: string; errorMessage?: string }[] = [];
    for (const entry of await readdir(out)) {
      const raw = await readFile(path.join(out, entry, 'checks.json'), 'utf8').catch(() => '[]');
      checks.push(...JSON.parse(raw));
    }
    expect(checks.map((c) => c.id).sort()).toEqual(
      expect.arrayContaining(['authorization-code-grant', 'authorization-server-metadata']),
    );
    expect(
      checks.filter((c) => c.status !== 'SUCCESS').map((c) => `${c.id}: ${c.errorMessage}`),
      text.slice(-2000),
    ).toEqual([]);
  });
});
