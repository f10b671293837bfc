/**
 * The `gatehouse` commands, loaded one at a time: the command being run is added in full (its module
 * imported then); every other one is listed (`--help`) by its name and summary, without importing its
 * module. `serve` imports the gateway, and nothing else does, so a restart does not pay for the CLI's other
 * commands (nor `token create` for the gateway).
 */
import { Command, Option } from 'commander';
import { type Config, loadConfig, SETTINGS, type SettingKey } from '../config.js';
import { VERSION } from '../version.js';

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

function addConduitCommand(program: Command): void {
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
  withSettingFlags(program.command('conduit').description(COMMAND_SUMMARIES.conduit), conduitKeys).action(
    async (flags: Record<string, unknown>) => {
      const { runConduit } = await import('./conduit.js');
      await runConduit(configFrom(flags));
    },
  );
}

function addServeCommand(program: Command): void {
  // Every setting of the one schema: a new setting gets its flag here without another line.
  const serveKeys = Object.keys(SETTINGS) as SettingKey[];
  withSettingFlags(
    program
      .command('serve')
      .description(COMMAND_SUMMARIES.serve)
      .option('--config <file>', 'a gatehouse.yaml of servers, settings and tokens to apply at start')
      .option('--prune', 'with --config: remove servers and config tokens the file omits'),
    serveKeys,
  ).action(async (flags: Record<string, unknown> & { config?: string; prune?: boolean }) => {
    const { runServe } = await import('./serve.js');
    await runServe(configFrom(flags), { configFile: flags.config, prune: flags.prune });
  });
}

/** Each command's one line in `gatehouse --help`, in the order listed (the same as its own `description`). */
export const COMMAND_SUMMARIES = {
  conduit: 'Run the stateless operations plane (a drop-in for hadrontool-mcp): /ops/list-tools, /ops/call-tool.',
  serve: 'Run the full gateway: registry, tokens, settings, sealed secrets, audit (SQLite or PostgreSQL).',
  token: 'Create, list and revoke bearer tokens (opens the store directly).',
  users: 'Create, list, disable and delete users — people who sign in and own agent tokens.',
  servers: "Manage a running gateway's MCP servers (REST API); export the registry (opens the store).",
  approvals: 'List, inspect and decide approvals of gated calls (through the REST API of a running gateway).',
  admin: 'The admin surface (/mcp/admin).',
  connect: "Print (or merge into the client's file) the MCP config entry that connects a client to the Gatehouse hub.",
  stdio:
    'Serve the hub to a stdio-only MCP client (Claude Desktop): relay stdin/stdout to the hub over Streamable ' +
    'HTTP. The agent token comes from GATEHOUSE_TOKEN.',
  doctor:
    'Check a Gatehouse installation (opens the store read-only): store, migrations, secret key, tokens, servers, ' +
    'settings. Exits 1 when a check fails.',
  toolsets: 'Toolsets: named sets of tools from several servers, each served at /mcp/t/{name}.',
  overrides: 'Per-tool overrides: display name, description, fixed (hidden) arguments, annotations.',
  import:
    'Register the MCP servers a client already has (its mcpServers/servers config) in a running gateway; values sealed, never shown.',
  secrets: 'Sealing-key rotation: which keys the stored secrets are sealed with, and re-sealing them.',
} as const;

type CommandName = keyof typeof COMMAND_SUMMARIES;

/** How commands are added in full: their module is imported only then (one module may add several). */
const MODULES: readonly { commands: readonly CommandName[]; add(program: Command): Promise<void> }[] = [
  { commands: ['conduit'], add: async (program) => addConduitCommand(program) },
  { commands: ['serve'], add: async (program) => addServeCommand(program) },
  { commands: ['token'], add: async (program) => (await import('./token.js')).addTokenCommands(program, configFrom) },
  { commands: ['users'], add: async (program) => (await import('./users.js')).addUserCommands(program, configFrom) },
  {
    commands: ['servers'],
    add: async (program) => (await import('./servers.js')).addServerCommands(program, configFrom),
  },
  { commands: ['approvals'], add: async (program) => (await import('./approvals.js')).addApprovalCommands(program) },
  { commands: ['admin'], add: async (program) => (await import('./admin.js')).addAdminCommands(program) },
  {
    commands: ['connect'],
    add: async (program) => (await import('./connect/index.js')).addConnectCommands(program, configFrom),
  },
  { commands: ['stdio'], add: async (program) => (await import('./stdio-bridge.js')).addStdioBridgeCommand(program) },
  { commands: ['doctor'], add: async (program) => (await import('./doctor.js')).addDoctorCommand(program, configFrom) },
  {
    commands: ['toolsets', 'overrides'],
    add: async (program) => (await import('./toolsets.js')).addToolsetCommands(program),
  },
  { commands: ['import'], add: async (program) => (await import('./import.js')).addImportCommand(program) },
  { commands: ['secrets'], add: async (program) => (await import('./secrets.js')).addSecretCommands(program) },
];

/** The command `args` (the words after `gatehouse`) run or ask help for: the first word, or the one after `help`. */
function commandOf(args: readonly string[]): string | undefined {
  const words = args.filter((a) => !a.startsWith('-'));
  return words[0] === 'help' ? words[1] : words[0];
}

/**
 * The CLI for `argv`: the command it names is added in full (its module loaded); every other one as its
 * name and summary only, so `gatehouse --help` lists them all. Without argv every command is loaded.
 */
export async function buildCli(argv?: readonly string[]): Promise<Command> {
  const program = new Command('gatehouse')
    .description('Gatehouse: the MCP gateway between AI agents and their tools.')
    .version(VERSION)
    .showHelpAfterError();
  const wanted = argv === undefined ? undefined : commandOf(argv.slice(2));
  for (const module of MODULES) {
    if (argv === undefined || module.commands.some((name) => name === wanted)) await module.add(program);
    else for (const name of module.commands) program.command(name).description(COMMAND_SUMMARIES[name]);
  }
  return program;
}
