/** `gatehouse doctor`'s row for the stdio sandbox: bubblewrap, the uid drop, and what /etc/passwd says of the uids. */
import { readFileSync } from 'node:fs';
import type { Config } from '../config.js';
import { sandboxState } from '../supervisor/sandbox-plan.js';

const SLOTS = 65_536;

/** Entries of /etc/passwd whose uid falls in the range the sandbox hands out (they would share limits). */
function passwdInRange(base: number): string[] {
  try {
    return readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .map((line) => line.split(':'))
      .filter((f) => f.length > 2 && Number(f[2]) >= base && Number(f[2]) < base + SLOTS)
      .map((f) => `${f[0]} (${f[2]})`);
  } catch {
    return [];
  }
}

export function sandboxCheck(config: Config): {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  hint?: string;
} {
  const name = 'stdio sandbox';
  const state = sandboxState(config.stdioSandbox);
  if (state.mode === 'off') {
    return {
      name,
      status: 'warn',
      detail: "off (GATEHOUSE_STDIO_SANDBOX=off): stdio servers run unsandboxed, as the gateway's own user",
      hint: 'Install bubblewrap and unset GATEHOUSE_STDIO_SANDBOX to sandbox them.',
    };
  }
  if (!state.bwrap) {
    return {
      name,
      status: 'fail',
      detail: 'bubblewrap (bwrap) is not installed: stdio servers will not start',
      hint: 'apt-get install bubblewrap (dnf install bubblewrap; apk add bubblewrap), or set GATEHOUSE_STDIO_SANDBOX=off.',
    };
  }
  if (!state.root) {
    return {
      name,
      status: 'ok',
      detail: `bubblewrap at ${state.bwrap}; not root, so children keep the gateway's uid (no per-server uid, no process limit)`,
    };
  }
  if (!state.uidDrop) {
    return {
      name,
      status: 'fail',
      detail: 'running as root, but setpriv or prlimit (util-linux) is missing: children cannot drop root',
      hint: 'apt-get install util-linux, or run the gateway as an unprivileged user.',
    };
  }
  const clashes = passwdInRange(config.stdioSandboxUidBase);
  const range = `${config.stdioSandboxUidBase}–${config.stdioSandboxUidBase + SLOTS - 1}`;
  return {
    name,
    status: clashes.length > 0 ? 'warn' : 'ok',
    detail:
      `bubblewrap at ${state.bwrap}; each server runs as its own uid in ${range} (numeric, no /etc/passwd entry needed)` +
      (clashes.length > 0
        ? `; /etc/passwd has accounts in that range: ${clashes.slice(0, 5).join(', ')}`
        : '; /etc/passwd has no account in that range'),
    ...(clashes.length > 0 && { hint: 'Choose another GATEHOUSE_STDIO_SANDBOX_UID_BASE.' }),
  };
}
