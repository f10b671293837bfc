/**
 * What each stdio child is allowed, decided in one place for the supervisor and the handshake:
 * whether its command is in `stdio.allowedCommands`, and the bubblewrap sandbox it runs in — its
 * state folder (`<dataDir>/stdio-state/<id>`, 0700, owned by its uid), its uid (when the gateway is
 * root: `GATEHOUSE_STDIO_SANDBOX_UID_BASE` + a slot kept in `stdio-state/slots.json`, so one
 * server's process limit never starves another's), its limits, network and mounts.
 */
import {
  accessSync,
  chmodSync,
  chownSync,
  constants,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { allowedProgram, assertCommandAllowed } from '../policy/commands.js';
import type { ServerOptions } from '../registry/records.js';
import type { SettingsService } from '../settings/service.js';
import {
  childEnvironment,
  findBwrap,
  type SandboxOptions,
  sandboxUnavailable,
  uidDropAvailable,
} from '../upstream/stdio/index.js';

export const STATE_DIR = 'stdio-state';
const SLOTS_FILE = 'slots.json';
const MAX_SLOTS = 65_536;

export interface SandboxPlannerOptions {
  /** `GATEHOUSE_STDIO_SANDBOX`. */
  mode: 'on' | 'off';
  uidBase: number;
  dataDir: string;
  settings: SettingsService;
  /** Host paths never shown to a child (besides the data folder and the working directory). */
  hidden?: readonly string[];
  /** Where bubblewrap is (default: looked up once on this host); a seam for the no-bubblewrap case. */
  findBwrap?: () => string | undefined;
}

/** How a child was (or will be) run; what `/process` shows. */
export interface SandboxView {
  network: 'host' | 'none';
  uid: number | null;
  cwd: string;
  limits: { dataBytes: number; openFiles: number; processes: number | null };
}

export interface Launch {
  /** The absolute file to spawn, checked against the list (prepared with the child's env and found on its PATH). */
  program: string | undefined;
  sandbox: SandboxOptions | undefined;
  view: SandboxView | undefined;
  /** Workspace roots the child's uid cannot write (it may still read them). */
  unwritableRoots: string[];
}

/** Whether `uid` (its own group, no supplementary groups) may write into `folder`. */
function writableBy(folder: string, uid: number): boolean {
  try {
    const stat = statSync(folder);
    if (stat.uid === uid) return (stat.mode & 0o300) === 0o300;
    if (stat.gid === uid) return (stat.mode & 0o030) === 0o030;
    return (stat.mode & 0o003) === 0o003;
  } catch {
    return false;
  }
}

/** The state of the sandbox on this host, for `doctor` and the process route. */
export function sandboxState(mode: 'on' | 'off'): {
  mode: 'on' | 'off';
  bwrap: string | null;
  uidDrop: boolean;
  root: boolean;
} {
  return {
    mode,
    bwrap: findBwrap() ?? null,
    uidDrop: process.getuid?.() === 0 && uidDropAvailable(),
    root: process.getuid?.() === 0,
  };
}

export class SandboxPlanner {
  private readonly stateRoot: string;

  constructor(private readonly options: SandboxPlannerOptions) {
    this.stateRoot = join(resolve(options.dataDir), STATE_DIR);
  }

  get mode(): 'on' | 'off' {
    return this.options.mode;
  }

  /**
   * Checks the command against `stdio.allowedCommands`, then plans the sandbox: undefined when it
   * is off (globally or for this server). Given the child's declared `env` (unsealed), the command is
   * resolved on the PATH the child gets and that file is checked and handed back as `program`, the
   * one to spawn: a record's `PATH` cannot make it another program. Throws `stdio.command_not_allowed`
   * or `stdio.sandbox_unavailable`.
   */
  async prepare(id: string, command: string, options: ServerOptions, env?: Record<string, string>): Promise<Launch> {
    const settings = await this.options.settings.current();
    const allowed = settings['stdio.allowedCommands'];
    let program: string | undefined;
    if (env) program = allowedProgram(command, allowed, childEnvironment(env).PATH ?? '');
    else assertCommandAllowed(command, allowed);
    if (this.options.mode === 'off' || options.sandbox?.mode === 'off') {
      return { program, sandbox: undefined, view: undefined, unwritableRoots: [] };
    }
    const bwrap = (this.options.findBwrap ?? findBwrap)();
    if (!bwrap) throw sandboxUnavailable(id);
    const uid = process.getuid?.() === 0 && uidDropAvailable() ? this.options.uidBase + this.slotOf(id) : undefined;
    const stateDir = this.stateFolder(id, uid);
    const workspaceRoots = (options.workspaceRoots ?? []).map((r) => resolve(r));
    const limits = {
      dataBytes: settings['stdio.limits.dataMb'] * 1024 * 1024,
      openFiles: settings['stdio.limits.openFiles'],
      processes: settings['stdio.limits.processes'],
    };
    const network = options.sandbox?.network ?? 'host';
    const sandbox: SandboxOptions = {
      bwrap,
      stateDir,
      workspaceRoots,
      readOnlyPaths: (options.sandbox?.readOnlyPaths ?? []).map((p) => resolve(p)),
      network,
      uid,
      limits,
      hidden: [resolve(this.options.dataDir), process.cwd(), ...(this.options.hidden ?? []).map((p) => resolve(p))],
    };
    return {
      program,
      sandbox,
      unwritableRoots: uid === undefined ? [] : workspaceRoots.filter((root) => !writableBy(root, uid)),
      view: {
        network,
        uid: uid ?? null,
        cwd: workspaceRoots[0] ?? '/home/mcp',
        limits: { ...limits, processes: uid === undefined ? null : limits.processes },
      },
    };
  }

  /**
   * The workspace roots the server's child could not write, for `servers test`: as its own uid when
   * the sandbox drops to one (the gateway is root), else as the gateway's own user. A root that does
   * not exist is one too. No folder is created (only the server's uid slot is kept, as a start would).
   */
  unwritableRoots(
    id: string,
    options: ServerOptions,
  ): { uid: number | null; roots: { root: string; missing: boolean }[] } {
    const roots = (options.workspaceRoots ?? []).map((r) => resolve(r));
    if (roots.length === 0) return { uid: null, roots: [] };
    const sandboxed = this.options.mode === 'on' && options.sandbox?.mode !== 'off';
    const uid =
      sandboxed && process.getuid?.() === 0 && uidDropAvailable() ? this.options.uidBase + this.slotOf(id) : undefined;
    const writable = (root: string) => {
      if (uid !== undefined) return writableBy(root, uid);
      try {
        accessSync(root, constants.W_OK);
        return true;
      } catch {
        return false;
      }
    };
    return {
      uid: uid ?? process.getuid?.() ?? null,
      roots: roots.filter((root) => !writable(root)).map((root) => ({ root, missing: !existsSync(root) })),
    };
  }

  /** Removes an uninstalled server's state folder and frees its slot. */
  forget(id: string): void {
    rmSync(join(this.stateRoot, id), { recursive: true, force: true });
    const slots = this.readSlots();
    if (id in slots) {
      delete slots[id];
      this.writeSlots(slots);
    }
  }

  private stateFolder(id: string, uid: number | undefined): string {
    mkdirSync(this.stateRoot, { recursive: true, mode: 0o700 });
    const dir = join(this.stateRoot, id);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    if (uid !== undefined) chownSync(dir, uid, uid);
    return dir;
  }

  /** The server's slot: stable across restarts, the lowest free one for a new server. */
  private slotOf(id: string): number {
    const slots = this.readSlots();
    const known = slots[id];
    if (known !== undefined) return known;
    const used = new Set(Object.values(slots));
    let slot = 1;
    while (used.has(slot) && slot < MAX_SLOTS) slot += 1;
    slots[id] = slot;
    this.writeSlots(slots);
    return slot;
  }

  private readSlots(): Record<string, number> {
    try {
      return JSON.parse(readFileSync(join(this.stateRoot, SLOTS_FILE), 'utf8')) as Record<string, number>;
    } catch {
      return {};
    }
  }

  private writeSlots(slots: Record<string, number>): void {
    mkdirSync(this.stateRoot, { recursive: true, mode: 0o700 });
    const file = join(this.stateRoot, SLOTS_FILE);
    writeFileSync(`${file}.tmp`, `${JSON.stringify(slots)}\n`, { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
  }
}
