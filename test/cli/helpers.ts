/** Runs the real `gatehouse` CLI in a child process (`node --import tsx src/cli/main.ts …`). */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NODE_TS } from '../helpers/processes.js';

export const CLI_MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Resolves with the exit code and output, whatever the exit code; GATEHOUSE_URL and the tokens come only from `env`. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const [node, ...flags] = NODE_TS;
  const { GATEHOUSE_URL: _url, GATEHOUSE_TOKEN: _token, GATEHOUSE_CLI_TOKEN: _cliToken, ...inherited } = process.env;
  return new Promise((resolve) => {
    execFile(
      node,
      [...flags, CLI_MAIN, ...args],
      { env: { ...inherited, NODE_ENV: 'test', ...env }, timeout: 90_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
