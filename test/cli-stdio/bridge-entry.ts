/**
 * A `gatehouse` with only the `stdio` command, the way `src/cli/main.ts` runs commands (a Gatehouse error is a
 * message on stderr and exit 2), so the bridge can be tested as a real process before main.ts registers it.
 */
import { Command } from 'commander';
import { addStdioBridgeCommand } from '../../src/cli/stdio-bridge.js';
import { isGatehouseError } from '../../src/errors.js';

const program = new Command('gatehouse');
addStdioBridgeCommand(program);
try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (!isGatehouseError(error)) throw error;
  process.stderr.write(`gatehouse: ${error.message}\n`);
  process.exitCode = 2;
}
