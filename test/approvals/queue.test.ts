import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { openStore, type Store } from '../../src/store/db.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';
import { rejection } from '../registry/helpers.js';
import {
  admin,
  agent,
  eventually,
  hubRequest,
  openQueue,
  operator,
  operator2,
  otherAgent,
  type QueueHarness,
  sleep,
} from './helpers.js';

describeEachStore('approval queue', (target) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let place: { dataDir: string; databaseUrl: string | undefined };
  let h: QueueHarness;
  const extra: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    const fresh = await freshStore(target);
    store = fresh.store;
    cleanup = fresh.cleanup;
    place = { dataDir: fresh.dataDir, databaseUrl: fresh.databaseUrl };
    h = await openQueue(store);
  });
  afterEach(async () => {
    for (const close of extra.splice(0).reverse()) await close();
    await h.close();
    await cleanup();
  });

  const row = (id: string) =>
    store.db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  it('creates a pending approval bound to the arguments hash, pin, policy and expiry', async () => {
    const before = Date.now();
    const created = await h.queue.create(hubRequest());
    expect(created.id).toMatch(/^apr_[A-Za-z0-9_-]{16}$/);
    expect(created).toMatchObject({
      surface: 'hub',
      status: 'pending',
      requester: { id: agent.id, name: agent.name },
      serverId: 'files',
      tool: 'write_file',
      exposedName: 'files__write_file',
      arguments: hubRequest().arguments,
      pinHash: 'a'.repeat(64),
      policyVersion: 3,
      detail: { title: 'Write file', description: 'Writes a file in the workspace.' },
      decidedAt: null,
      decidedBy: null,
      error: null,
      hasResult: false,
    });
    const expected = createHash('sha256')
      .update(canonicalize(hubRequest().arguments) as string)
      .digest('hex');
    expect(created.argsHash).toBe(expected);
    const ttl = Date.parse(created.expiresAt) - Date.parse(created.createdAt);
    expect(ttl).toBe(15 * 60_000);
    expect(Date.parse(created.createdAt)).toBeGreaterThanOrEqual(before - 1);
    expect(await h.queue.get(created.id)).toEqual({ ...created, result: null });

    // The event and the audit row carry ids and names, never the argument values.
    await eventually(() => h.seen.some((e) => e.type === 'approval.created'));
    const event = h.seen.find((e) => e.type === 'approval.created');
    expect(event?.data).toMatchObject({ id: created.id, surface: 'hub', server: 'files', tool: 'write_file' });
    expect(JSON.stringify(event?.data)).not.toContain('secret plan');
    const audit = await store.db
      .selectFrom('audit_events')
      .selectAll()
      .where('action', '=', 'approval.create')
      .execute();
    expect(audit).toHaveLength(1);
    expect(audit[0]?.data).toContain(created.id);
    expect(audit[0]?.data).not.toContain('secret plan');
  });

  it('approve → runs once in the background → executed with the stored result, read again without re-running', async () => {
    const created = await h.queue.create(hubRequest());
    const decided = await h.queue.decide(created.id, 'approve', operator, 'looks right');
    expect(decided).toMatchObject({ status: 'approved', decidedBy: { id: operator.id, name: operator.name } });
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(1);
    expect(h.executor.calls[0]?.arguments).toEqual(hubRequest().arguments);
    expect(h.executor.rechecks).toEqual([created.id]);

    const stored = await h.queue.get(created.id);
    const expectedResult = { content: [{ type: 'text', text: `ran with ${JSON.stringify(hubRequest().arguments)}` }] };
    expect(stored).toMatchObject({ status: 'executed', hasResult: true, result: expectedResult, error: null });
    expect(stored.executedAt).toEqual(expect.any(String));

    const first = await h.queue.status(created.id, agent);
    expect(first).toEqual({ status: 'executed', approval_id: created.id, result: expectedResult });
    const again = await h.queue.status(created.id, agent, 1);
    expect(again).toEqual(first);
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(1);

    // Deciding again is refused; nothing runs.
    const twice = await rejection(h.queue.decide(created.id, 'approve', operator2));
    expect(twice.code).toBe('approval.not_pending');
    expect(twice.details).toMatchObject({ status: 'executed' });
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(1);
    const actions = (await store.db.selectFrom('audit_events').select('action').orderBy('id').execute()).map(
      (r) => r.action,
    );
    expect(actions).toEqual(['approval.create', 'approval.approve', 'approval.execute']);
  });

  it('answers status only to the token that asked', async () => {
    const created = await h.queue.create(hubRequest());
    expect(await h.queue.status(created.id, agent)).toEqual({ status: 'pending', approval_id: created.id });
    for (const stranger of [otherAgent, operator, admin]) {
      const error = await rejection(h.queue.status(created.id, stranger));
      expect(error.code).toBe('approval.not_found');
    }
    expect((await rejection(h.queue.status('apr_nope', agent))).code).toBe('approval.not_found');
    expect((await rejection(h.queue.get('apr_nope'))).code).toBe('approval.not_found');
    expect((await rejection(h.queue.decide('apr_nope', 'approve', operator))).code).toBe('approval.not_found');
  });

  it('rejects with a reason the agent reads; nothing runs', async () => {
    const created = await h.queue.create(hubRequest());
    const decided = await h.queue.decide(created.id, 'reject', operator, 'not in this workspace');
    expect(decided).toMatchObject({ status: 'rejected', reason: 'not in this workspace' });
    expect(await h.queue.status(created.id, agent)).toEqual({
      status: 'rejected',
      approval_id: created.id,
      reason: 'not in this workspace',
    });
    expect((await rejection(h.queue.decide(created.id, 'approve', operator2))).code).toBe('approval.not_pending');
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(0);
    await eventually(() => h.seen.some((e) => e.type === 'approval.decided'));
    expect(h.seen.find((e) => e.type === 'approval.decided')?.data).toMatchObject({
      id: created.id,
      status: 'rejected',
      decidedBy: operator.name,
    });
  });

  it('expires: a late decision is refused and says so, the sweep expires the rest, status reports it', async () => {
    const late = await h.queue.create(hubRequest({ ttlMs: 50 }));
    const swept = await h.queue.create(hubRequest({ ttlMs: 50 }));
    const fresh = await h.queue.create(hubRequest());
    await sleep(80);
    const error = await rejection(h.queue.decide(late.id, 'approve', operator));
    expect(error.code).toBe('approval.not_pending');
    expect(error.details).toMatchObject({ status: 'expired' });
    expect(error.message).toContain('expired');
    expect((await row(late.id)).status).toBe('expired');

    expect(await h.queue.expireDue()).toEqual([swept.id]);
    expect((await row(swept.id)).status).toBe('expired');
    expect((await row(fresh.id)).status).toBe('pending');
    expect(await h.queue.status(swept.id, agent)).toMatchObject({ status: 'expired', approval_id: swept.id });
    expect((await h.queue.status(swept.id, agent)).reason).toContain('expired');
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(0);
  });

  it('expires in the background once started, and status expires a due one itself', async () => {
    const q = await openQueue(store, { sweepMs: 30 });
    extra.push(q.close);
    await q.queue.start();
    const created = await q.queue.create(hubRequest({ ttlMs: 40 }));
    await eventually(async () => (await row(created.id)).status === 'expired', 3000);

    const asked = await h.queue.create(hubRequest({ ttlMs: 40 }));
    await sleep(60);
    expect((await h.queue.status(asked.id, agent)).status).toBe('expired');
  });

  it('refuses the requester deciding its own approval, and agents deciding any', async () => {
    // An operator token that asked (through the admin surface) cannot approve its own call …
    const own = await h.queue.create(hubRequest({ surface: 'admin', requester: operator, serverId: null }));
    const self = await rejection(h.queue.decide(own.id, 'approve', operator));
    expect(self.code).toBe('approval.self_approval');
    expect((await rejection(h.queue.decide(own.id, 'reject', operator))).code).toBe('approval.self_approval');
    // … and no agent can decide anything, its own or another's.
    const created = await h.queue.create(hubRequest());
    for (const who of [agent, otherAgent, { ...operator, role: 'ops' as const }]) {
      expect((await rejection(h.queue.decide(created.id, 'approve', who))).code).toBe('forbidden');
    }
    expect((await row(created.id)).status).toBe('pending');
    expect((await row(own.id)).status).toBe('pending');
    // Another operator may.
    expect((await h.queue.decide(own.id, 'reject', operator2)).status).toBe('rejected');
  });

  it('ends out_of_scope when the recheck fails (changed tool, pin or policy); nothing runs', async () => {
    h.executor.recheckAnswer = { ok: false, reason: 'Tool "write_file" changed after the call was approved.' };
    const created = await h.queue.create(hubRequest());
    await h.queue.decide(created.id, 'approve', operator);
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(0);
    expect(await h.queue.status(created.id, agent)).toEqual({
      status: 'out_of_scope',
      approval_id: created.id,
      reason: 'Tool "write_file" changed after the call was approved.',
    });
  });

  it('ends out_of_scope when the stored arguments were tampered with after the request', async () => {
    const created = await h.queue.create(hubRequest());
    await store.db
      .updateTable('approvals')
      .set({ arguments: JSON.stringify({ path: '/etc/passwd' }) })
      .where('id', '=', created.id)
      .execute();
    await h.queue.decide(created.id, 'approve', operator);
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(0);
    expect((await h.queue.status(created.id, agent)).status).toBe('out_of_scope');
  });

  it('stores a failure as {code, message}: typed errors keep their code, others become internal_error', async () => {
    h.executor.behaviour = async () => {
      throw new GatehouseError('upstream_timeout', 'The upstream did not answer in 5000 ms.');
    };
    const typed = await h.queue.create(hubRequest());
    await h.queue.decide(typed.id, 'approve', operator);
    await h.queue.idle();
    expect(await h.queue.status(typed.id, agent)).toEqual({
      status: 'failed',
      approval_id: typed.id,
      error: { code: 'upstream_timeout', message: 'The upstream did not answer in 5000 ms.' },
    });

    h.executor.behaviour = async () => {
      throw new Error('socket details that must not leak');
    };
    const untyped = await h.queue.create(hubRequest());
    await h.queue.decide(untyped.id, 'approve', operator);
    await h.queue.idle();
    const answer = await h.queue.status(untyped.id, agent);
    expect(answer).toMatchObject({ status: 'failed', error: { code: 'internal_error' } });
    expect(JSON.stringify(answer)).not.toContain('socket details');
    expect(h.executor.calls).toHaveLength(2);
  });

  it('long-polls: wakes on the decision and the outcome within the wait', async () => {
    const created = await h.queue.create(hubRequest());
    h.executor.behaviour = async () => {
      await sleep(100);
      return { ok: true };
    };
    const started = Date.now();
    const waiting = h.queue.status(created.id, agent, 10);
    await sleep(150);
    await h.queue.decide(created.id, 'approve', operator);
    const answer = await waiting;
    const elapsed = Date.now() - started;
    expect(answer).toEqual({ status: 'executed', approval_id: created.id, result: { ok: true } });
    expect(elapsed).toBeGreaterThanOrEqual(150);
    expect(elapsed).toBeLessThan(3000);
  });

  it('long-polls until the wait ends while nobody decides, and caps the wait at 30 s', async () => {
    const created = await h.queue.create(hubRequest());
    const started = Date.now();
    expect(await h.queue.status(created.id, agent, 0.4)).toEqual({ status: 'pending', approval_id: created.id });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(380);
    expect(elapsed).toBeLessThan(2000);
    // A huge wait is cut to 30 s: closing the queue releases it now, with the current state.
    const capped = h.queue.status(created.id, agent, 3600);
    await sleep(50);
    await h.queue.close();
    expect(await capped).toEqual({ status: 'pending', approval_id: created.id });
  });

  it('long-polls across store handles: a decision made by another queue wakes the waiter', async () => {
    const second = await openStore(place);
    const other = await openQueue(second);
    extra.push(async () => {
      await other.close();
      await second.close();
    });
    const created = await h.queue.create(hubRequest());
    const started = Date.now();
    const waiting = h.queue.status(created.id, agent, 10);
    await sleep(100);
    await other.queue.decide(created.id, 'reject', operator, 'no');
    expect(await waiting).toEqual({ status: 'rejected', approval_id: created.id, reason: 'no' });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('lists newest first, by status, paged, without results', async () => {
    const a = await h.queue.create(hubRequest());
    await sleep(5);
    const b = await h.queue.create(hubRequest({ tool: 'read_file' }));
    await sleep(5);
    const c = await h.queue.create(hubRequest({ tool: 'delete_file' }));
    await h.queue.decide(a.id, 'approve', operator);
    await h.queue.decide(b.id, 'reject', operator);
    await h.queue.idle();

    const all = await h.queue.list({ limit: 100, offset: 0 });
    expect(all.total).toBe(3);
    expect(all.approvals.map((x) => x.id)).toEqual([c.id, b.id, a.id]);
    expect(all.approvals.every((x) => !('result' in x))).toBe(true);
    expect(all.approvals.find((x) => x.id === a.id)).toMatchObject({ status: 'executed', hasResult: true });
    expect(all.approvals.find((x) => x.id === b.id)?.decidedBy).toEqual({ id: operator.id, name: null });

    expect((await h.queue.list({ status: 'pending', limit: 100, offset: 0 })).approvals.map((x) => x.id)).toEqual([
      c.id,
    ]);
    const page = await h.queue.list({ limit: 1, offset: 1 });
    expect(page).toMatchObject({ total: 3 });
    expect(page.approvals.map((x) => x.id)).toEqual([b.id]);
  });

  it('survives a restart: an approved row runs on resume, a row left executing fails and never runs', async () => {
    const approved = await h.queue.create(hubRequest());
    const crashed = await h.queue.create(hubRequest());
    const live = await h.queue.create(hubRequest());
    // As a process that died would leave them: one decided but never claimed, one claimed long ago
    // (its lease lapsed), one claimed a moment ago by a live replica.
    const old = new Date(Date.now() - 60_000).toISOString();
    await store.db
      .updateTable('approvals')
      .set({ status: 'approved', decided_at: old, decided_by: operator.id })
      .where('id', '=', approved.id)
      .execute();
    await store.db
      .updateTable('approvals')
      .set({ status: 'executing', decided_at: old, decided_by: operator.id, executed_at: old })
      .where('id', '=', crashed.id)
      .execute();
    await store.db
      .updateTable('approvals')
      .set({ status: 'executing', decided_at: old, decided_by: operator.id, executed_at: new Date().toISOString() })
      .where('id', '=', live.id)
      .execute();
    await h.close();

    h = await openQueue(store);
    expect(await h.queue.resume()).toEqual({ resumed: 1, failed: 1, expired: 0 });
    await h.queue.idle();
    expect(h.executor.calls.map((c) => c.id)).toEqual([approved.id]);
    expect((await h.queue.status(approved.id, agent)).status).toBe('executed');
    const failed = await h.queue.status(crashed.id, agent);
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'internal_error' } });
    expect(failed.error?.message).toContain('never run again');
    expect((await row(live.id)).status).toBe('executing');

    // Resuming again (another restart) runs nothing more.
    expect(await h.queue.resume()).toEqual({ resumed: 0, failed: 0, expired: 0 });
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(1);
  });

  it('does not strand an approval on a process without an executor for its surface', async () => {
    const created = await h.queue.create(hubRequest({ surface: 'admin', serverId: null }));
    await h.queue.decide(created.id, 'approve', operator);
    await h.queue.idle();
    expect((await row(created.id)).status).toBe('approved');
    const adminExecutor = new (await import('./helpers.js')).RecordingExecutor();
    h.queue.registerExecutor('admin', adminExecutor);
    expect((await h.queue.resume()).resumed).toBe(1);
    await h.queue.idle();
    expect(adminExecutor.calls.map((c) => c.id)).toEqual([created.id]);
    expect(h.executor.calls).toHaveLength(0);
  });

  it('keeps a running call alive with its lease, and on close lets it finish within the grace', async () => {
    const q = await openQueue(store, { leaseMs: 90, heartbeatMs: 20, closeGraceMs: 2000 });
    extra.push(q.close);
    q.executor.behaviour = async () => {
      await sleep(300);
      return 'slow but fine';
    };
    const created = await q.queue.create(hubRequest());
    await q.queue.decide(created.id, 'approve', operator);
    await sleep(200); // longer than the lease: only the heartbeat keeps the claim fresh
    const sweeper = await openQueue(store, { leaseMs: 90 });
    extra.push(sweeper.close);
    expect((await sweeper.queue.resume()).failed).toBe(0);
    await q.queue.close();
    expect(await q.queue.status(created.id, agent)).toEqual({
      status: 'executed',
      approval_id: created.id,
      result: 'slow but fine',
    });
  });

  it('aborts a call still running when the grace is over and records it failed', async () => {
    const q = await openQueue(store, { closeGraceMs: 50 });
    extra.push(q.close);
    q.executor.behaviour = (_approval, signal) =>
      new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    const created = await q.queue.create(hubRequest());
    await q.queue.decide(created.id, 'approve', operator);
    await eventually(async () => (await row(created.id)).status === 'executing');
    await q.queue.close();
    const answer = await h.queue.status(created.id, agent);
    expect(answer).toMatchObject({ status: 'failed', error: { code: 'internal_error' } });
    expect(answer.error?.message).toContain('shut down');
  });
});
