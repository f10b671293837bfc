/**
 * The real `gatehouse serve` process with stdio servers: one declared in its `--config` file starts
 * with it (enabled, not lazy), another is started and stopped with `gatehouse servers start|stop`
 * over the REST API, and SIGTERM to the gateway reaps every child before it exits — nothing carrying
 * the test's markers is left, and no pid file either.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PID_DIR } from '../../src/supervisor/pidfile.js';
import { CLI_MAIN, runCli } from '../cli/helpers.js';
import { freePort } from '../fixtures/http.js';
import { cleanUp, FIXTURE_SANDBOX, newMarker, pidsWithMarker, waitFor } from '../fixtures/stdio/index.js';
import { TEST_ADMIN_TOKEN, TEST_SECRET_KEY } from '../helpers/gateway.js';
import { NODE_TS } from '../helpers/processes.js';
import { PLAIN_SERVER } from './helpers.js';

const markers: string[] = [];
const folders: string[] = [];
let serve: ChildProcess | undefined;

afterAll(async () => {
  if (serve && serve.exitCode === null && serve.signalCode === null) serve.kill('SIGKILL');
  expect(await cleanUp([], markers)).toEqual({});
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe('gatehouse serve with stdio servers', () => {
  it('starts declared servers, starts and stops them from the CLI, and reaps them all on SIGTERM', {
    timeout: 180_000,
  }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-serve-stdio-'));
    folders.push(dataDir);
    const declared = newMarker();
    const manual = newMarker();
    markers.push(declared, manual);
    const config = join(dataDir, 'gatehouse.yaml');
    writeFileSync(
      config,
      JSON.stringify({
        servers: [
          {
            id: 'declared',
            name: 'declared',
            transport: 'stdio',
            command: process.execPath,
            args: [PLAIN_SERVER, `--gatehouse-test-marker=${declared}`],
            sandbox: FIXTURE_SANDBOX,
          },
        ],
      }),
    );
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const [node, ...flags] = NODE_TS;
    serve = spawn(node, [...flags, CLI_MAIN, 'serve', '--config', config], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        GATEHOUSE_DATA_DIR: dataDir,
        GATEHOUSE_PORT: String(port),
        GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
        GATEHOUSE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        GATEHOUSE_LOG_LEVEL: 'warn',
        GATEHOUSE_STDIO_GRACE_MS: '500',
        GATEHOUSE_DRAIN_S: '0', // nothing to drain here: close at once
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    serve.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const exited = new Promise<number | null>((resolve) => serve?.once('exit', (code) => resolve(code)));
    const env = { GATEHOUSE_URL: url, GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };

    // The declared server is started with the gateway.
    expect(await waitFor(() => pidsWithMarker(declared).length === 1, 60_000), stderr).toBe(true);

    const manifest = join(dataDir, 'manual.json');
    writeFileSync(
      manifest,
      JSON.stringify({
        name: 'manual',
        transport: 'stdio',
        command: process.execPath,
        args: [PLAIN_SERVER, `--gatehouse-test-marker=${manual}`],
        sandbox: FIXTURE_SANDBOX,
      }),
    );
    expect((await runCli(['servers', 'add', '--manifest', manifest, '--id', 'manual'], env)).code).toBe(0);
    expect(pidsWithMarker(manual)).toEqual([]);
    const started = await runCli(['servers', 'start', 'manual'], env);
    expect(started).toMatchObject({ code: 0, stderr: '' });
    expect(started.stdout).toMatch(/^manual running \(pid \d+\)\n$/);
    expect(pidsWithMarker(manual)).toHaveLength(1);
    const listed = await runCli(['servers', 'list', '--json'], env);
    const states = Object.fromEntries(
      JSON.parse(listed.stdout).servers.map((s: { id: string; state: string }) => [s.id, s.state]),
    );
    expect(states).toEqual({ declared: 'running', manual: 'running' });
    const stopped = await runCli(['servers', 'stop', 'manual'], env);
    expect(stopped.stdout).toBe('manual stopped\n');
    expect(pidsWithMarker(manual)).toEqual([]);
    expect((await runCli(['servers', 'start', 'manual'], env)).code).toBe(0);

    // SIGTERM: the gateway closes, stopping every child's group before it exits.
    expect(readdirSync(join(dataDir, PID_DIR))).toHaveLength(1);
    serve.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(pidsWithMarker(declared)).toEqual([]);
    expect(pidsWithMarker(manual)).toEqual([]);
    const pidFiles = join(dataDir, PID_DIR);
    expect(existsSync(pidFiles) ? readdirSync(pidFiles) : []).toEqual([]);
  });
});
