/**
 * The bubblewrap sandbox around a stdio child (Linux).
 *
 * A stdio server is third-party code run on the gateway's host. Inside the sandbox it sees:
 * - fresh PID, IPC and UTS namespaces (`/proc` lists only the sandbox's own processes), and with
 *   `network: "none"` a fresh network namespace with nothing but a loopback that is down;
 * - an allow-list of read-only mounts: `/usr` (and the `/bin`, `/lib*`, `/sbin` links or folders),
 *   `/etc` with its secrets masked, the resolved command's own prefix (a Node or a package outside
 *   `/usr`), absolute-path arguments that are files, and the record's extra `readOnlyPaths`;
 * - tmpfs over `/tmp`, `/run`, `/home`, `/root` and the gateway's `$HOME`;
 * - writable: its own state folder (mode 0700, its `HOME` and npm/npx cache, bound at `/home/mcp`) and
 *   its declared workspace roots, each at its own path.
 * Nothing else of the host is mounted: the gateway's data folder, key file, config file and working
 * tree are absent (and masked when they lie under something that is mounted).
 *
 * When the gateway runs as root, bubblewrap (run as root: the binds are made first) starts
 * `prlimit` (data size, open files, processes) then `setpriv`, which drops to the server's own
 * numeric uid/gid with no supplementary groups, no capabilities and no new privileges; only then
 * is the command executed. Without root, bubblewrap runs unprivileged (a user namespace) and the
 * child keeps the gateway's uid; the process limit is then not applied (it counts the gateway's
 * own processes too).
 *
 * The options go through a pipe (`--args 3`), so the long list stays off the command line; the
 * command and its arguments follow on argv, as bubblewrap requires.
 */
import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { GatehouseError } from '../../errors.js';

export type SandboxNetwork = 'host' | 'none';

export interface SandboxLimits {
  /** RLIMIT_DATA in bytes (not RLIMIT_AS: Node reserves address space for WebAssembly and fetch). */
  dataBytes: number;
  /** RLIMIT_NOFILE. */
  openFiles: number;
  /** RLIMIT_NPROC of the child's uid; only applied with a uid of its own. */
  processes: number;
}

export interface SandboxOptions {
  /** The bubblewrap binary (absolute). */
  bwrap: string;
  /** The server's own state folder on the host (created 0700 by the caller): the child's HOME. */
  stateDir: string;
  /** Writable folders, bound at their own path. The first is the child's working directory. */
  workspaceRoots: readonly string[];
  /** Extra read-only paths, bound at their own path. */
  readOnlyPaths: readonly string[];
  network: SandboxNetwork;
  /** Run as this uid/gid (requires the gateway to be root). */
  uid?: number | undefined;
  limits: SandboxLimits;
  /** Host paths the child must never see even when under a mounted path (data folder, key, config, cwd). */
  hidden: readonly string[];
}

/** Where the state folder appears inside the sandbox (the child's HOME). */
export const SANDBOX_HOME = '/home/mcp';

/** Files of `/etc` that are masked (an empty file bound over each). */
const ETC_SECRETS = ['shadow', 'shadow-', 'gshadow', 'gshadow-', 'sudoers', 'security/opasswd', 'machine-id'];
/** Folders of `/etc` that are masked (an empty tmpfs over each). */
const ETC_SECRET_DIRS = ['ssh', 'ssl/private', 'sudoers.d', 'gatehouse'];
/** Top-level system folders mounted read-only when they exist (symlinks are recreated as symlinks). */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

const SETPRIV = '/usr/bin/setpriv';
const PRLIMIT = '/usr/bin/prlimit';

let bwrapFound: string | null | undefined;

/** The bubblewrap binary, when one is installed and executable (cached). */
export function findBwrap(path = process.env.PATH ?? ''): string | undefined {
  if (bwrapFound === undefined) bwrapFound = resolveOnPath('bwrap', `/usr/bin${delimiter}${path}`) ?? null;
  return bwrapFound ?? undefined;
}

/** What to tell someone whose host has no bubblewrap. */
export function sandboxUnavailable(label: string): GatehouseError {
  return new GatehouseError(
    'stdio.sandbox_unavailable',
    `The stdio server "${label}" was not started: bubblewrap (bwrap) is not installed, so it cannot be sandboxed. Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Alpine: apk add bubblewrap), or set GATEHOUSE_STDIO_SANDBOX=off to run stdio servers unsandboxed.`,
    { reason: 'bwrap_missing' },
  );
}

/** Whether the helpers the uid drop needs are here (util-linux). */
export function uidDropAvailable(): boolean {
  return isExecutable(SETPRIV) && isExecutable(PRLIMIT);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Whether two paths name one file (`/bin/node` and `/usr/bin/node` on a merged-/usr system are one). */
export function sameFile(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return false;
  if (a === b) return true;
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/** A command name resolved against PATH (an absolute or relative path is taken as is). */
export function resolveOnPath(command: string, path = process.env.PATH ?? ''): string | undefined {
  if (command.includes('/')) {
    const absolute = resolve(command);
    return isExecutable(absolute) ? absolute : undefined;
  }
  for (const folder of path.split(delimiter)) {
    if (!folder) continue;
    const candidate = join(folder, command);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

function within(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** Where a command lives: its folder's parent (`/usr/local/bin/node` → `/usr/local`), following links. */
function prefixesOf(resolved: string): string[] {
  const out = new Set<string>();
  for (const file of [resolved, realOrSelf(resolved)]) {
    const prefix = dirname(dirname(file));
    // A command straight under / (e.g. /opt/x) has / as prefix: mount only its folder then.
    out.add(prefix === sep ? dirname(file) : prefix);
  }
  return [...out];
}

export interface SandboxedLaunch {
  command: string;
  args: string[];
  /** Written NUL-separated to fd 3. */
  options: string[];
  cwd: string;
}

/**
 * The bubblewrap invocation for one child. `command` must already be resolved to an absolute path.
 * `env` is the child's environment (HOME and the npm cache are pointed at the state folder).
 */
export function sandboxLaunch(
  resolvedCommand: string,
  args: readonly string[],
  env: Record<string, string>,
  sandbox: SandboxOptions,
): SandboxedLaunch {
  const o: string[] = ['--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--hostname', 'mcp'];
  if (sandbox.network === 'none') o.push('--unshare-net');
  const mounted: string[] = [];
  /** Folders that exist in the sandbox's root: created, or mount points. */
  const present = new Set<string>(['/']);
  // bubblewrap makes missing parents of a mount point 0700 (root's): make them 0755 first.
  const parents = (path: string) => {
    const chain: string[] = [];
    for (let dir = dirname(path); !present.has(dir) && dir !== dirname(dir); dir = dirname(dir)) chain.unshift(dir);
    for (const dir of chain) {
      present.add(dir);
      // Inside a host folder already mounted it exists; elsewhere (root, a tmpfs) it is made here.
      if (!mounted.some((m) => within(dir, m))) o.push('--perms', '0755', '--dir', dir);
    }
  };
  const mount = (kind: '--ro-bind' | '--bind', source: string, dest: string) => {
    parents(dest);
    o.push(kind, source, dest);
    present.add(dest);
  };
  const roBind = (path: string) => {
    if (!existsSync(path)) return;
    mount('--ro-bind', path, path);
    mounted.push(path);
  };
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue;
    const real = realOrSelf(dir);
    // Merged /usr: /bin → usr/bin is a symlink; recreate it rather than bind a second copy.
    if (real !== dir) {
      o.push('--symlink', relative(dirname(dir), real), dir);
      present.add(dir);
    } else roBind(dir);
  }
  roBind('/etc');
  o.push('--proc', '/proc', '--dev', '/dev');
  present.add('/proc').add('/dev');
  for (const dir of new Set(['/tmp', '/run', '/home', '/root', homedir()])) {
    parents(dir);
    o.push('--perms', '1777', '--tmpfs', dir);
    present.add(dir);
  }
  for (const file of ETC_SECRETS) if (existsSync(`/etc/${file}`)) o.push('--ro-bind', '/dev/null', `/etc/${file}`);
  for (const dir of ETC_SECRET_DIRS) if (existsSync(`/etc/${dir}`)) o.push('--tmpfs', `/etc/${dir}`);

  for (const prefix of prefixesOf(resolvedCommand)) if (!mounted.some((m) => within(prefix, m))) roBind(prefix);
  for (const arg of args) {
    // A script named by absolute path (`node /opt/server/index.js`): that file only.
    if (!isAbsolute(arg) || mounted.some((m) => within(arg, m))) continue;
    try {
      if (statSync(arg).isFile()) roBind(arg);
    } catch {}
  }
  for (const path of sandbox.readOnlyPaths) roBind(path);
  mount('--bind', sandbox.stateDir, SANDBOX_HOME);
  for (const root of sandbox.workspaceRoots) {
    mount('--bind', root, root);
    mounted.push(root);
  }

  // What must never be seen, wherever it lies under something mounted above.
  for (const path of sandbox.hidden) {
    if (!mounted.some((m) => within(path, m) && m !== path) && !mounted.includes(path)) continue;
    // An explicit read-only path inside a hidden folder (a fixture in the working tree) stays visible,
    // and so does the command itself or a whole system folder (a gateway started in /usr or /etc).
    if (sandbox.readOnlyPaths.some((r) => within(r, path) && r !== path)) continue;
    if (within(resolvedCommand, path) || [...SYSTEM_DIRS, '/etc'].includes(path)) continue;
    let isDir = false;
    try {
      isDir = statSync(path).isDirectory();
    } catch {
      continue;
    }
    if (isDir) o.push('--tmpfs', path);
    else o.push('--ro-bind', '/dev/null', path);
  }

  const cwd = sandbox.workspaceRoots[0] ?? SANDBOX_HOME;
  o.push('--chdir', cwd);
  // The environment is handed to bubblewrap by spawn; HOME and caches point into the state folder.
  env.HOME = SANDBOX_HOME;
  env.npm_config_cache = `${SANDBOX_HOME}/.npm`;
  env.XDG_CACHE_HOME = `${SANDBOX_HOME}/.cache`;
  env.TMPDIR = '/tmp';

  const inner: string[] = [];
  if (sandbox.uid !== undefined) {
    o.push('--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID');
    const { dataBytes, openFiles, processes } = sandbox.limits;
    inner.push(
      PRLIMIT,
      `--data=${dataBytes}:${dataBytes}`,
      `--nofile=${openFiles}:${openFiles}`,
      `--nproc=${processes}:${processes}`,
      '--',
      SETPRIV,
      `--reuid=${sandbox.uid}`,
      `--regid=${sandbox.uid}`,
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--',
    );
  } else {
    const { dataBytes, openFiles } = sandbox.limits;
    inner.push(PRLIMIT, `--data=${dataBytes}:${dataBytes}`, `--nofile=${openFiles}:${openFiles}`, '--');
  }
  return {
    command: sandbox.bwrap,
    args: ['--args', '3', '--', ...inner, resolvedCommand, ...args],
    options: o,
    cwd,
  };
}
