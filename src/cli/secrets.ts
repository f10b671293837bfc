/**
 * `gatehouse secrets status|rotate`: sealing-key rotation through a running gateway's REST API
 * (`--url`/`GATEHOUSE_URL`, an admin token in `--token`/`GATEHOUSE_CLI_TOKEN`). The keys themselves stay in
 * the gateway's settings (`GATEHOUSE_SECRET_KEY`, `GATEHOUSE_SECRET_KEY_PREVIOUS`); these commands name them
 * by kid only. Rotation: start every replica with the new key current and the old one previous, run
 * `gatehouse secrets rotate` (re-seals every stored value), and retire the old key once `status` says so.
 */
import type { Command } from 'commander';
import { type CliIo, printable } from './approvals.js';
import { clientOptions, DEFAULT_GATEWAY_URL, DEFAULT_TIMEOUT_MS, RestClient, reportErrors } from './rest-client.js';

interface ConnectionFlags {
  url?: string;
  token?: string;
  json?: boolean;
  timeout?: string;
}

interface Inventory {
  current: string;
  keys: { kid: string; current: boolean; values: number }[];
  unknown: { kid: string; values: number }[];
  unlabelled: number;
  retirable: boolean;
}

interface Report {
  resealed: number;
  alreadyCurrent: number;
  changedMeanwhile: number;
  failed: number;
  failures: { table: string; row: string; field: string }[];
  inventory: Inventory;
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
    .option('--token <token>', 'an admin token (default: GATEHOUSE_CLI_TOKEN)')
    .option('--timeout <ms>', `give up after this many milliseconds (default ${DEFAULT_TIMEOUT_MS})`)
    .option('--json', 'print the raw JSON answer');
}

function inventoryText(inventory: Inventory): string {
  const lines = ['KEY\tROLE\tVALUES'];
  for (const k of inventory.keys) lines.push(`${k.kid}\t${k.current ? 'current' : 'previous'}\t${k.values}`);
  for (const k of inventory.unknown) lines.push(`${k.kid}\tmissing (does not open)\t${k.values}`);
  if (inventory.unlabelled > 0) lines.push(`(before key ids)\t-\t${inventory.unlabelled}`);
  lines.push(
    inventory.retirable
      ? 'Every value is sealed with the current key: previous keys can be retired.'
      : 'Some values still need a previous key (or none opens them): run `gatehouse secrets rotate`.',
  );
  return `${lines.map(printable).join('\n')}\n`;
}

export function addSecretCommands(program: Command, ioOverrides: Partial<CliIo> = {}): void {
  const io: CliIo = { ...processIo, ...ioOverrides };
  const call = <T>(flags: ConnectionFlags, method: 'GET' | 'POST', path: string, body?: unknown) =>
    new RestClient(clientOptions({ url: flags.url, token: flags.token, timeoutMs: flags.timeout }, io.env)).request<T>(
      method,
      path,
      body,
    );
  const run = reportErrors(io, printable);
  const secrets = program
    .command('secrets')
    .description('Sealing-key rotation: which keys the stored secrets are sealed with, and re-sealing them.');

  withConnection(
    secrets.command('status').description('Each sealing key (by kid) and how many stored values it sealed.'),
  ).action(
    run(async (flags: ConnectionFlags) => {
      const inventory = await call<Inventory>(flags, 'GET', '/api/secrets/keys');
      io.stdout(flags.json ? `${JSON.stringify(inventory, null, 2)}\n` : inventoryText(inventory));
    }),
  );

  withConnection(
    secrets
      .command('rotate')
      .description(
        'Re-seal every stored secret with the current key (GATEHOUSE_SECRET_KEY), after every replica was started with it and the old key in GATEHOUSE_SECRET_KEY_PREVIOUS.',
      )
      .option('--batch-size <n>', 'rows per transaction (default 100)'),
  ).action(
    run(async (flags: ConnectionFlags & { batchSize?: string }) => {
      const body = flags.batchSize === undefined ? {} : { batchSize: Number(flags.batchSize) };
      const report = await call<Report>(flags, 'POST', '/api/secrets/rotate', body);
      if (flags.json) {
        io.stdout(`${JSON.stringify(report, null, 2)}\n`);
      } else {
        const failures = report.failures.map((f) => `  does not open: ${f.table} ${f.row} ${f.field}`);
        io.stdout(
          `${printable(
            [
              `re-sealed ${report.resealed}, already current ${report.alreadyCurrent}, changed meanwhile ${report.changedMeanwhile}, failed ${report.failed}`,
              ...failures,
            ].join('\n'),
          )}\n${inventoryText(report.inventory)}`,
        );
      }
      if (report.failed > 0) io.setExitCode(1);
    }),
  );
}
