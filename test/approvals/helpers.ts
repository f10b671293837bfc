/** Shared pieces of the approval tests: principals, a recording executor, and a queue on a real store. */

import {
  type ApprovalExecutor,
  ApprovalQueue,
  type ApprovalQueueOptions,
  type NewApproval,
  type RecheckOutcome,
} from '../../src/approvals/queue.js';
import type { ApprovalView } from '../../src/approvals/types.js';
import { AuditLog } from '../../src/audit/log.js';
import { EventHub, type StreamEvent } from '../../src/audit/stream.js';
import type { Principal } from '../../src/identity/index.js';
import type { Store } from '../../src/store/db.js';

export const agent: Principal = { id: 'tok_agent', name: 'claude-laptop', role: 'agent', groups: ['default'] };
export const otherAgent: Principal = { id: 'tok_other', name: 'cursor', role: 'agent', groups: ['default'] };
export const operator: Principal = { id: 'tok_op1', name: 'alice', role: 'operator', groups: [] };
export const operator2: Principal = { id: 'tok_op2', name: 'bob', role: 'operator', groups: [] };
export const admin: Principal = { id: 'tok_admin', name: 'root', role: 'admin', groups: [] };

/** A real executor that records what it was asked to run; its recheck answer and behaviour can be changed. */
export class RecordingExecutor implements ApprovalExecutor {
  readonly calls: ApprovalView[] = [];
  readonly rechecks: string[] = [];
  recheckAnswer: RecheckOutcome = { ok: true };
  /** Replace to make execute fail, or hang until aborted. */
  behaviour: (approval: ApprovalView, signal: AbortSignal) => Promise<unknown> = async (approval) => ({
    content: [{ type: 'text', text: `ran with ${JSON.stringify(approval.arguments)}` }],
  });

  async recheck(approval: ApprovalView): Promise<RecheckOutcome> {
    this.rechecks.push(approval.id);
    return this.recheckAnswer;
  }

  async execute(approval: ApprovalView, signal: AbortSignal): Promise<unknown> {
    this.calls.push(approval);
    return this.behaviour(approval, signal);
  }
}

export interface QueueHarness {
  queue: ApprovalQueue;
  executor: RecordingExecutor;
  events: EventHub;
  seen: StreamEvent[];
  close(): Promise<void>;
}

export async function openQueue(store: Store, options: Partial<ApprovalQueueOptions> = {}): Promise<QueueHarness> {
  const events = await EventHub.open(store);
  const seen: StreamEvent[] = [];
  const unsubscribe = events.subscribe((event) => seen.push(event));
  const queue = new ApprovalQueue({ store, audit: new AuditLog(store), events, ...options });
  const executor = new RecordingExecutor();
  queue.registerExecutor('hub', executor);
  return {
    queue,
    executor,
    events,
    seen,
    async close() {
      await queue.close();
      unsubscribe();
      events.close();
    },
  };
}

export function hubRequest(overrides: Partial<NewApproval> = {}): NewApproval {
  return {
    surface: 'hub',
    requester: agent,
    serverId: 'files',
    tool: 'write_file',
    exposedName: 'files__write_file',
    arguments: { path: 'notes/today.md', content: 'the secret plan', options: { mode: 0o600, tags: ['a', 'b'] } },
    pinHash: 'a'.repeat(64),
    policyVersion: 3,
    detail: { title: 'Write file', description: 'Writes a file in the workspace.' },
    ...overrides,
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `check` holds (or fails the test after `timeoutMs`). */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await sleep(20);
  }
}
