/**
 * `gatehouse servers list|add|test|remove` change a running gateway through its REST API (`--url`, `--token`, or
 * `GATEHOUSE_URL`/`GATEHOUSE_CLI_TOKEN`), and so do the commands generated from the other server routes
 * (`route-commands.ts`: config, policy, expose, enable, disable, auth, logs, …); `servers export` is a bootstrap
 * command that opens the store directly.
 */
import { open, readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import type { Config } from '../config.js';
import { exportServers } from '../declarative/export.js';
import { GatehouseError } from '../errors.js';
import { ServerStore, type ServerView } from '../registry/records.js';
import type { TestResult } from '../registry/service.js';
import { loadSealKey } from '../secrets/key.js';
import { listToolsets } from '../toolsets/store.js';
import { printable } from './approvals.js';
import { anyOAuthFlag, type OAuthFlags, oauthAuthOf, withOAuthFlags } from './oauth-flags.js';
import { type ClientFlags, clientOptions, DEFAULT_GATEWAY_URL, RestClient } from './rest-client.js';
import { addRouteCommands, readStdin, serverRouteTools } from './route-commands.js';
import { openCliStore } from './store-notice.js';

type Flags = ClientFlags & { json?: boolean };
/** A list item carries `state`, what the runtime sees now, besides the record. */
type Listed = ServerView & { state: string };
type ListAnswer = { servers: Listed[]; count: number; total: number };

type AddFlags = Flags &
  Omit<OAuthFlags, 'mode'> & {
    /** OAuth to the upstream: its mode. */
    oauth?: string;
    preset?: string;
    manifest?: string;
    id?: string;
    privateNetwork?: boolean;
    transport?: string;
    env: string[];
    arg: string[];
  };

const collect = (value: string, previous: string[]) => [...previous, value];

/** `--env NAME=VALUE` flags as a map; a flag without `=` is a usage error. */
function envFlags(pairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new GatehouseError('validation_error', `--env takes NAME=VALUE, not "${pair}".`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

/**
 * What a preset needs that the flags do not give: asked on a terminal, one question each; otherwise left
 * missing (the server installs as `needs_configuration` and the command says what to set).
 */
async function askPresetConfiguration(
  client: RestClient,
  preset: string,
  env: Record<string, string>,
  args: string[],
): Promise<void> {
  const entry = await client.request<{ envRequired: string[]; argsRequired?: string }>(
    'GET',
    `/api/mcp/catalog/${preset.split('/').map(encodeURIComponent).join('/')}`,
  );
  const missingEnv = entry.envRequired.filter((name) => !(name in env));
  const needsArgs = entry.argsRequired !== undefined && args.length === 0;
  if ((missingEnv.length === 0 && !needsArgs) || !process.stdin.isTTY) return;
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    for (const name of missingEnv) {
      const value = (await rl.question(`${preset} needs ${name}: `)).trim();
      if (value) env[name] = value;
    }
    if (needsArgs) {
      const answer = await rl.question(`${preset} needs ${entry.argsRequired} (space-separated): `);
      args.push(...answer.split(/\s+/).filter(Boolean));
    }
  } finally {
    rl.close();
  }
}

const PAGE = 500;

function withClientFlags(command: Command): Command {
  return command
    .option('--url <url>', `the gateway (env GATEHOUSE_URL; default ${DEFAULT_GATEWAY_URL})`)
    .option('--token <token>', 'admin or operator token (env GATEHOUSE_CLI_TOKEN, preferred: flags show in ps)')
    .option('--timeout-ms <ms>', 'deadline of each request (default 60000)')
    .option('--json', 'print the raw JSON answer');
}

const clientOf = (flags: Flags) => new RestClient(clientOptions(flags, process.env));
/** Every line as a terminal shows it safely: names and messages come from upstreams (escape codes, bidi controls). */
const print = (text: string): void => void process.stdout.write(`${text.split('\n').map(printable).join('\n')}\n`);
const printJson = (value: unknown): void => print(JSON.stringify(value, null, 2));

/** Every server, page by page (a list route never answers more than 500). */
async function listAll(client: RestClient): Promise<ListAnswer> {
  const servers: Listed[] = [];
  for (;;) {
    const page = await client.request<ListAnswer>('GET', `/api/mcp/servers?limit=${PAGE}&offset=${servers.length}`);
    servers.push(...page.servers);
    if (page.servers.length === 0 || servers.length >= page.total)
      return { servers, count: servers.length, total: page.total };
  }
}

/** Left-aligned columns, two spaces apart. */
export function table(header: string[], unsafeRows: string[][]): string {
  // Escaped before the widths are measured, so a column lines up with what the terminal shows.
  const rows = unsafeRows.map((row) => row.map(printable));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

async function readManifest(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new GatehouseError('validation_error', `Cannot read the manifest ${file} (${reason}).`);
  }
  try {
    return parseYaml(text); // YAML is a superset of JSON: either works
  } catch {
    throw new GatehouseError('validation_error', `${file} is neither JSON nor YAML.`);
  }
}

export function addServerCommands(program: Command, configOf: (flags: Record<string, unknown>) => Config): void {
  const servers = program
    .command('servers')
    .description("Manage a running gateway's MCP servers (REST API); export the registry (opens the store).");

  withClientFlags(
    servers.command('list').description('List installed servers: id, status, state, transport, tools.'),
  ).action(async (flags: Flags) => {
    const answer = await listAll(clientOf(flags));
    if (flags.json) return printJson(answer);
    if (answer.servers.length === 0) return print('No servers installed.');
    const rows = answer.servers.map((s) => [s.id, s.status, s.state, s.transport, String(s.discoveredToolsCount)]);
    print(table(['ID', 'STATUS', 'STATE', 'TRANSPORT', 'TOOLS'], rows));
  });

  const add = withClientFlags(
    servers
      .command('add')
      .description('Install a server from a URL or spec, a catalog preset, or a manifest file.')
      .argument(
        '[source]',
        'a server URL, a manifest URL (.json), or a spec: npm:, npx:, uvx:, uv:, oci://, git+https://',
      )
      .option('--preset <name>', 'a catalog entry (gatehouse catalog names contain /)')
      .option('--manifest <file>', 'a full server record as JSON or YAML')
      .option('--id <id>', 'install under this id instead of the derived one')
      .option('--private-network', 'admit a private or loopback address, e.g. http://127.0.0.1:… (admin token)')
      .option(
        '--transport <transport>',
        'with a server URL: streamable-http or sse (default: sse for a URL ending /sse)',
      )
      .option('--env <NAME=VALUE>', 'with --preset: a variable it needs (repeatable; sealed)', collect, [])
      .option('--arg <value>', 'with --preset: an extra argument it needs, e.g. a folder (repeatable)', collect, [])
      .option(
        '--oauth <mode>',
        'with a server URL: OAuth 2.1 to it, shared | per-user (then: servers auth-connect <id>)',
      ),
  );
  withOAuthFlags(add).action(async (source: string | undefined, flags: AddFlags) => {
    const given = [source, flags.preset, flags.manifest].filter((v) => v !== undefined);
    if (given.length !== 1) {
      throw new GatehouseError('validation_error', 'Give exactly one of <source>, --preset or --manifest.');
    }
    const client = clientOf(flags);
    const env = envFlags(flags.env);
    const args = [...flags.arg];
    if ((Object.keys(env).length > 0 || args.length > 0) && flags.preset === undefined) {
      throw new GatehouseError('validation_error', '--env and --arg go with --preset.');
    }
    if (flags.preset !== undefined) await askPresetConfiguration(client, flags.preset, env, args);
    if (anyOAuthFlag(flags) && flags.oauth === undefined) {
      throw new GatehouseError('validation_error', 'The OAuth flags (--grant, --client-id, …) go with --oauth <mode>.');
    }
    if (flags.oauth !== undefined && source === undefined) {
      throw new GatehouseError('validation_error', '--oauth goes with a server URL (a manifest carries its own auth).');
    }
    const auth = flags.oauth === undefined ? undefined : await oauthAuthOf({ ...flags, mode: flags.oauth }, readStdin);
    const body = {
      ...(source !== undefined ? { url: source } : {}),
      ...(flags.preset !== undefined ? { preset: flags.preset } : {}),
      ...(flags.manifest !== undefined ? { manifest: await readManifest(flags.manifest) } : {}),
      ...(flags.id !== undefined ? { id: flags.id } : {}),
      ...(flags.privateNetwork ? { privateNetwork: true } : {}),
      ...(flags.transport !== undefined ? { transport: flags.transport } : {}),
      ...(Object.keys(env).length > 0 ? { env } : {}),
      ...(args.length > 0 ? { args } : {}),
      ...(auth ? { auth } : {}),
    };
    const answer = await client.request<{ installed: ServerView }>('POST', '/api/mcp/install', body);
    if (flags.json) return printJson(answer);
    const { id, transport, url, command, status, lastError } = answer.installed;
    const target = transport === 'stdio' ? [command, ...answer.installed.args].join(' ') : url;
    if (lastError?.startsWith('needs_configuration:')) {
      print(`installed ${id} (${transport} ${target}), status ${status}`);
      process.stderr.write(
        `gatehouse: ${lastError}\nGive it with --env NAME=VALUE / --arg VALUE when adding, or PATCH /api/mcp/servers/${id}/config.\n`,
      );
      return;
    }
    print(`installed ${id} (${transport} ${target})\ncheck it with: gatehouse servers test ${id}`);
  });

  withClientFlags(
    servers.command('test').description('Handshake with a server: ok, latency, tools, error.').argument('<id>'),
  ).action(async (id: string, flags: Flags) => {
    const result = await clientOf(flags).request<TestResult>('POST', `/api/mcp/servers/${encodeURIComponent(id)}/test`);
    // A failed handshake is a failed command, for scripts.
    if (!result.ok) process.exitCode = 1;
    if (flags.json) return printJson(result);
    const tools = Object.entries(result.verdicts).map(([name, verdict]) => `${name} (${verdict})`);
    const lines: Array<[string, string]> = [
      ['ok', result.ok ? 'yes' : 'no'],
      ['latency', `${result.latencyMs} ms`],
      ['tools', `${result.discoveredToolsCount}${tools.length > 0 ? `: ${tools.join(', ')}` : ''}`],
      ['error', result.error ? `${result.error.code}: ${result.error.message}` : '-'],
      ...(result.warnings ?? []).map((w): [string, string] => ['warning', `${w.code}: ${w.message}`]),
    ];
    print(lines.map(([label, value]) => `${label.padEnd(8)} ${value}`).join('\n'));
  });

  for (const [action, description] of [
    ['start', 'Start a stdio server under the supervisor and wait until it runs.'],
    ['stop', 'Stop a stdio server (its whole process group).'],
    ['restart', 'Stop, then start a stdio server.'],
  ] as const) {
    withClientFlags(servers.command(action).description(description).argument('<id>')).action(
      async (id: string, flags: Flags) => {
        const answer = await clientOf(flags).request<{
          process: { state: string; pid: number | null; lastError: string | null };
        }>('POST', `/api/mcp/servers/${encodeURIComponent(id)}/${action}`);
        if (flags.json) return printJson(answer);
        const { state, pid } = answer.process;
        print(`${id} ${state}${pid !== null ? ` (pid ${pid})` : ''}`);
      },
    );
  }

  withClientFlags(
    servers.command('pins').description("A server's tool pins: state, and the pending hash of each quarantined tool."),
  )
    .argument('<id>')
    .action(async (id: string, flags: Flags) => {
      const answer = await clientOf(flags).request<{
        pins: { tool: string; kind?: string; state: string; reason: string | null; pendingHash: string | null }[];
      }>('GET', `/api/mcp/servers/${encodeURIComponent(id)}/pins?limit=${PAGE}`);
      if (flags.json) return printJson(answer);
      print(
        table(
          ['tool', 'kind', 'state', 'reason', 'pending hash'],
          answer.pins.map((p) => [p.tool, p.kind ?? 'tool', p.state, p.reason ?? '-', p.pendingHash ?? '-']),
        ),
      );
    });

  withClientFlags(
    servers
      .command('pin-approve')
      .description(
        'Approve the quarantined definition you reviewed (its pending hash, from `servers pins`); refused when it changed again.',
      )
      .argument('<id>')
      .argument('<tool>')
      .argument('<pendingHash>')
      .option('--prompt', '<tool> names a prompt')
      .option('--resource', '<tool> names a UI resource (its ui:// URI)'),
  ).action(
    async (id: string, tool: string, pendingHash: string, flags: Flags & { prompt?: boolean; resource?: boolean }) => {
      const answer = await clientOf(flags).request<{ approved: string; policyVersion: number }>(
        'POST',
        `/api/mcp/servers/${encodeURIComponent(id)}/pins/${encodeURIComponent(tool)}/approve`,
        { pendingHash, ...(flags.prompt ? { kind: 'prompt' } : flags.resource ? { kind: 'resource' } : {}) },
      );
      if (flags.json) return printJson(answer);
      print(`pinned ${tool} on ${id} (${pendingHash.slice(0, 12)}…, policy version ${answer.policyVersion})`);
    },
  );

  withClientFlags(servers.command('remove').description('Uninstall a server.').argument('<id>')).action(
    async (id: string, flags: Flags) => {
      const answer = await clientOf(flags).request('DELETE', `/api/mcp/servers/${encodeURIComponent(id)}`);
      if (flags.json) return printJson(answer);
      print(`removed ${id}`);
    },
  );

  // Every other route of one server, generated from its declaration (config, policy, expose, logs, …).
  const taken = new Set([...servers.commands.map((c) => c.name()), 'export']);
  addRouteCommands(servers, serverRouteTools(), taken, withClientFlags, {
    client: (flags) => clientOf(flags as Flags),
    print: (value) => printJson(value),
  });

  servers
    .command('export')
    .description(
      'Write the registry and its toolsets as a gatehouse.yaml for `serve --config`, secrets as env references.',
    )
    .option('--data-dir <dir>', 'data folder of the SQLite store')
    .option('--database-url <url>', 'PostgreSQL URL')
    .option('--secret-key <key>', 'the sealing key (env GATEHOUSE_SECRET_KEY), checked against the store')
    .option('--out <file>', 'write to this file (mode 0600) instead of stdout')
    .action(async (flags: { out?: string } & Record<string, unknown>) => {
      const config = configOf(flags);
      const store = await openCliStore(config);
      let exported: ReturnType<typeof exportServers>;
      try {
        const key = await loadSealKey(store, {
          secretKey: config.secretKey,
          secretKeyPrevious: config.secretKeyPrevious,
          dataDir: config.dataDir,
        });
        const records = await new ServerStore(store, key, config.secretEnvPrefix).all();
        const toolsets = await listToolsets(store.db);
        exported = exportServers(records, { secretEnvPrefix: config.secretEnvPrefix, toolsets });
      } finally {
        await store.close();
      }
      if (flags.out === undefined) return void process.stdout.write(exported.yaml);
      const file = await open(flags.out, 'w', 0o600);
      try {
        await file.chmod(0o600); // an existing file keeps its mode otherwise
        await file.writeFile(exported.yaml);
      } finally {
        await file.close();
      }
      const sealed = exported.variables.filter((v) => v.sealed).length;
      process.stderr.write(
        `wrote ${flags.out}: ${exported.variables.length} env variables to set (${sealed} were sealed values)\n`,
      );
    });
}
