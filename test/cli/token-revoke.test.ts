/** `gatehouse token revoke` takes the one revoke path REST takes: audited, the token's pending approvals cancelled. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApprovalQueue } from '../../src/approvals/queue.js';
import { AuditLog } from '../../src/audit/log.js';
import { EventHub } from '../../src/audit/stream.js';
import { openStore } from '../../src/store/db.js';
import { runCli } from './helpers.js';

describe('gatehouse token revoke', { timeout: 240_000 }, () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-token-revoke-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('cancels the pending approvals of the revoked token, audits it, and refuses an unknown id', async () => {
    const at = ['--data-dir', dir];
    const created = await runCli(['token', 'create', '--role', 'agent', '--name', 'bot', ...at]);
    expect(created.code, created.stderr).toBe(0);
    const agent = JSON.parse(created.stdout) as { id: string };

    // A pending approval asked by that token, as the hub records it.
    const store = await openStore({ dataDir: dir });
    let approvalId: string;
    try {
      const events = await EventHub.open(store);
      const queue = new ApprovalQueue({ store, audit: new AuditLog(store), events });
      const approval = await queue.create({
        surface: 'hub',
        requester: { id: agent.id, name: 'bot', role: 'agent', groups: ['default'] },
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

    const revoked = await runCli(['token', 'revoke', agent.id, ...at]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toBe(`revoked ${agent.id}: 1 approval(s) cancelled\n`);

    const check = await openStore({ dataDir: dir });
    try {
      const row = await check.db
        .selectFrom('approvals')
        .select(['status', 'reason'])
        .where('id', '=', approvalId)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ status: 'cancelled', reason: 'The token was revoked.' });
      const actions = await check.db
        .selectFrom('audit_events')
        .select(['action', 'data'])
        .where('action', 'in', ['token.revoke', 'approval.cancel'])
        .orderBy('id')
        .execute();
      expect(actions.map((a) => a.action)).toEqual(['token.revoke', 'approval.cancel']);
      expect(JSON.parse(actions[0]?.data ?? '{}')).toEqual({ id: agent.id, via: 'cli' });
      const token = await check.db
        .selectFrom('tokens')
        .select('revoked_at')
        .where('id', '=', agent.id)
        .executeTakeFirst();
      expect(token?.revoked_at).not.toBeNull();
    } finally {
      await check.close();
    }

    const again = await runCli(['token', 'revoke', agent.id, ...at]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain(`No live token ${agent.id}.`);
  });
});
