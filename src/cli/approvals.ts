/**
 * `gatehouse approvals list|show|approve|reject`: decides approvals through a
 * running gateway's REST API (`--url`/`GATEHOUSE_URL`, `--token`/`GATEHOUSE_CLI_TOKEN`).
 * Errors print as `code: message` with a non-zero exit; `--json` prints the raw answer.
 */
import type { Command } from 'commander';
import type { ApprovalView } from '../approvals/types.js';
import { clientOptions, DEFAULT_GATEWAY_URL, DEFAULT_TIMEOUT_MS, RestClient, reportErrors } from './rest-client.js';

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: NodeJS.ProcessEnv;
  setExitCode(code: number): void;
}

const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  setExitCode: (code) => {
    process.exitCode = code;
  },
};

interface ConnectionFlags {
  url?: string;
  token?: string;
  json?: boolean;
  timeout?: string;
}

/** One REST call through the CLI's shared client (deadline, no redirects, typed errors). */
function callApi(flags: ConnectionFlags, env: NodeJS.ProcessEnv, method: 'GET' | 'POST', path: string, body?: unknown) {
  const options = clientOptions({ url: flags.url, token: flags.token, timeoutMs: flags.timeout }, env);
  return new RestClient(options).request<unknown>(method, path, body);
}

/** Control, invisible and bidi characters: a terminal would act on them or hide them from the operator. */
function unsafeForTerminal(code: number): boolean {
  return (
    code <= 0x08 ||
    (code >= 0x0b && code <= 0x1f) ||
    (code >= 0x7f && code <= 0x9f) ||
    code === 0xad ||
    code === 0x61c ||
    code === 0x180e ||
    (code >= 0x200b && code <= 0x200f) ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2060 && code <= 0x2069) ||
    code === 0xfeff ||
    (code >= 0xe0000 && code <= 0xe007f)
  );
}

/** Makes a string safe for a terminal: control, invisible and bidi characters are shown as escapes. */
export function printable(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    out += unsafeForTerminal(code) ? `\\u{${code.toString(16)}}` : char;
  }
  return out;
}

function listLine(a: ApprovalView): string {
  const tool = a.exposedName || (a.serverId ? `${a.serverId}__${a.tool}` : a.tool);
  return [a.id, a.status, a.surface, a.requester.name, tool, a.createdAt, a.expiresAt].map(printable).join('\t');
}

function card(a: ApprovalView): string {
  const lines = [
    `${a.id}  ${a.status}  (${a.surface})`,
    `requester:  ${a.requester.name} (${a.requester.id})`,
    `tool:       ${a.exposedName}${a.serverId ? `  [server ${a.serverId}, tool ${a.tool}]` : `  [${a.tool}]`}`,
    `created:    ${a.createdAt}`,
    `expires:    ${a.expiresAt}`,
  ];
  if (typeof a.detail.title === 'string') lines.push(`title:      ${a.detail.title}`);
  if (typeof a.detail.description === 'string') lines.push(`about:      ${a.detail.description}`);
  const override = a.detail.override as { aggregatedName?: string; fixedArguments?: string[] } | undefined;
  if (override && typeof override === 'object') {
    // An override renamed the tool or fixed arguments: the card says so, and the arguments below include them.
    const fixed = override.fixedArguments?.length ? `; fixed by it: ${override.fixedArguments.join(', ')}` : '';
    lines.push(
      `override:   shown to the agent as ${a.exposedName} (aggregated name ${override.aggregatedName})${fixed}`,
    );
  }
  lines.push('arguments (exactly as they will be sent):', JSON.stringify(a.arguments, null, 2));
  lines.push(`argsHash:   ${a.argsHash}`);
  if (a.pinHash) lines.push(`pin:        ${a.pinHash} (policy version ${a.policyVersion ?? '-'})`);
  if (a.decidedAt) {
    const by = a.decidedBy ? ` by ${a.decidedBy.name ?? a.decidedBy.id}` : '';
    lines.push(`decided:    ${a.decidedAt}${by}`);
  }
  if (a.reason) lines.push(`reason:     ${a.reason}`);
  if (a.executedAt) lines.push(`finished:   ${a.executedAt}`);
  if (a.error) lines.push(`error:      ${a.error.code}: ${a.error.message}`);
  if (a.result !== undefined && a.result !== null) lines.push('result:', JSON.stringify(a.result, null, 2));
  return `${lines.map(printable).join('\n')}\n`;
}

function withConnection(command: Command): Command {
  return command
    .option('--url <url>', `gateway URL (default: GATEHOUSE_URL or ${DEFAULT_GATEWAY_URL})`)
    .option('--token <token>', 'an admin or operator token (default: GATEHOUSE_CLI_TOKEN)')
    .option('--timeout <ms>', `give up after this many milliseconds (default ${DEFAULT_TIMEOUT_MS})`)
    .option('--json', 'print the raw JSON answer');
}

export function addApprovalCommands(program: Command, ioOverrides: Partial<CliIo> = {}): void {
  const io: CliIo = { ...processIo, ...ioOverrides };
  const run = reportErrors(io, printable);

  const approvals = program
    .command('approvals')
    .description('List, inspect and decide approvals of gated calls (through the REST API of a running gateway).');

  withConnection(
    approvals
      .command('list')
      .description('List approvals, newest first.')
      .option('--status <status>', 'only this status (pending, approved, executing, executed, failed, rejected, …)')
      .option('--limit <n>', 'at most this many (1-500, default 100)')
      .option('--offset <n>', 'skip this many'),
  ).action(
    run(async (flags: ConnectionFlags & { status?: string; limit?: string; offset?: string }) => {
      const query = new URLSearchParams();
      if (flags.status) query.set('status', flags.status);
      if (flags.limit) query.set('limit', flags.limit);
      if (flags.offset) query.set('offset', flags.offset);
      const suffix = query.toString() ? `?${query}` : '';
      const answer = (await callApi(flags, io.env, 'GET', `/api/approvals${suffix}`)) as {
        approvals: ApprovalView[];
        count: number;
        total: number;
      };
      if (flags.json) return io.stdout(`${JSON.stringify(answer, null, 2)}\n`);
      io.stdout('ID\tSTATUS\tSURFACE\tREQUESTER\tTOOL\tCREATED\tEXPIRES\n');
      for (const approval of answer.approvals) io.stdout(`${listLine(approval)}\n`);
      io.stdout(`${answer.count} of ${answer.total}\n`);
    }),
  );

  withConnection(approvals.command('show').description('Show one approval card.').argument('<id>')).action(
    run(async (id: string, flags: ConnectionFlags) => {
      const approval = (await callApi(
        flags,
        io.env,
        'GET',
        `/api/approvals/${encodeURIComponent(id)}`,
      )) as ApprovalView;
      io.stdout(flags.json ? `${JSON.stringify(approval, null, 2)}\n` : card(approval));
    }),
  );

  for (const decision of ['approve', 'reject'] as const) {
    withConnection(
      approvals
        .command(decision)
        .description(
          decision === 'approve'
            ? 'Approve a pending call; it runs once, right after.'
            : 'Reject a pending call; the agent reads the reason.',
        )
        .argument('<id>')
        .option('--reason <text>', 'why (at most 2000 characters)'),
    ).action(
      run(async (id: string, flags: ConnectionFlags & { reason?: string }) => {
        const approval = (await callApi(
          flags,
          io.env,
          'POST',
          `/api/approvals/${encodeURIComponent(id)}/${decision}`,
          flags.reason !== undefined ? { reason: flags.reason } : {},
        )) as ApprovalView;
        if (flags.json) return io.stdout(`${JSON.stringify(approval, null, 2)}\n`);
        io.stdout(
          decision === 'approve'
            ? `approved ${printable(approval.id)}: the call runs now; \`gatehouse approvals show ${printable(approval.id)}\` shows its outcome.\n`
            : `rejected ${printable(approval.id)}\n`,
        );
      }),
    );
  }
}
