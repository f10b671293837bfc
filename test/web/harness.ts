/**
 * What the browser tests drive: a real `gatehouse serve` process (the CLI, on a free loopback port, with its
 * data in a temporary folder and a fixture catalog), and Debian's Chromium through playwright-core.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { freePort } from '../fixtures/http.js';

import { FIXTURE_SERVER, newMarker, TSX_LOADER } from '../fixtures/stdio/index.js';
import { NODE_TS } from '../helpers/processes.js';

export const CHROMIUM = process.env.GATEHOUSE_TEST_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-dev-shm-usage',
];
/**
 * Whether the browser tests can run. Without Chromium they are skipped, saying so — except under
 * CI=true, where its absence fails the run (`.ci/run` installs Debian's `chromium` first).
 */
export const CHROMIUM_AVAILABLE = existsSync(CHROMIUM);
if (!CHROMIUM_AVAILABLE) {
  if (process.env.CI === 'true') throw new Error(`Chromium is required under CI=true but ${CHROMIUM} is missing.`);
  process.stderr.write(
    `\n[gatehouse tests] no Chromium at ${CHROMIUM} (apt-get install chromium): SKIPPING the browser tests.\n`,
  );
}
export const ADMIN_TOKEN = 'gh_web-admin-token-0123456789abcdef';
const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 });
}

/** How long one browser step may take before a test fails (real processes on a shared machine). */
export const STEP_MS = 15_000;

/**
 * A fresh page at the given viewport, whose uncaught errors and console errors are collected in
 * `errors` (a failed resource load is the app's own error path under test, so it is left out).
 */
export async function openPage(
  browser: Browser,
  viewport: { width: number; height: number },
  errors: string[] = [],
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_MS);
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) errors.push(message.text());
  });
  return { context, page };
}

/** A catalog with one stdio preset (the SDK stdio fixture) and one remote entry in another category. */
export async function writeFixtureCatalog(dir: string): Promise<string> {
  const path = join(dir, 'catalog.json');
  const catalog = {
    version: 1,
    servers: [
      {
        name: 'dev.gatehouse.test/fixture-tools',
        id: 'fixture-tools',
        title: 'Fixture Tools',
        description: 'A real stdio MCP server built with the official SDK: echo, add and friends.',
        category: 'developer',
        transport: 'stdio',
        command: process.execPath,
        args: ['--import', TSX_LOADER, FIXTURE_SERVER, `--gatehouse-test-marker=${newMarker()}`],
        envRequired: [],
      },
      {
        name: 'dev.gatehouse.test/weather',
        title: 'Weather',
        description: 'Forecasts from a remote MCP endpoint.',
        category: 'data',
        transport: 'streamable-http',
        url: 'https://weather.example.com/mcp',
        envRequired: [],
      },
    ],
  };
  await writeFile(path, JSON.stringify(catalog, null, 2));
  return path;
}

export interface ServeProcess {
  base: string;
  port: number;
  dataDir: string;
  output: () => string;
  /** Stops the process and keeps its data (for a restart). */
  kill(): Promise<void>;
  /** Starts it again on the same port and data folder. */
  restart(): Promise<void>;
  /** Sends the running process a signal (SIGSTOP freezes it with its connections open; SIGCONT thaws it). */
  signal(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
  /** A REST call with the admin token (or another). */
  rest<T = unknown>(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: T }>;
}

/** Starts `gatehouse serve` (the CLI through tsx) and waits until `/healthz` answers. */
export async function startServe(
  options: {
    catalog?: string /** Settings over the defaults below (e.g. the sandbox on). */;
    env?: Record<string, string>;
  } = {},
): Promise<ServeProcess> {
  const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-web-'));
  const catalog = options.catalog ?? (await writeFixtureCatalog(dataDir));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GATEHOUSE_')));
  const env = {
    ...inherited,
    NODE_ENV: 'test',
    GATEHOUSE_HOST: '127.0.0.1',
    GATEHOUSE_PORT: String(port),
    GATEHOUSE_DATA_DIR: join(dataDir, 'data'),
    GATEHOUSE_ADMIN_TOKEN: ADMIN_TOKEN,
    GATEHOUSE_CATALOG: catalog,
    GATEHOUSE_LOG_LEVEL: 'warn',
    GATEHOUSE_LIST_TIMEOUT_MS: '15000',
    GATEHOUSE_CALL_TIMEOUT_MS: '15000',
    // The dashboard's catalog fixture lives in the working tree, which a sandbox does not show (and a
    // catalog entry cannot carry a sandbox): these tests are about the dashboard, not the sandbox.
    GATEHOUSE_STDIO_SANDBOX: 'off',
    ...options.env,
  };
  let child: ChildProcess | undefined;
  let log = '';

  const start = async () => {
    const [node, ...flags] = NODE_TS;
    const proc = spawn(node, [...flags, MAIN, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    proc.stdout?.on('data', (chunk: Buffer) => {
      log += chunk.toString();
    });
    proc.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString();
    });
    const deadline = Date.now() + 45_000;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`gatehouse serve exited with ${proc.exitCode}:\n${log}`);
      try {
        if ((await fetch(`${base}/healthz`)).ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    proc.kill('SIGKILL');
    throw new Error(`gatehouse serve did not start within 45 s:\n${log}`);
  };

  const stopChild = async () => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };

  await start();
  return {
    base,
    port,
    dataDir,
    output: () => log,
    kill: stopChild,
    restart: start,
    signal: (signal) => void child?.kill(signal),
    async stop() {
      await stopChild();
      await rm(dataDir, { recursive: true, force: true });
    },
    async rest<T>(method: string, path: string, body?: unknown, token = ADMIN_TOKEN) {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await response.text();
      return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
    },
  };
}
