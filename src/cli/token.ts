/** `gatehouse token create|list|revoke`: bootstrap commands that open the store directly. */
import type { Command } from 'commander';
import { publicToken } from '../api/tokens.js';
import { ApprovalQueue } from '../approvals/queue.js';
import { AuditLog } from '../audit/log.js';
import { EventHub } from '../audit/stream.js';
import type { Config } from '../config.js';
import { GatehouseError } from '../errors.js';
import { checkRoleWithinOwner, type Role, toolViewValue } from '../identity/index.js';
import { revokeToken } from '../identity/token-revocation.js';
import { TokenStore } from '../store/tokens.js';
import { UserStore } from '../store/users.js';
import { openCliStore } from './store-notice.js';

const ROLES: readonly Role[] = ['admin', 'operator', 'agent', 'ops'];

type TokenCreateFlags = {
  role: string;
  name: string;
  groups?: string;
  toolView?: string;
  user?: string;
  dataDir?: string;
  databaseUrl?: string;
};

async function withTokens<T>(config: Config, fn: (tokens: TokenStore) => Promise<T>): Promise<T> {
  const store = await openCliStore(config);
  try {
    return await fn(new TokenStore(store));
  } finally {
    await store.close();
  }
}

export function addTokenCommands(program: Command, configOf: (flags: Record<string, unknown>) => Config): void {
  const token = program
    .command('token')
    .description('Create, list and revoke bearer tokens (opens the store directly).');
  const storeFlags = (c: Command) =>
    c.option('--data-dir <dir>', 'data folder of the SQLite store').option('--database-url <url>', 'PostgreSQL URL');

  storeFlags(
    token
      .command('create')
      .description('Create a token; it is printed once.')
      .requiredOption('--role <role>', `one of ${ROLES.join(', ')}`)
      .requiredOption('--name <name>', 'who or what uses it, e.g. claude-laptop')
      .option('--groups <groups>', 'agent groups, comma-separated (default: default)')
      .option(
        '--tool-view <view>',
        'what /mcp lists to the agent: all, search or toolset:<name> (default: hub.toolView)',
      )
      .option('--user <user>', 'the user (id or name) who owns it'),
  ).action(async (flags: TokenCreateFlags) => {
    if (!ROLES.includes(flags.role as Role)) {
      throw new GatehouseError('validation_error', `--role must be one of ${ROLES.join(', ')}.`);
    }
    const toolView = flags.toolView === undefined ? undefined : toolViewValue.safeParse(flags.toolView);
    if (toolView && !toolView.success) {
      throw new GatehouseError('validation_error', '--tool-view must be all, search or toolset:<name>.');
    }
    if (toolView && flags.role !== 'agent')
      throw new GatehouseError('validation_error', 'Only agent tokens carry a tool view.');
    const groups = flags.groups
      ?.split(',')
      .map((g) => g.trim())
      .filter(Boolean);
    const store = await openCliStore(configOf(flags));
    let created: Awaited<ReturnType<TokenStore['create']>>;
    try {
      let userId: string | undefined;
      if (flags.user) {
        const owner = await new UserStore(store).find(flags.user);
        if (!owner) throw new GatehouseError('not_found', `No user ${flags.user} (or the name is shared: use the id).`);
        checkRoleWithinOwner(flags.role as Role, owner, '--role');
        userId = owner.id;
      }
      created = await new TokenStore(store).create({
        name: flags.name,
        role: flags.role as Role,
        groups,
        toolView: toolView?.data,
        source: 'cli',
        userId,
      });
    } finally {
      await store.close();
    }
    process.stdout.write(`${JSON.stringify({ ...publicToken(created.record), token: created.token }, null, 2)}\n`);
  });

  storeFlags(token.command('list').description('List live tokens (never the tokens themselves).')).action(
    async (flags: { dataDir?: string; databaseUrl?: string }) => {
      const { tokens } = await withTokens(configOf(flags), (t) => t.list({ limit: 500, offset: 0 }));
      for (const t of tokens)
        process.stdout.write(`${t.id}\t${t.role}\t${t.name}\t${t.groups.join(',')}\t${t.createdAt}\n`);
    },
  );

  storeFlags(token.command('revoke').description('Revoke a token by id.').argument('<id>')).action(
    async (id: string, flags: { dataDir?: string; databaseUrl?: string }) => {
      const store = await openCliStore(configOf(flags));
      const events = await EventHub.open(store);
      const audit = new AuditLog(store, { events });
      try {
        // The same path as REST: audited, its pending approvals cancelled, every replica told.
        const approvals = new ApprovalQueue({ store, audit, events });
        const revoked = await revokeToken(
          { tokens: new TokenStore(store), audit, events, approvals },
          id,
          undefined,
          'cli',
        );
        if (!revoked) throw new GatehouseError('not_found', `No live token ${id}.`);
        process.stdout.write(`revoked ${id}: ${revoked.cancelledApprovals.length} approval(s) cancelled\n`);
      } finally {
        await audit.flush();
        events.close();
        await store.close();
      }
    },
  );
}
