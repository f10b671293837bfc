/** Runs `connect`/`doctor` in a real child process with a clean environment (no GATEHOUSE_* from the caller). */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NODE_TS } from '../helpers/processes.js';

const ENTRY = fileURLToPath(new URL('./cli-entry.ts', import.meta.url));

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export function gatehouse(args: string[], env: Record<string, string> = {}, cwd?: string): Promise<Run> {
  const [node, ...flags] = NODE_TS;
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GATEHOUSE_')));
  return new Promise((resolve) => {
    execFile(
      node,
      [...flags, ENTRY, ...args],
      { env: { ...inherited, NODE_ENV: 'test', ...env }, timeout: 60_000, ...(cwd ? { cwd } : {}) },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
