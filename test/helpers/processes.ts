import { execFile } from 'node:child_process';

/**
 * Runs TypeScript in a child process as one real process (`node --import tsx`): the tsx binary
 * would fork a second node, and a signal to the first would leave the second running.
 */
export const NODE_TS: readonly [string, ...string[]] = [process.execPath, '--import', 'tsx'];

/** Runs a TypeScript file in a new process and resolves with its stdout (rejects on a non-zero exit). */
export function runTs(file: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const [node, ...flags] = NODE_TS;
  return new Promise((resolve, reject) => {
    execFile(
      node,
      [...flags, file, ...args],
      { env: { ...process.env, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${file} failed: ${error.message}\n${stderr}`));
        else resolve(stdout);
      },
    );
  });
}
