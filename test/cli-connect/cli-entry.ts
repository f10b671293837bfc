/**
 * A `gatehouse` with only `connect` and `doctor`, run the way `src/cli/main.ts` runs commands (a Gatehouse error is
 * a message on stderr and exit 2), so both can be tested as real processes before main.ts registers them.
 */
import { Command } from 'commander';
import { addConnectCommands } from '../../src/cli/connect/index.js';
import { addDoctorCommand } from '../../src/cli/doctor.js';
import { loadConfig } from '../../src/config.js';
import { isGatehouseError } from '../../src/errors.js';

const configOf = (flags: Record<string, unknown>) => loadConfig({ env: process.env, flags });
const program = new Command('gatehouse');
addConnectCommands(program, configOf);
addDoctorCommand(program, configOf);
try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (!isGatehouseError(error)) throw error;
  process.stderr.write(`gatehouse: ${error.message}\n`);
  process.exitCode = 2;
}
