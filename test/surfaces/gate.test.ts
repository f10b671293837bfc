/**
 * The gate on its own, over a real store and a real approval queue: every verdict takes the same
 * path whatever the surface, with exactly one audit event per call, and the one
 * `gatehouse__approval_status` answers in the surface's shape.
 */
import { ProtocolError } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/calls.js';
import { GatehouseError } from '../../src/errors.js';
import type { TokenPrincipal } from '../../src/identity/index.js';
import { CallLimiter } from '../../src/policy/limits.js';
import { toolVerdict } from '../../src/policy/verdicts.js';
import { SettingsService } from '../../src/settings/service.js';
import { openStore, type Store } from '../../src/store/db.js';
import { Gate, type Resolution, type SurfaceCall } from '../../src/surfaces/gate.js';
import { jsonToolResult } from '../../src/surfaces/results.js';
import { openQueue, type QueueHarness } from '../approvals/helpers.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const agent: TokenPrincipal = {
  id: 'tok_gate',
  name: 'gate-agent',
  role: 'agent',
  groups: ['default'],
  rateLimit: 3,
  maxConcurrent: null,
};

describe('the gate', () => {
  let store: Store;
  let harness: QueueHarness;
  let cleanup: () => Promise<void>;
  let events: CallEvent[];
  let ran: number;
  let limiter: CallLimiter;

  const gateFor = (surface: 'hub' | 'admin' | 'memory', wrappedArgs = false) =>
    new Gate(
      {
        settings: new SettingsService(store),
        approvals: harness.queue,
        audit: async (event) => {
          events.push(event);
        },
        limiter, // one budget per token, shared by every surface (as the gateway wires it)
      },
      { surface, wrappedArgs, upstream: surface === 'hub' },
    );

  const callOf = (resolution: Resolution, overrides: Partial<SurfaceCall> = {}): SurfaceCall => ({
    principal: agent,
    name: 'srv__tool',
    arguments: { a: 1 },
    resolve: () => resolution,
    approval: () => ({ arguments: { a: 1 }, pinHash: null, policyVersion: null, detail: { title: 'tool' } }),
    run: async () => {
      ran += 1;
      return { answer: jsonToolResult({ ran: true }), outcome: 'ok' };
    },
    ...overrides,
  });

  beforeEach(async () => {
    const place = await sqliteTarget.fresh();
    store = await openStore({ dataDir: place.dataDir });
    harness = await openQueue(store);
    cleanup = async () => {
      await harness.close();
      await store.close();
      await place.cleanup();
    };
    events = [];
    ran = 0;
    limiter = new CallLimiter();
  });
  afterEach(async () => cleanup());

  for (const surface of ['hub', 'admin', 'memory'] as const) {
    it(`${surface}: unknown, blocked, quarantined, gated and allowed calls, one audit event each`, async () => {
      const gate = gateFor(surface);
      await expect(gate.call(callOf({ verdict: 'unknown_tool', serverId: null }))).rejects.toBeInstanceOf(
        ProtocolError,
      );
      const blocked = (await gate.call(callOf({ verdict: 'blocked', serverId: 's', tool: 'tool' }))) as Json;
      expect(blocked.structuredContent).toMatchObject({ status: 'error', error: { code: 'tool.blocked' } });
      const quarantined = (await gate.call(
        callOf({ verdict: 'quarantined', serverId: 's', tool: 'tool', reason: 'changed' }),
      )) as Json;
      expect(quarantined.structuredContent.error).toMatchObject({ code: 'tool.quarantined', reason: 'changed' });
      expect(ran).toBe(0);

      const pending = (await gate.call(callOf({ verdict: 'gated', serverId: 's', tool: 'tool' }))) as Json;
      expect(pending.structuredContent).toMatchObject({ status: 'pending_approval', approval_id: expect.any(String) });
      const card = await harness.queue.get(pending.structuredContent.approval_id);
      expect(card).toMatchObject({ surface, tool: 'tool', exposedName: 'srv__tool', requester: { id: agent.id } });
      expect(ran).toBe(0);

      const allowed = (await gate.call(callOf({ verdict: 'allow', serverId: 's', tool: 'tool' }))) as Json;
      expect(allowed.structuredContent).toEqual({ ran: true });
      expect(ran).toBe(1);

      expect(events.map((e) => [e.surface, e.verdict, e.outcome])).toEqual([
        [surface, 'unknown_tool', 'unknown_tool'],
        [surface, 'blocked', 'tool.blocked'],
        [surface, 'quarantined', 'tool.quarantined'],
        [surface, 'gated', 'pending_approval'],
        [surface, 'allow', 'ok'],
      ]);
      expect(events[3]?.approvalId).toBe(pending.structuredContent.approval_id);
      expect(events[4]?.upstream).toBe(surface === 'hub');
    });
  }

  it('a run may find that the call needs an approval after all (the memory surface decides from its data)', async () => {
    const gate = gateFor('memory');
    const answer = (await gate.call(
      callOf(
        { verdict: 'allow', serverId: null, tool: 'memory_delete' },
        {
          run: async () => ({
            approval: { arguments: { ids: ['x'] }, pinHash: null, policyVersion: null, detail: { reason: 'bulk' } },
            message: 'A bulk delete needs approval.',
          }),
        },
      ),
    )) as Json;
    expect(answer.structuredContent.detail).toMatch(/^A bulk delete needs approval\. Poll gatehouse__approval_status/);
    expect(events.map((e) => e.outcome)).toEqual(['pending_approval']);
  });

  it('checks run before anything is queued; a refusal is audited with the verdict, an unknown error rethrown', async () => {
    const gate = gateFor('hub');
    const refused = (await gate.call(
      callOf(
        { verdict: 'gated', serverId: 's', tool: 'tool' },
        {
          check: () => {
            throw new GatehouseError('tool.invalid_arguments', 'bad');
          },
        },
      ),
    )) as Json;
    expect(refused.structuredContent.error.code).toBe('tool.invalid_arguments');
    expect((await harness.queue.list({ limit: 10, offset: 0 })).total).toBe(0);
    await expect(
      gate.call(
        callOf(
          { verdict: 'allow', serverId: 's', tool: 'tool' },
          {
            run: async () => {
              throw new Error('boom');
            },
          },
        ),
      ),
    ).rejects.toThrow('boom');
    expect(events.map((e) => [e.verdict, e.outcome])).toEqual([
      ['gated', 'tool.invalid_arguments'],
      ['allow', 'internal_error'],
    ]);
  });

  it('holds every surface to the token’s one rate limit', async () => {
    const hub = gateFor('hub');
    const admin = gateFor('admin');
    const allowed = { verdict: 'allow', serverId: null, tool: 'tool' } as const;
    await hub.call(callOf(allowed));
    await admin.call(callOf(allowed));
    await hub.call(callOf(allowed));
    const limited = (await admin.call(callOf(allowed))) as Json;
    expect(limited.structuredContent.error.code).toBe('rate_limited');
    expect(ran).toBe(3);
  });

  it('gatehouse__approval_status: plain arguments, or {"args": {...}} where the surface wraps them', async () => {
    const plain = gateFor('hub');
    const wrapped = gateFor('admin', true);
    const pending = (await plain.call(callOf({ verdict: 'gated', serverId: 's', tool: 'tool' }))) as Json;
    const id = pending.structuredContent.approval_id;
    expect(((await plain.approvalStatus(agent, { approval_id: id })) as Json).structuredContent.status).toBe('pending');
    expect(
      ((await wrapped.approvalStatus(agent, { args: { approval_id: id } })) as Json).structuredContent.status,
    ).toBe('pending');
    const refused = (await wrapped.approvalStatus(agent, { approval_id: id })) as Json;
    expect(refused.structuredContent.error.code).toBe('tool.invalid_arguments');
    expect(wrapped.statusTool.inputSchema.required).toEqual(['args']);
    const other = { ...agent, id: 'tok_other' };
    const foreign = (await plain.approvalStatus(other, { approval_id: id })) as Json;
    expect(foreign.structuredContent.error.code).toBe('approval.not_found');
  });
});

describe('the one quarantine rule', () => {
  it('quarantines a tool with no pin or a waiting pin, and leaves an excluded tool hidden', () => {
    expect(toolVerdict('allow', undefined)).toBe('quarantined');
    expect(toolVerdict('gated', { state: 'quarantined' })).toBe('quarantined');
    expect(toolVerdict('blocked', { state: 'pinned' })).toBe('blocked');
    expect(toolVerdict('allow', { state: 'pinned' })).toBe('allow');
    expect(toolVerdict('excluded', undefined)).toBe('excluded');
  });
});
