#!/usr/bin/env node
/** The `gatehouse` command. */
import { Command, Option } from 'commander';
import { type Config, loadConfig, SETTINGS, type SettingKey } from '../config.js';
import { isGatehouseError } from '../errors.js';
import { VERSION } from '../version.js';
import { addAdminCommands } from './admin.js';
import { addApprovalCommands } from './approvals.js';
import { runConduit } from './conduit.js';
import { addConnectCommands } from './connect/index.js';
import { addDoctorCommand } from './doctor.js';
import { addImportCommand } from './import.js';
import { ApiError, formatApiError } from './rest-client.js';
import { addSecretCommands } from './secrets.js';
import { runServe } from './serve.js';
import { addServerCommands } from './servers.js';
import { addStdioBridgeCommand } from './stdio-bridge.js';
import { addTokenCommands } from './token.js';
import { addToolsetCommands } from './toolsets.js';
import { addUserCommands } from './users.js';

/**
 * Adds one `--flag` per setting, so every setting can be given on the command line; a boolean gets
 * `--flag` and `--no-flag` (so a flag can turn off what the environment or the default turns on).
 */
function withSettingFlags(command: Command, keys: readonly SettingKey[]): Command {
  for (const key of keys) {
    const def = SETTINGS[key];
    const isBoolean = 'default' in def && typeof def.default === 'boolean';
    const option = new Option(isBoolean ? `--${def.flag}` : `--${def.flag} <value>`, def.description);
    command.addOption(option);
    if (isBoolean) command.addOption(new Option(`--no-${def.flag}`, `turn ${def.flag} off`));
  }
  return command;
}

function configFrom(flags: Record<string, unknown>): Config {
  return loadConfig({ env: process.env, flags });
}

export function buildCli(): Command {
  const program = new Command('gatehouse')
    .description('Gatehouse: the MCP gateway between AI agents and their tools.')
    .version(VERSION)
    .showHelpAfterError();

  const conduitKeys: SettingKey[] = [
    'host',
    'port',
    'toolToken',
    'listTimeoutMs',
    'callTimeoutMs',
    'allowPrivateNetworks',
    'allowHttp',
    'maxBodySize',
    'maxResponseSize',
    'sessionMode',
    'poolMaxSize',
    'poolIdleMs',
    'logLevel',
  ];
  withSettingFlags(
    program
      .command('conduit')
      .description(
        'Run the stateless operations plane (a drop-in for hadrontool-mcp): /ops/list-tools, /ops/call-tool.',
      ),
    conduitKeys,
  ).action(async (flags: Record<string, unknown>) => {
    await runConduit(configFrom(flags));
  });

  // Every setting of the one schema: a new setting gets its flag here without another line.
  const serveKeys = Object.keys(SETTINGS) as SettingKey[];
  withSettingFlags(
    program
      .command('serve')
      .description('Run the full gateway: registry, tokens, settings, sealed secrets, audit (SQLite or PostgreSQL).')
      .option('--config <file>', 'a gatehouse.yaml of servers, settings and tokens to apply at start')
      .option('--prune', 'with --config: remove servers and config tokens the file omits'),
    serveKeys,
  ).action(async (flags: Record<string, unknown> & { config?: string; prune?: boolean }) => {
    await runServe(configFrom(flags), { configFile: flags.config, prune: flags.prune });
  });

  addTokenCommands(program, configFrom);
  addUserCommands(program, configFrom);
  addServerCommands(program, configFrom);
  addApprovalCommands(program);
  addAdminCommands(program);
  addConnectCommands(program, configFrom);
  addStdioBridgeCommand(program);
  addDoctorCommand(program, configFrom);
  addToolsetCommands(program);
  addSecretCommands(program);
  addImportCommand(program);
  return program;
}

async function main(): Promise<void> {
  try {
    await buildCli().parseAsync(process.argv);
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
