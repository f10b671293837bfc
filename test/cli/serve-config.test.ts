import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../fixtures/http.js';
import { TEST_ADMIN_TOKEN, TEST_SECRET_KEY } from '../helpers/gateway.js';
import { NODE_TS } from '../helpers/processes.js';
import { CLI_MAIN, runCli } from './helpers.js';

const SECRET = 'SENTINEL-serve-config-3b7c-do-not-leak';
const AGENT_TOKEN = 'gh_serve-config-agent-token-0123456789';

describe('gatehouse serve --config', { timeout: 120_000 }, () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-serve-config-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('exits 2 on a bad file, naming the file, the YAML path and the line, before opening the store', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'servers:\n  - id: web\n    name: Web\n    transport: streamable-http\n');
    const dataDir = join(dir, 'data');
    const [bad, pruneAlone] = await Promise.all([
      runCli(['serve', '--config', file, '--data-dir', dataDir, '--port', '0']),
      runCli(['serve', '--prune', '--data-dir', dataDir, '--port', '0']),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      `gatehouse: ${file} is not a valid Gatehouse config:\n  - ${file}:2:5: servers[0].url: required for streamable-http\n`,
    );
    expect(pruneAlone).toMatchObject({ code: 2, stderr: 'gatehouse: --prune needs --config.\n' });
    expect(existsSync(dataDir)).toBe(false);
  });

  it('applies the file before listening and logs the report', async () => {
    const file = join(dir, 'gatehouse.yaml');
    writeFileSync(
      file,
      [
        'servers:',
        '  - id: web',
        '    name: Web',
        '    transport: streamable-http',
        '    url: http://127.0.0.2:9/mcp',
        `    headers: {X-Api-Key: ${SECRET}}`,
        'settings:',
        '  hub.rateLimit: 42',
        'tokens:',
        '  - {name: laptop, role: agent, env: GH_LAPTOP_TOKEN}',
      ].join('\n'),
    );
    const port = await freePort();
    const [node, ...flags] = NODE_TS;
    const child = spawn(node, [...flags, CLI_MAIN, 'serve', '--config', file, '--port', String(port)], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        GATEHOUSE_DATA_DIR: join(dir, 'data'),
        GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
        GATEHOUSE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        GATEHOUSE_LOG_LEVEL: 'info',
        GH_LAPTOP_TOKEN: AGENT_TOKEN,
        GATEHOUSE_DRAIN_S: '0', // nothing to drain here: exit at once
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += String(chunk);
    });
    child.stderr.on('data', (chunk) => {
      output += String(chunk);
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 90_000;
      while (!output.includes('gatehouse serve listening')) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`serve did not start:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const get = (path: string, token: string) =>
        fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${token}` } });
      const server = await (await get('/api/mcp/servers/web', TEST_ADMIN_TOKEN)).json();
      expect(server).toMatchObject({ id: 'web', sourceKind: 'config', headers: { 'X-Api-Key': { set: true } } });
      expect((await (await get('/api/settings', TEST_ADMIN_TOKEN)).json()).settings['hub.rateLimit']).toBe(42);
      expect((await get('/info', AGENT_TOKEN)).status).toBe(200);

      const lines = output.split('\n').filter((l) => l.startsWith('{'));
      const applied = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'declarative config applied');
      expect(applied).toMatchObject({
        config: file,
        prune: false,
        servers: { created: ['web'], updated: [], pruned: [] },
        settings: { updated: ['hub.rateLimit'] },
        tokens: { created: ['laptop'] },
      });
      expect(output).toContain('servers[0].headers.X-Api-Key is a literal secret in gatehouse.yaml');
      expect(output).not.toContain(SECRET);
      expect(output).not.toContain(AGENT_TOKEN);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });
});
