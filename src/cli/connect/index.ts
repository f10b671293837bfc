/**
 * `gatehouse connect --client <client>`: the MCP config entry that points a client at the hub — printed, or merged
 * into the client's file with `--write PATH`.
 *
 * `--token-name N` creates an agent token for the client. Like `gatehouse token create`, it opens the store directly
 * (`--data-dir`/`--database-url`, or GATEHOUSE_DATA_DIR/GATEHOUSE_DATABASE_URL): it is a bootstrap step that works
 * before the gateway runs and needs no admin token in the shell, and a running gateway sees the new token on its next
 * request. A live agent token with that name is refused (its value cannot be shown again; revoke it first), so
 * re-running does not pile up forgotten credentials. The token is created only after the file has been checked, and
 * revoked again if the write fails.
 *
 * Where the token ends up depends on the client (see clients.ts): a variable reference or a VS Code input where the
 * client supports one (the token is then shown once on stderr), the entry itself for LM Studio and Claude Desktop.
 * Those two are refused inside a git work tree unless `--allow-workspace`.
 */
import type { Command } from 'commander';
import type { Config } from '../../config.js';
import { GatehouseError } from '../../errors.js';
import { openStore } from '../../store/db.js';
import { TokenStore } from '../../store/tokens.js';
import { selfLaunch } from '../launch.js';
import { hubUrlFrom } from '../stdio-bridge.js';
import { openCliStore } from '../store-notice.js';
import { CLIENT_IDS, CLIENTS, type ClientSpec, isClientId, snippetOf, type WiringInput } from './clients.js';
import { mergeEntry } from './merge.js';
import { gitIgnores, gitWorkTreeOf, readTarget, writeTarget } from './target.js';

interface ConnectFlags {
  client: string;
  url?: string;
  name: string;
  tokenName?: string;
  groups?: string;
  tokenEnv: string;
  command?: string;
  write?: string;
  allowWorkspace?: boolean;
  dataDir?: string;
  databaseUrl?: string;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const out = (text: string) => void process.stdout.write(`${text}\n`);
const err = (text: string) => void process.stderr.write(`${text}\n`);

/** The gateway `serve` would listen on with this configuration, as a URL a client on this machine can use. */
function defaultGateway(config: Config): string {
  const host = ['0.0.0.0', '::', ''].includes(config.host) ? '127.0.0.1' : config.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.port}`;
}

function validate(flags: ConnectFlags): ClientSpec {
  if (!isClientId(flags.client)) {
    throw new GatehouseError('validation_error', `--client must be one of ${CLIENT_IDS.join(', ')}.`);
  }
  if (!NAME.test(flags.name)) {
    throw new GatehouseError('validation_error', '--name must be 1–64 letters, digits, ".", "_" or "-".');
  }
  if (!ENV_NAME.test(flags.tokenEnv)) {
    throw new GatehouseError('validation_error', '--token-env must be an environment variable name.');
  }
  if (flags.tokenEnv.startsWith('GATEHOUSE_') && flags.tokenEnv !== 'GATEHOUSE_TOKEN') {
    throw new GatehouseError(
      'validation_error',
      `--token-env ${flags.tokenEnv}: gatehouse refuses unknown GATEHOUSE_* variables at start; use GATEHOUSE_TOKEN or a name outside that prefix.`,
    );
  }
  if (flags.groups && !flags.tokenName) throw new GatehouseError('validation_error', '--groups needs --token-name.');
  if (flags.tokenName !== undefined && flags.tokenName.trim() === '') {
    throw new GatehouseError('validation_error', '--token-name must not be empty.');
  }
  return CLIENTS[flags.client];
}

async function createAgentToken(
  config: Config,
  name: string,
  groups: string[] | undefined,
): Promise<{ id: string; token: string; revoke(): Promise<void> }> {
  const store = await openCliStore(config);
  try {
    const live = await store.db
      .selectFrom('tokens')
      .select('id')
      .where('name', '=', name)
      .where('role', '=', 'agent')
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (live) {
      throw new GatehouseError(
        'conflict',
        `A live agent token named "${name}" exists (${live.id}); its value cannot be shown again. ` +
          `Revoke it first (gatehouse token revoke ${live.id}) or choose another --token-name.`,
      );
    }
    const created = await new TokenStore(store).create({ name, role: 'agent', groups, source: 'cli' });
    const { id } = created.record;
    return {
      id,
      token: created.token as string,
      revoke: async () => {
        const again = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
        try {
          await new TokenStore(again).revoke(id);
        } finally {
          await again.close();
        }
      },
    };
  } finally {
    await store.close();
  }
}

export async function runConnect(flags: ConnectFlags, configOf: (flags: Record<string, unknown>) => Config) {
  const spec = validate(flags);
  const config = configOf({ dataDir: flags.dataDir, databaseUrl: flags.databaseUrl });
  const hubUrl = hubUrlFrom(flags.url ?? process.env.GATEHOUSE_URL ?? defaultGateway(config));
  // Absolute by default, so a client without `gatehouse` on its PATH (a GUI app) still launches it.
  const launch = flags.command === undefined ? selfLaunch() : { command: flags.command, args: [] };
  const input: WiringInput = {
    hubUrl: hubUrl.href,
    name: flags.name,
    tokenEnv: flags.tokenEnv,
    command: launch.command,
    commandArgs: launch.args,
  };

  // Check the file before creating anything: a refusal leaves no token behind.
  const target = flags.write === undefined ? undefined : await readTarget(flags.write);
  if (target) {
    mergeEntry(target.text, spec, input, target.path);
    if (spec.secret === 'clear') {
      const workTree = await gitWorkTreeOf(target.realPath);
      if (workTree && !flags.allowWorkspace) {
        throw new GatehouseError(
          'forbidden',
          `Refusing to write ${target.path}: it is inside the git work tree ${workTree}, and ${spec.label}'s entry ` +
            'holds the agent token in clear. Write it outside the repository, or pass --allow-workspace if the file ' +
            'is never committed.',
        );
      }
      if (workTree && (await gitIgnores(target.realPath, workTree)) === false) {
        err(`warning: git does not ignore ${target.path}; add it to .gitignore so the token is never committed.`);
      }
    }
  }

  const groups = flags.groups
    ?.split(',')
    .map((g) => g.trim())
    .filter(Boolean);
  const created = flags.tokenName ? await createAgentToken(config, flags.tokenName, groups) : undefined;
  if (created) err(`Created agent token "${flags.tokenName}" (${created.id}).`);
  const clearToken = spec.secret === 'clear' ? created?.token : undefined;
  const wired: WiringInput = { ...input, token: clearToken };

  let inEntry = clearToken !== undefined;
  try {
    if (!target) {
      out(snippetOf(spec, wired));
      err(`Add this to ${spec.label}'s config, usually ${spec.usualPath}, or merge it with --write <path>.`);
    } else {
      const merged = mergeEntry(target.text, spec, wired, target.path);
      inEntry = merged.holdsToken;
      const exposed = merged.holdsToken && target.mode !== undefined && (target.mode & 0o077) !== 0;
      if (merged.changes.length === 0) {
        out(`${target.path}: already wires "${flags.name}" to ${hubUrl.href}; unchanged.`);
        if (exposed) err(`warning: ${target.path} holds a token and other users may read it: chmod 600 ${target.path}`);
      } else {
        await writeTarget(target, merged.text, merged.holdsToken);
        out(`${target.path}: ${merged.changes.join('; ')}${exposed ? ' (permissions now 0600)' : ''}.`);
      }
    }
  } catch (error) {
    if (created) {
      await created.revoke().catch(() => {});
      err(`Revoked the new token ${created.id} again, since the entry was not written.`);
    }
    throw error;
  }
  err(spec.tokenNote(wired, created?.token, inEntry));
}

export function addConnectCommands(program: Command, configOf: (flags: Record<string, unknown>) => Config): void {
  program
    .command('connect')
    .description(
      "Print (or merge into the client's file) the MCP config entry that connects a client to the Gatehouse hub.",
    )
    .requiredOption('--client <client>', CLIENT_IDS.join(' | '))
    .option('--url <url>', 'the gateway or its hub endpoint (env GATEHOUSE_URL; default: where serve listens)')
    .option('--name <name>', 'name of the entry in the client', 'gatehouse')
    .option('--token-name <name>', 'create an agent token with this name for the client (opens the store)')
    .option('--groups <groups>', 'with --token-name: agent groups, comma-separated (default: default)')
    .option('--token-env <NAME>', 'Claude Code, Cursor: the variable the entry reads the token from', 'GATEHOUSE_TOKEN')
    .option(
      '--command <path>',
      'Claude Desktop: the command that starts gatehouse (default: this Node and this CLI, by absolute path)',
    )
    .option('--write <path>', 'merge the entry into this file (created if missing; other entries and comments kept)')
    .option('--allow-workspace', 'write a clear-text token even into a file inside a git work tree')
    .option('--data-dir <dir>', 'with --token-name: data folder of the SQLite store')
    .option('--database-url <url>', 'with --token-name: PostgreSQL URL')
    .addHelpText(
      'after',
      '\nTokens: Claude Code and Cursor read it from an environment variable, VS Code prompts for it; LM Studio and\n' +
        'Claude Desktop hold it in their file, which is refused inside a git work tree unless --allow-workspace.\n' +
        'A file with "gatehouse": {"wire": false} at its top level is never edited.',
    )
    .action(async (flags: ConnectFlags) => {
      await runConnect(flags, configOf);
    });
}
