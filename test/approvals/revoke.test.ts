/**
 * A revoked requester's calls never run: revoking its token cancels its pending approvals (audited),
 * and an approved call whose requester is no longer active is refused right before it would run.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

const structured = (result: unknown) => (result as { structuredContent: Record<string, unknown> }).structuredContent;

describeEachStore('revoked principals', (target) => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let client: Client;
  let agent: { id: string; token: string };

  const gatedCall = async (a: number): Promise<string> => {
    const pending = structured(await client.callTool({ name: 'files__add', arguments: { a, b: 1 } }));
    expect(pending.status).toBe('pending_approval');
    return pending.approval_id as string;
  };
  const approval = async (id: string) => (await gw.request('GET', `/api/approvals/${id}`)).json();
  const auditActions = async (id: string) =>
    (
      (await gw.request('GET', '/api/audit?kind=admin&limit=500')).json().events as {
        action: string;
        data: { approvalId?: string } | null;
      }[]
    )
      .filter((e) => e.data?.approvalId === id)
      .map((e) => e.action);

  beforeEach(async () => {
    gw = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBeLessThan(300);
    expect(
      (await gw.request('PATCH', '/api/mcp/servers/files/tools', { body: { mode: 'all', gated: ['add'] } })).statusCode,
    ).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'soon-revoked' } })).json();
    const base = await gw.listen();
    client = await connectAgent(`${base}/mcp`, agent.token);
  });

  afterEach(async () => {
    await client.close().catch(() => {});
    await upstream.close();
    await gw.close();
  });

  it('revoking a token cancels its pending approvals, audited; they can no longer be approved', async () => {
    const ids = [await gatedCall(1), await gatedCall(2)];
    const revoked = await gw.request('DELETE', `/api/tokens/${agent.id}`);
    expect(revoked.statusCode).toBe(200);
    for (const id of ids) {
      expect(await approval(id)).toMatchObject({ status: 'cancelled', reason: 'The token was revoked.' });
      expect(await auditActions(id)).toContain('approval.cancel');
      const late = await gw.request('POST', `/api/approvals/${id}/approve`, { body: {} });
      expect(late.statusCode).toBe(409);
      expect(late.json().error.code).toBe('approval.not_pending');
    }
    expect(upstream.stats.calls.add ?? 0).toBe(0);
  });

  it('an approved call whose requester is no longer active does not run', async () => {
    const id = await gatedCall(3);
    // Revoked behind the queue's back (another replica, a path that predates the rule): the approval
    // is still pending, an operator approves it, and the check right before it runs refuses it.
    expect(await gw.gateway.tokens.revoke(agent.id)).toBe(true);
    expect((await gw.request('POST', `/api/approvals/${id}/approve`, { body: {} })).statusCode).toBe(200);
    await gw.gateway.approvals.idle();
    expect(await approval(id)).toMatchObject({ status: 'cancelled' });
    expect((await approval(id)).reason).toMatch(/revoked/);
    expect(await auditActions(id)).toEqual(expect.arrayContaining(['approval.approve', 'approval.execute']));
    expect(upstream.stats.calls.add ?? 0).toBe(0);
  });
});
