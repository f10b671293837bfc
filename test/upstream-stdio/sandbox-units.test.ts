/** The sandbox's pure parts: the bubblewrap invocation and the allowed-commands rule. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { commandAllowed } from '../../src/policy/commands.js';
import { type SandboxOptions, sandboxLaunch } from '../../src/upstream/stdio/sandbox.js';

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function place() {
  const base = mkdtempSync(join(tmpdir(), 'gh-sandbox-units-'));
  folders.push(base);
  const dataDir = join(base, 'data');
  const state = join(dataDir, 'stdio-state', 'x');
  const root = join(base, 'root');
  mkdirSync(state, { recursive: true });
  mkdirSync(root);
  writeFileSync(join(dataDir, 'secret.key'), 'k');
  return { base, dataDir, state, root };
}

function options(p: ReturnType<typeof place>, extra: Partial<SandboxOptions> = {}): SandboxOptions {
  return {
    bwrap: '/usr/bin/bwrap',
    stateDir: p.state,
    workspaceRoots: [p.root],
    readOnlyPaths: [],
    network: 'host',
    uid: 200_001,
    limits: { dataBytes: 1 << 30, openFiles: 1024, processes: 64 },
    hidden: [p.dataDir],
    ...extra,
  };
}

/** The value after each occurrence of `flag`. */
const valuesAfter = (list: string[], flag: string) => list.flatMap((v, i) => (v === flag ? [list[i + 1]] : []));

describe('sandboxLaunch', () => {
  it('builds an allow-list: namespaces, read-only system folders, the state folder as HOME, the roots writable', () => {
    const p = place();
    const env: Record<string, string> = { HOME: '/root' };
    const launch = sandboxLaunch('/usr/bin/node', ['/usr/lib/x.js'], env, options(p));
    expect(launch.command).toBe('/usr/bin/bwrap');
    expect(launch.args.slice(0, 3)).toEqual(['--args', '3', '--']);
    for (const flag of ['--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts']) {
      expect(launch.options).toContain(flag);
    }
    expect(launch.options).not.toContain('--unshare-net');
    expect(valuesAfter(launch.options, '--ro-bind')).toContain('/usr');
    expect(valuesAfter(launch.options, '--ro-bind')).not.toContain(p.dataDir);
    expect(valuesAfter(launch.options, '--bind')).toEqual([p.state, p.root]);
    expect(valuesAfter(launch.options, '--chdir')).toEqual([p.root]);
    expect(env.HOME).toBe('/home/mcp');
    // Root drops to the server's uid, with its limits, before the command runs.
    expect(launch.args).toContain('--reuid=200001');
    expect(launch.args).toContain('--nproc=64:64');
    expect(launch.args.slice(-2)).toEqual(['/usr/bin/node', '/usr/lib/x.js']);
  });

  it('network none unshares the network; no uid means no setpriv and no process limit', () => {
    const p = place();
    const launch = sandboxLaunch(
      '/usr/bin/node',
      [],
      {},
      options(p, { network: 'none', uid: undefined, workspaceRoots: [] }),
    );
    expect(launch.options).toContain('--unshare-net');
    expect(launch.args.some((a) => a.startsWith('--reuid'))).toBe(false);
    expect(launch.args.some((a) => a.startsWith('--nproc'))).toBe(false);
    expect(valuesAfter(launch.options, '--chdir')).toEqual(['/home/mcp']);
  });

  it('masks the data folder when a read-only path would show it', () => {
    const p = place();
    const launch = sandboxLaunch('/usr/bin/node', [], {}, options(p, { readOnlyPaths: [p.base] }));
    expect(valuesAfter(launch.options, '--ro-bind')).toContain(p.base);
    expect(valuesAfter(launch.options, '--tmpfs')).toContain(p.dataDir);
  });
});

describe('stdio.allowedCommands', () => {
  const PATH = '/usr/local/bin:/usr/bin:/bin';
  it('matches a bare name, or a path to the file PATH resolves that name to; an absolute entry exactly', () => {
    expect(commandAllowed('node', ['node'], PATH)).toBe(true);
    expect(commandAllowed('/usr/bin/node', ['node'], PATH)).toBe(true);
    expect(commandAllowed(join(tmpdir(), 'node'), ['node'], PATH)).toBe(false);
    expect(commandAllowed('bash', ['node', 'npx'], PATH)).toBe(false);
    expect(commandAllowed('/usr/bin/bash', ['/usr/bin/bash'], PATH)).toBe(true);
    expect(commandAllowed('/usr/bin/bash', ['/bin/sh'], PATH)).toBe(false);
    expect(commandAllowed('docker', [], PATH)).toBe(false);
  });
});
