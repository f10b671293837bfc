#!/usr/bin/env node
/** The `gatehouse` command (its commands in `commands.ts`, each loaded only when it runs). */
import { isGatehouseError } from '../errors.js';
import { buildCli } from './commands.js';
import { ApiError, formatApiError } from './rest-client.js';

async function main(): Promise<void> {
  try {
    await (await buildCli(process.argv)).parseAsync(process.argv);
  } catch (error) {
    if (isGatehouseError(error)) {
      process.stderr.write(`gatehouse: ${error.message}\n`);
      process.exitCode = 2;
      return;
    }
    // The gateway refused or could not be reached: the command ran, and failed.
    if (error instanceof ApiError) {
      process.stderr.write(`gatehouse: ${formatApiError(error)}\n`);
      process.exitCode = 1;
      return;
    }
    throw error;
  }
}

await main();
