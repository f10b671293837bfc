import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { isGatehouseError } from '../../src/errors.js';
import { openStore, type Store } from '../../src/store/db.js';
import { runTs } from '../helpers/processes.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';
import { hubRequest, openQueue, operator, type QueueHarness } from './helpers.js';

const operators = Array.from({ length: 10 }, (_, i) => ({
  id: `tok_op_${i}`,
  name: `operator-${i}`,
  role: 'operator' as const,
  groups: [],
}));

async function outcomes(promises: Promise<unknown>[]): Promise<{ won: number; lost: string[] }> {
  const settled = await Promise.allSettled(promises);
  const lost = settled
    .filter((s): s is PromiseRejectedResult => s.status === 'rejected')
    .map((s) => (isGatehouseError(s.reason) ? s.reason.code : String(s.reason)));
  return { won: settled.filter((s) => s.status === 'fulfilled').length, lost };
}

describeEachStore('approval races', (target) => {
  let store: Store;
  let place: { dataDir: string; databaseUrl: string | undefined };
  let cleanup: () => Promise<void>;
  const closers: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    const fresh = await freshStore(target);
    store = fresh.store;
    place = { dataDir: fresh.dataDir, databaseUrl: fresh.databaseUrl };
    cleanup = fresh.cleanup;
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await cleanup();
  });

  const harness = async (s: Store): Promise<QueueHarness> => {
    const h = await openQueue(s);
    closers.push(h.close);
    return h;
  };

  it('10 concurrent approvals in one process: exactly one wins, the call runs once', async () => {
    const h = await harness(store);
    const created = await h.queue.create(hubRequest());
    const { won, lost } = await outcomes(operators.map((op) => h.queue.decide(created.id, 'approve', op)));
    expect(won).toBe(1);
    expect(lost).toEqual(Array(9).fill('approval.not_pending'));
    await h.queue.idle();
    expect(h.executor.calls).toHaveLength(1);
    const approvals = await store.db
      .selectFrom('audit_events')
      .selectAll()
      .where('action', '=', 'approval.approve')
      .execute();
    expect(approvals).toHaveLength(1);
  });

  it('approve and reject racing: one decision, and it is the one stored', async () => {
    const h = await harness(store);
    const created = await h.queue.create(hubRequest());
    const decisions = operators.map((op, i) => h.queue.decide(created.id, i % 2 ? 'reject' : 'approve', op));
    const settled = await Promise.allSettled(decisions);
    const winners = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    expect(winners).toHaveLength(1);
    await h.queue.idle();
    const row = await store.db
      .selectFrom('approvals')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(row.decided_by).toBe(winners[0]?.decidedBy?.id);
    expect(h.executor.calls).toHaveLength(winners[0]?.status === 'approved' ? 1 : 0);
  });

  it('10 concurrent approvals across two queues on two store handles: one wins, one run', async () => {
    const second = await openStore(place);
    closers.push(() => second.close());
    const a = await harness(store);
    const b = await harness(second);
    const created = await a.queue.create(hubRequest());
    const { won, lost } = await outcomes(
      operators.map((op, i) => (i % 2 ? a : b).queue.decide(created.id, 'approve', op)),
    );
    expect(won).toBe(1);
    expect(lost).toEqual(Array(9).fill('approval.not_pending'));
    await Promise.all([a.queue.idle(), b.queue.idle()]);
    expect(a.executor.calls.length + b.executor.calls.length).toBe(1);
  });

  it('two processes claiming the same approved call: it runs once (approved → executing is a compare-and-set)', async () => {
    const second = await openStore(place);
    closers.push(() => second.close());
    const a = await harness(store);
    const b = await harness(second);
    const created = await a.queue.create(hubRequest());
    // Decided by a process that died before it could claim the call …
    await store.db
      .updateTable('approvals')
      .set({ status: 'approved', decided_at: new Date().toISOString(), decided_by: operator.id })
      .where('id', '=', created.id)
      .execute();
    // … and two replicas start at once.
    const [ra, rb] = await Promise.all([a.queue.resume(), b.queue.resume(), a.queue.resume()]);
    await Promise.all([a.queue.idle(), b.queue.idle()]);
    expect((ra?.resumed ?? 0) + (rb?.resumed ?? 0)).toBeGreaterThanOrEqual(1);
    expect(a.executor.calls.length + b.executor.calls.length).toBe(1);
    const row = await store.db
      .selectFrom('approvals')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('executed');
  });

  it('approvals racing from separate processes: exactly one wins, the call runs once', {
    timeout: 90_000,
  }, async () => {
    const h = await harness(store);
    const created = await h.queue.create(hubRequest());
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-race-'));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const callsFile = join(dir, 'calls.log');
    writeFileSync(callsFile, '');
    const processes = 4;
    // Start together: each process waits for this moment after its (slow) start-up.
    const startAt = Date.now() + 8000;
    const outputs = await Promise.all(
      Array.from({ length: processes }, (_, i) =>
        runTs(new URL('./decide-process.ts', import.meta.url).pathname, [
          place.dataDir,
          place.databaseUrl ?? '-',
          created.id,
          String(i),
          String(startAt),
          callsFile,
        ]),
      ),
    );
    // Each process makes 5 attempts at once: 20 racing approvals in all.
    const results: { status?: string; code?: string }[] = outputs.flatMap((out) =>
      JSON.parse(out.trim().split('\n').at(-1) as string),
    );
    expect(results).toHaveLength(processes * 5);
    expect(results.filter((r) => r.status === 'approved')).toHaveLength(1);
    expect(results.filter((r) => r.code === 'approval.not_pending')).toHaveLength(processes * 5 - 1);
    const calls = readFileSync(callsFile, 'utf8').trim().split('\n').filter(Boolean);
    expect(calls).toHaveLength(1);
    const row = await store.db
      .selectFrom('approvals')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('executed');
    expect(Number(JSON.parse(row.result ?? '{}').ranBy)).toBe(Number(calls[0]?.split(' ')[0]));
  });
});
