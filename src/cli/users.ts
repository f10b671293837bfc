/**
 * `gatehouse users list|create|disable|enable|delete`: people, from the shell (opens the store directly,
 * like `gatehouse token`). Disabling or deleting goes through the same path as REST: sessions end, the
 * user's tokens stop working, their pending approvals are cancelled (audited).
 */
import type { Command } from 'commander';
import { publicUser } from '../api/users.js';
import { ApprovalQueue } from '../approvals/queue.js';
import { AuditLog } from '../audit/log.js';
import { EventHub } from '../audit/stream.js';
import type { Config } from '../config.js';
import { GatehouseError } from '../errors.js';
import { deleteUser, endUserAccess, type LifecycleDeps } from '../identity/user-lifecycle.js';
import { isUserRole, USER_ROLES, type UserRole } from '../identity/users.js';
import { SessionStore } from '../store/sessions.js';
import { TokenStore } from '../store/tokens.js';
import { UserStore } from '../store/users.js';
import { dropUserGrants } from '../upstream-auth/grants.js';
import { openCliStore } from './store-notice.js';

type StoreFlags = { dataDir?: string; databaseUrl?: string };

async function withUsers<T>(config: Config, fn: (deps: LifecycleDeps & { audit: AuditLog }) => Promise<T>): Promise<T> {
  const store = await openCliStore(config);
  const events = await EventHub.open(store);
  const audit = new AuditLog(store, { events });
  try {
    const approvals = new ApprovalQueue({ store, audit, events });
    return await fn({
      users: new UserStore(store),
      sessions: new SessionStore(store),
      tokens: new TokenStore(store),
      // No egress here to revoke at authorization servers: the grants and flows are dropped.
      upstreamGrants: { disconnectUser: (id) => dropUserGrants(store.db, id) },
      approvals,
      audit,
    });
  } finally {
    await audit.flush();
    events.close();
    await store.close();
  }
}

async function findUser(deps: LifecycleDeps, idOrName: string) {
  const user = await deps.users.find(idOrName);
  if (!user) throw new GatehouseError('not_found', `No user ${idOrName} (or the name is shared: use the id).`);
  return user;
}

export function addUserCommands(program: Command, configOf: (flags: Record<string, unknown>) => Config): void {
  const users = program
    .command('users')
    .description('Create, list, disable and delete users — people who sign in and own agent tokens.');
  const storeFlags = (c: Command) =>
    c.option('--data-dir <dir>', 'data folder of the SQLite store').option('--database-url <url>', 'PostgreSQL URL');

  storeFlags(users.command('list').description('List users.')).action(async (flags: StoreFlags) => {
    const { users: found } = await withUsers(configOf(flags), (d) => d.users.list({ limit: 500, offset: 0 }));
    for (const u of found) {
      process.stdout.write(
        `${u.id}\t${u.role}\t${u.name}\t${u.email ?? '-'}\t${u.disabled ? 'disabled' : 'enabled'}\t${u.groups.join(',')}\n`,
      );
    }
  });

  storeFlags(
    users
      .command('create')
      .description('Create a user.')
      .requiredOption('--name <name>', 'display name, unique')
      .option('--email <email>', 'email address')
      .option('--role <role>', `one of ${USER_ROLES.join(', ')}`, 'member')
      .option('--groups <groups>', 'groups, comma-separated'),
  ).action(async (flags: { name: string; email?: string; role: string; groups?: string } & StoreFlags) => {
    if (!isUserRole(flags.role)) {
      throw new GatehouseError('validation_error', `--role must be one of ${USER_ROLES.join(', ')}.`);
    }
    const groups = flags.groups
      ?.split(',')
      .map((g) => g.trim())
      .filter(Boolean);
    const user = await withUsers(configOf(flags), async (d) => {
      if ((await d.users.find(flags.name))?.name === flags.name) {
        throw new GatehouseError('user.name_taken', `A user named ${flags.name} already exists.`);
      }
      const created = await d.users.create({
        name: flags.name,
        email: flags.email ?? null,
        role: flags.role as UserRole,
        groups,
        source: 'cli',
      });
      await d.audit.recordAdmin({ action: 'user.create', actor: undefined, data: { id: created.id, via: 'cli' } });
      return created;
    });
    process.stdout.write(`${JSON.stringify(publicUser(user), null, 2)}\n`);
  });

  storeFlags(
    users
      .command('disable')
      .description('Disable a user: sessions, tokens and pending approvals end.')
      .argument('<user>'),
  ).action(async (idOrName: string, flags: StoreFlags) => {
    const ended = await withUsers(configOf(flags), async (d) => {
      const user = await findUser(d, idOrName);
      await d.users.update(user.id, { disabled: true });
      const result = await endUserAccess(d, user.id, undefined, 'The user was disabled.');
      await d.audit.recordAdmin({ action: 'user.disable', actor: undefined, data: { id: user.id, via: 'cli' } });
      return { id: user.id, ...result };
    });
    process.stdout.write(
      `disabled ${ended.id}: ${ended.endedSessions} session(s) ended, ${ended.cancelledApprovals.length} approval(s) cancelled\n`,
    );
  });

  storeFlags(users.command('enable').description('Enable a disabled user again.').argument('<user>')).action(
    async (idOrName: string, flags: StoreFlags) => {
      const id = await withUsers(configOf(flags), async (d) => {
        const user = await findUser(d, idOrName);
        await d.users.update(user.id, { disabled: false });
        await d.audit.recordAdmin({ action: 'user.update', actor: undefined, data: { id: user.id, via: 'cli' } });
        return user.id;
      });
      process.stdout.write(`enabled ${id}\n`);
    },
  );

  storeFlags(
    users.command('delete').description('Delete a user and revoke the tokens they own.').argument('<user>'),
  ).action(async (idOrName: string, flags: StoreFlags) => {
    const done = await withUsers(configOf(flags), async (d) => {
      const user = await findUser(d, idOrName);
      const result = await deleteUser(d, user.id, undefined);
      await d.audit.recordAdmin({ action: 'user.delete', actor: undefined, data: { id: user.id, via: 'cli' } });
      return { id: user.id, revoked: result?.revokedTokens ?? [] };
    });
    process.stdout.write(`deleted ${done.id}; revoked ${done.revoked.length} token(s)\n`);
  });
}
