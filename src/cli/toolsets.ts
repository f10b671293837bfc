/**
 * `gatehouse toolsets list|show|create|set|delete` and `gatehouse overrides list|show|set|delete`: toolsets and
 * per-tool overrides (issue 22) through a running gateway's REST API (`--url`/`GATEHOUSE_URL`,
 * `--token`/`GATEHOUSE_CLI_TOKEN`). Errors print as `code: message` with exit 1; `--json` prints the raw answer.
 */
import type { Command } from 'commander';
import { GatehouseError } from '../errors.js';
import { type CliIo, printable } from './approvals.js';
import { clientOptions, DEFAULT_GATEWAY_URL, DEFAULT_TIMEOUT_MS, RestClient, reportErrors } from './rest-client.js';

interface ConnectionFlags {
  url?: string;
  token?: string;
  json?: boolean;
  timeout?: string;
}

interface EntryView {
  server: string;
  tool: string;
  state: string;
  exposed?: string;
  verdict?: string;
  reason?: string;
}

interface ToolsetView {
  name: string;
  description: string | null;
  path: string;
  available: number;
  tools: EntryView[];
}

interface OverrideView {
  serverId: string;
  tool: string;
  state: string;
  reason?: string;
  missingArguments?: string[];
  aggregatedName: string | null;
  exposedName: string | null;
  override: {
    displayName?: string;
    description?: string;
    descriptionMode?: string;
    fixedArguments?: Record<string, unknown>;
    annotations?: Record<string, unknown>;
  };
}

const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  setExitCode: (code) => {
    process.exitCode = code;
  },
};

function withConnection(command: Command): Command {
  return command
    .option('--url <url>', `gateway URL (default: GATEHOUSE_URL or ${DEFAULT_GATEWAY_URL})`)
    .option('--token <token>', 'an admin or operator token (default: GATEHOUSE_CLI_TOKEN)')
    .option('--timeout <ms>', `give up after this many milliseconds (default ${DEFAULT_TIMEOUT_MS})`)
    .option('--json', 'print the raw JSON answer');
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `server/tool` (the tool's upstream name; it may itself contain `/`). */
export function parseToolRef(ref: string): { server: string; tool: string } {
  const slash = ref.indexOf('/');
  if (slash <= 0 || slash === ref.length - 1) {
    throw new GatehouseError('validation_error', `--tool takes server/tool (the upstream name), not "${ref}".`);
  }
  return { server: ref.slice(0, slash), tool: ref.slice(slash + 1) };
}

/** `name=value`: the value as JSON when it parses (numbers, booleans, objects), else the string itself. */
export function parseAssignment(text: string, flag: string): [string, unknown] {
  const equals = text.indexOf('=');
  if (equals <= 0) throw new GatehouseError('validation_error', `${flag} takes name=value, not "${text}".`);
  const raw = text.slice(equals + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // a plain string
  }
  return [text.slice(0, equals), value];
}

function entryLine(entry: EntryView): string {
  const why = entry.reason ? ` (${entry.reason})` : '';
  return [`${entry.server}/${entry.tool}`, entry.exposed ?? '-', `${entry.state}${why}`, entry.verdict ?? '-']
    .map(printable)
    .join('\t');
}

function toolsetText(t: ToolsetView): string {
  const lines = [
    `${t.name}  ${t.path}  (${t.available} of ${t.tools.length} available)`,
    ...(t.description ? [`about: ${t.description}`] : []),
    'TOOL\tNAME\tSTATE\tVERDICT',
  ];
  return `${[printable(lines.join('\n')), ...t.tools.map(entryLine)].join('\n')}\n`;
}

function overrideText(o: OverrideView): string {
  const why = o.reason ? ` (${o.reason}${o.missingArguments ? `: ${o.missingArguments.join(', ')}` : ''})` : '';
  const lines = [
    `${o.serverId}/${o.tool}  ${o.state}${why}`,
    `name:        ${o.exposedName ?? '-'}  [aggregated ${o.aggregatedName ?? '-'}]`,
  ];
  if (o.override.description !== undefined) {
    lines.push(`description: (${o.override.descriptionMode ?? 'replace'}) ${o.override.description}`);
  }
  if (o.override.fixedArguments) lines.push(`fixed:       ${JSON.stringify(o.override.fixedArguments)}`);
  if (o.override.annotations) lines.push(`annotations: ${JSON.stringify(o.override.annotations)}`);
  return `${lines.map(printable).join('\n')}\n`;
}

export function addToolsetCommands(program: Command, ioOverrides: Partial<CliIo> = {}): void {
  const io: CliIo = { ...processIo, ...ioOverrides };
  const call = (flags: ConnectionFlags, method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown) =>
    new RestClient(
      clientOptions({ url: flags.url, token: flags.token, timeoutMs: flags.timeout }, io.env),
    ).request<unknown>(method, path, body);
  const run = reportErrors(io, printable);
  const print = (flags: ConnectionFlags, answer: unknown, text: () => string) =>
    io.stdout(flags.json ? `${JSON.stringify(answer, null, 2)}\n` : text());
  const enc = encodeURIComponent;

  const toolsets = program
    .command('toolsets')
    .description('Toolsets: named sets of tools from several servers, each served at /mcp/t/{name}.');
  withConnection(
    toolsets.command('list').description('List toolsets with how many of their tools are available.'),
  ).action(
    run(async (flags: ConnectionFlags) => {
      const answer = (await call(flags, 'GET', '/api/toolsets?limit=500')) as {
        toolsets: ToolsetView[];
        total: number;
      };
      print(flags, answer, () =>
        [
          'NAME\tPATH\tAVAILABLE\tTOOLS',
          ...answer.toolsets.map((t) =>
            [t.name, t.path, t.available, t.tools.length].map(String).map(printable).join('\t'),
          ),
          `${answer.toolsets.length} of ${answer.total}`,
          '',
        ].join('\n'),
      );
    }),
  );
  withConnection(
    toolsets.command('show').description("One toolset and each tool's state now.").argument('<name>'),
  ).action(
    run(async (name: string, flags: ConnectionFlags) => {
      const answer = (await call(flags, 'GET', `/api/toolsets/${enc(name)}`)) as ToolsetView;
      print(flags, answer, () => toolsetText(answer));
    }),
  );
  for (const verb of ['create', 'set'] as const) {
    withConnection(
      toolsets
        .command(verb)
        .description(verb === 'create' ? 'Create a toolset.' : "Replace a toolset's tools (and description).")
        .argument('<name>')
        .option('--tool <server/tool>', 'a tool by server id and upstream name (repeat)', collect, [])
        .option('--description <text>', 'what the toolset is for (agents read it)'),
    ).action(
      run(async (name: string, flags: ConnectionFlags & { tool: string[]; description?: string }) => {
        const tools = flags.tool.map(parseToolRef);
        const body = { tools, ...(flags.description !== undefined ? { description: flags.description } : {}) };
        const answer = (
          verb === 'create'
            ? await call(flags, 'POST', '/api/toolsets', { name, ...body })
            : await call(flags, 'PUT', `/api/toolsets/${enc(name)}`, body)
        ) as ToolsetView;
        print(flags, answer, () => toolsetText(answer));
      }),
    );
  }
  withConnection(toolsets.command('delete').description('Delete a toolset.').argument('<name>')).action(
    run(async (name: string, flags: ConnectionFlags) => {
      const answer = await call(flags, 'DELETE', `/api/toolsets/${enc(name)}`);
      print(flags, answer, () => `deleted toolset ${printable(name)}\n`);
    }),
  );

  const overrides = program
    .command('overrides')
    .description('Per-tool overrides: display name, description, fixed (hidden) arguments, annotations.');
  withConnection(
    overrides.command('list').description("A server's overrides and their state.").argument('<server>'),
  ).action(
    run(async (server: string, flags: ConnectionFlags) => {
      const answer = (await call(flags, 'GET', `/api/mcp/servers/${enc(server)}/overrides?limit=500`)) as {
        overrides: OverrideView[];
      };
      print(flags, answer, () => answer.overrides.map(overrideText).join('\n') || 'no overrides\n');
    }),
  );
  withConnection(
    overrides.command('show').description("One tool's override.").argument('<server>').argument('<tool>'),
  ).action(
    run(async (server: string, tool: string, flags: ConnectionFlags) => {
      const answer = (await call(
        flags,
        'GET',
        `/api/mcp/servers/${enc(server)}/overrides/${enc(tool)}`,
      )) as OverrideView;
      print(flags, answer, () => overrideText(answer));
    }),
  );
  withConnection(
    overrides
      .command('set')
      .description("Set a tool's override (replacing any). Fixed arguments are checked against the pinned schema.")
      .argument('<server>')
      .argument('<tool>', "the tool's upstream name")
      .option('--display-name <name>', 'its name in the aggregate and toolsets (≤ 64, unique)')
      .option('--description <text>', 'a description in place of the upstream one')
      .option('--append', 'append --description to the upstream one instead')
      .option('--fix <name=value>', 'hide an argument and send this value (JSON or a string; repeat)', collect, [])
      .option('--annotation <name=value>', 'an annotation (readOnlyHint=true, title=…; repeat)', collect, []),
  ).action(
    run(
      async (
        server: string,
        tool: string,
        flags: ConnectionFlags & {
          displayName?: string;
          description?: string;
          append?: boolean;
          fix: string[];
          annotation: string[];
        },
      ) => {
        const fixed = Object.fromEntries(flags.fix.map((f) => parseAssignment(f, '--fix')));
        const annotations = Object.fromEntries(flags.annotation.map((a) => parseAssignment(a, '--annotation')));
        const body = {
          ...(flags.displayName !== undefined ? { displayName: flags.displayName } : {}),
          ...(flags.description !== undefined
            ? { description: flags.description, descriptionMode: flags.append ? 'append' : 'replace' }
            : {}),
          ...(flags.fix.length > 0 ? { fixedArguments: fixed } : {}),
          ...(flags.annotation.length > 0 ? { annotations } : {}),
        };
        const answer = (await call(
          flags,
          'PUT',
          `/api/mcp/servers/${enc(server)}/overrides/${enc(tool)}`,
          body,
        )) as OverrideView;
        print(flags, answer, () => overrideText(answer));
      },
    ),
  );
  withConnection(
    overrides.command('delete').description("Remove a tool's override.").argument('<server>').argument('<tool>'),
  ).action(
    run(async (server: string, tool: string, flags: ConnectionFlags) => {
      const answer = await call(flags, 'DELETE', `/api/mcp/servers/${enc(server)}/overrides/${enc(tool)}`);
      print(flags, answer, () => `deleted the override of ${printable(`${server}/${tool}`)}\n`);
    }),
  );
}
