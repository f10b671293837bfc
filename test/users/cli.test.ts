/** `gatehouse users …` and `gatehouse token create --user`, as a person runs them, on a real store. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApprovalQueue } from '../../src/approvals/queue.js';
import { AuditLog } from '../../src/audit/log.js';
import { EventHub } from '../../src/audit/stream.js';
import { openStore } from '../../src/store/db.js';
import { runCli } from '../cli/helpers.js';

describe('gatehouse users', { timeout: 480_000 }, () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-users-cli-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates, lists, disables (cancelling pending approvals) and deletes users; tokens get an owner', async () => {
    const at = ['--data-dir', dir];
    const created = await runCli([
      'users',
      'create',
      '--name',
      'alice',
      '--role',
      'operator',
      '--groups',
      'eng',
      ...at,
    ]);
    expect(created.code, created.stderr).toBe(0);
    const alice = JSON.parse(created.stdout);
    expect(alice).toMatchObject({ name: 'alice', role: 'operator', groups: ['eng'], source: 'cli', disabled: false });

    const dup = await runCli(['users', 'create', '--name', 'alice', ...at]);
    expect(dup.code).not.toBe(0);
    expect(dup.stderr).toMatch(/already exists/);

    const token = await runCli([
      'token',
      'create',
      '--role',
      'agent',
      '--name',
      'alice-laptop',
      '--user',
      'alice',
      ...at,
    ]);
    expect(token.code, token.stderr).toBe(0);
    const agent = JSON.parse(token.stdout);
    expect(agent.userId).toBe(alice.id);

    // A pending approval asked by alice's agent, as the hub records it.
    const store = await openStore({ dataDir: dir });
    let approvalId: string;
    try {
      const events = await EventHub.open(store);
      const queue = new ApprovalQueue({ store, audit: new AuditLog(store), events });
      const approval = await queue.create({
        surface: 'hub',
        requester: {
          id: agent.id,
          name: 'alice-laptop',
          role: 'agent',
          groups: ['default'],
          user: { id: alice.id, name: 'alice', role: 'operator', groups: ['eng'] },
        },
        serverId: 'files',
        tool: 'add',
        exposedName: 'files__add',
        arguments: { a: 1 },
        pinHash: null,
        policyVersion: null,
        detail: {},
      });
      approvalId = approval.id;
      await queue.close();
      events.close();
    } finally {
      await store.close();
    }

    const disabled = await runCli(['users', 'disable', 'alice', ...at]);
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(disabled.stdout).toBe(`disabled ${alice.id}: 0 session(s) ended, 1 approval(s) cancelled\n`);
    const listed = await runCli(['users', 'list', ...at]);
    expect(listed.stdout).toMatch(new RegExp(`^${alice.id}\\toperator\\talice\\t-\\tdisabled\\teng$`, 'm'));

    const check = await openStore({ dataDir: dir });
    try {
      const row = await check.db
        .selectFrom('approvals')
        .select(['status', 'reason', 'requester_user_id'])
        .where('id', '=', approvalId)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ status: 'cancelled', reason: 'The user was disabled.', requester_user_id: alice.id });
    } finally {
      await check.close();
    }

    const deleted = await runCli(['users', 'delete', 'alice', ...at]);
    expect(deleted.stdout).toBe(`deleted ${alice.id}; revoked 1 token(s)\n`);
    const check2 = await openStore({ dataDir: dir });
    try {
      const tokens = await check2.db
        .selectFrom('tokens')
        .select(['id', 'revoked_at'])
        .where('id', '=', agent.id)
        .execute();
      expect(tokens[0]?.revoked_at).not.toBeNull();
      expect(await check2.db.selectFrom('users').selectAll().execute()).toEqual([]);
    } finally {
      await check2.close();
    }
  });
});
