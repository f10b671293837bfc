/**
 * From a clone, `npm pack` and `npm install -g` of the tarball give a working `gatehouse` on the PATH: the bin
 * links to the built entry, which starts from any folder. Installed into a temporary prefix, never the machine's.
 * Install scripts are skipped (`--ignore-scripts`): they would compile better-sqlite3's native addon, which the
 * commands run here never load; that keeps this one test bounded. Dependencies come from npm's cache when there.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NPM_QUIET = ['--no-audit', '--no-fund', '--loglevel', 'error'];

describe('npm pack + npm install -g of the tarball', { timeout: 600_000 }, () => {
  let dir: string;
  let bin: string;
  // The installed command finds `node` (its shebang) and nothing else of this machine's PATH.
  const env = () => ({ PATH: [join(dir, 'prefix', 'bin'), dirname(process.execPath)].join(delimiter), HOME: dir });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-pack-'));
    // `prepack` builds what is stale (scripts/build.mjs), so the tarball holds a current dist/.
    const packed = await run('npm', ['pack', '--pack-destination', dir, '--json', ...NPM_QUIET], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
    });
    const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
    await run(
      'npm',
      [
        'install',
        '-g',
        '--prefix',
        join(dir, 'prefix'),
        join(dir, filename),
        '--ignore-scripts',
        '--prefer-offline',
        ...NPM_QUIET,
      ],
      { cwd: dir, timeout: 480_000 },
    );
    bin = join(dir, 'prefix', 'bin', 'gatehouse');
  }, 600_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('gives a gatehouse command that answers --version and --help, and whose connect writes absolute paths', async () => {
    const version = await run('gatehouse', ['--version'], { env: env(), cwd: dir });
    expect(version.stdout.trim()).toBe(VERSION);
    const help = await run('gatehouse', ['--help'], { env: env(), cwd: dir });
    for (const command of ['serve', 'token', 'servers', 'connect', 'stdio']) expect(help.stdout).toContain(command);

    // Claude Desktop's entry names this Node and the installed entry file, so it launches without any PATH.
    const file = join(dir, 'claude_desktop_config.json');
    await run(
      'gatehouse',
      ['connect', '--client', 'claude-desktop', '--url', 'http://127.0.0.1:8080', '--write', file],
      {
        env: env(),
        cwd: dir,
      },
    );
    const entry = JSON.parse(readFileSync(file, 'utf8')).mcpServers.gatehouse as { command: string; args: string[] };
    expect(entry.command).toBe(process.execPath);
    expect(entry.args).toEqual([realpathSync(bin), 'stdio', '--url', 'http://127.0.0.1:8080/mcp']);
    const launched = await run(entry.command, [...entry.args.slice(0, -3), '--version'], { env: {}, cwd: tmpdir() });
    expect(launched.stdout.trim()).toBe(VERSION);
  });
});
