/**
 * `gatehouse import`: registers the servers an MCP client already has (Claude Desktop, Claude Code, Cursor,
 * VS Code, Windsurf, LM Studio; the usual files, or `--file`) in a running gateway, through
 * `POST /api/mcp/import`. `--dry-run` prints the plan as JSON and registers nothing. Values are sealed by
 * the gateway and never printed; refused entries are listed with the reason. Then it says how to point the
 * client at the hub instead (`gatehouse connect --write`).
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { GatehouseError } from '../errors.js';
import { configPaths, IMPORT_CLIENTS, type ImportClient, serversOf } from '../importing/clients.js';
import type { ImportItem } from '../importing/plan.js';
import { rewritable, rewriteFile } from '../importing/rewrite.js';
import { CLIENT_IDS, CLIENTS } from './connect/clients.js';
import { selfLaunch } from './launch.js';
import { type ClientFlags, clientOptions, DEFAULT_GATEWAY_URL, RestClient } from './rest-client.js';
import { table } from './servers.js';

type ImportFlags = ClientFlags & {
  client?: string;
  file?: string;
  dryRun?: boolean;
  json?: boolean;
  rewrite?: boolean;
};
type Answer = { dryRun: boolean; items: Omit<ImportItem, 'server'>[]; registered: number };

const print = (text: string): void => void process.stdout.write(`${text}\n`);

async function readIfThere(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new GatehouseError('validation_error', `Cannot read ${file} (${(error as NodeJS.ErrnoException).code}).`);
  }
}

/** The file to import: `--file`, else the first of the client's usual files that exists. */
async function source(flags: ImportFlags): Promise<{ file: string; text: string } | undefined> {
  if (flags.file !== undefined) {
    const text = await readIfThere(flags.file);
    if (text === undefined) throw new GatehouseError('validation_error', `No file ${flags.file}.`);
    return { file: flags.file, text };
  }
  for (const file of configPaths(flags.client as ImportClient)) {
    const text = await readIfThere(file);
    if (text !== undefined) return { file, text };
  }
  return undefined;
}

export function addImportCommand(program: Command): void {
  program
    .command('import')
    .description(
      'Register the MCP servers a client already has (its mcpServers/servers config) in a running gateway; values sealed, never shown.',
    )
    .option('--client <client>', `whose config: ${IMPORT_CLIENTS.join(', ')} (its usual files)`)
    .option('--file <path>', 'this config file instead of the usual ones')
    .option('--dry-run', 'print what would be registered, as JSON; register nothing')
    .option(
      '--rewrite',
      "then rewrite the client's file to reach them through the hub: imported entries replaced by the hub's (backup kept beside it)",
    )
    .option('--url <url>', `the gateway (env GATEHOUSE_URL; default ${DEFAULT_GATEWAY_URL})`)
    .option('--token <token>', 'admin or operator token (env GATEHOUSE_CLI_TOKEN)')
    .option('--timeout-ms <ms>', 'deadline of the request (default 60000)')
    .option('--json', 'print the raw JSON answer')
    .action(async (flags: ImportFlags) => {
      if (flags.client !== undefined && !(IMPORT_CLIENTS as readonly string[]).includes(flags.client)) {
        throw new GatehouseError('validation_error', `--client must be one of ${IMPORT_CLIENTS.join(', ')}.`);
      }
      if (flags.client === undefined && flags.file === undefined) {
        const found: string[] = [];
        for (const client of IMPORT_CLIENTS) {
          for (const file of configPaths(client)) {
            const text = await readIfThere(file);
            if (text === undefined) continue;
            let count = '?';
            try {
              count = String(Object.keys(serversOf(text, file)).length);
            } catch {}
            found.push(`  --client ${client.padEnd(15)} ${file} (${count} servers)`);
          }
        }
        throw new GatehouseError(
          'validation_error',
          `Give --client or --file.${found.length > 0 ? `\nFound:\n${found.join('\n')}` : ' No client config was found in the usual places.'}`,
        );
      }
      if (flags.rewrite && flags.dryRun)
        throw new GatehouseError('validation_error', '--rewrite and --dry-run exclude each other.');
      if (flags.rewrite && flags.client === undefined) {
        throw new GatehouseError('validation_error', '--rewrite needs --client (whose file shape to write).');
      }
      // Checked before anything is registered: a client whose file `connect` cannot write is refused up front.
      const rewriteAs = flags.rewrite ? rewritable(flags.client as ImportClient) : undefined;
      const read = await source(flags);
      if (!read) {
        throw new GatehouseError(
          'validation_error',
          `No ${flags.client} config in ${configPaths(flags.client as ImportClient).join(' or ')}; give --file.`,
        );
      }
      const servers = serversOf(read.text, read.file);
      const options = clientOptions(flags, process.env);
      const client = new RestClient(options);
      const answer = await client.request<Answer>('POST', '/api/mcp/import', {
        servers,
        dryRun: flags.dryRun === true,
      });
      if (flags.dryRun || flags.json) return print(JSON.stringify({ file: read.file, ...answer }, null, 2));
      if (answer.items.length === 0) return print(`No servers in ${read.file}.`);
      const rows = answer.items.map((i) => [
        i.action === 'register' ? 'registered' : i.action,
        i.id ?? '-',
        i.transport ?? '-',
        i.target ?? '-',
        i.action === 'register'
          ? [...i.sealed.env.map((n) => `env ${n}`), ...i.sealed.headers.map((n) => `header ${n}`)].join(', ') || '-'
          : (i.reason ?? '-'),
      ]);
      print(`${read.file}: ${answer.registered} registered`);
      print(table(['ACTION', 'ID', 'TRANSPORT', 'TARGET', 'SEALED / REASON'], rows));
      for (const item of answer.items) for (const w of item.warnings) print(`warning: ${item.name}: ${w}`);
      if (answer.items.some((i) => i.action === 'refused')) process.exitCode = 1;
      if (rewriteAs) {
        // Registered now or installed already: either way the hub serves them, so the client's own entries go.
        const moved = answer.items
          .filter((i) => i.action === 'register' || i.action === 'duplicate')
          .map((i) => i.name);
        const launch = selfLaunch();
        const hubUrl = new URL('/mcp', options.baseUrl).href;
        const input = {
          hubUrl,
          name: 'gatehouse',
          tokenEnv: 'GATEHOUSE_TOKEN',
          command: launch.command,
          commandArgs: launch.args,
        };
        const done = await rewriteFile(read.file, rewriteAs, moved, input);
        if (done.changes.length === 0) return print(`${read.file}: already reaches the hub; unchanged.`);
        print(
          `${read.file}: ${done.changes.join('; ')} (the original, secrets included, is at ${done.backup}, readable only by you).`,
        );
        process.stderr.write(`${CLIENTS[rewriteAs].tokenNote(input, undefined, false)}\n`);
        return;
      }
      const connectAs =
        flags.client && (CLIENT_IDS as readonly string[]).includes(flags.client) ? flags.client : '<client>';
      print(
        `\nPoint the client at the hub instead (its entry merged in, other entries kept):\n  gatehouse connect --client ${connectAs} --token-name ${connectAs} --write ${read.file}`,
      );
    });
}
