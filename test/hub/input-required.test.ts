/**
 * The 2026-07-28 multi-round-trip flow through the hub: an upstream that needs the agent's input
 * (here a form elicitation) answers `input_required`; the agent's answers travel back to it, with
 * the hub's own signed state around the upstream's. 2025-era agents get the same through real
 * server-to-client requests; an approved call's later rounds are relayed without a new approval.
 */
import type { Client } from '@modelcontextprotocol/client';
import { acceptedContent, inputRequired, type McpServer } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('hub: input-required rounds', (target) => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  let agent: { id: string; token: string };
  /** Every time the upstream tool ran, with what it received. */
  let rounds: { responses: boolean; state: unknown }[];
  const clients: Client[] = [];

  const confirmation = z.object({ confirm: z.boolean() });
  const register = (server: McpServer) => {
    server.registerTool('deploy', { inputSchema: z.object({ env: z.string() }) }, async ({ env }, ctx) => {
      const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', confirmation);
      rounds.push({ responses: answer !== undefined, state: ctx.mcpReq.requestState() });
      if (!answer) {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({ message: `Deploy to ${env}?`, requestedSchema: confirmation }),
          },
          requestState: `asked:${env}`,
        });
      }
      return {
        content: [{ type: 'text', text: `deploy ${env}: ${answer.confirm} (${String(ctx.mcpReq.requestState())})` }],
      };
    });
  };

  const track = (client: Client) => {
    clients.push(client);
    return client;
  };

  /** An agent whose user answers every form with `confirm: <answer>`; `asked` collects the messages. */
  const connect = async (token: string, era: Era, answer = true, asked: string[] = []) =>
    track(
      await connectAgent(`${base}/mcp`, token, {
        era,
        client: { capabilities: { elicitation: { form: {} } } },
        prepare: (client) =>
          client.setRequestHandler('elicitation/create', async (request) => {
            asked.push(String(request.params.message));
            return { action: 'accept', content: { confirm: answer } };
          }),
      }),
    );

  /** A 2026 agent that handles rounds itself, to send states of its own choosing. */
  const manual = async (token: string) =>
    track(
      await connectAgent(`${base}/mcp`, token, {
        client: { capabilities: { elicitation: { form: {} } }, inputRequired: { autoFulfill: false } },
      }),
    );

  const text = (result: unknown) => JSON.stringify((result as { content: unknown }).content);
  const structured = (result: unknown) => (result as { structuredContent: Record<string, unknown> }).structuredContent;

  beforeEach(async () => {
    rounds = [];
    gw = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'ops' } });
    await gw.request('PATCH', '/api/mcp/servers/ops/tools', { body: { allow: ['deploy', 'echo'] } });
    expect((await gw.request('POST', '/api/mcp/servers/ops/test')).json().ok).toBe(true);
    agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-one' } })).json();
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
  });

  for (const era of ['modern', 'legacy'] as const) {
    it(`relays the upstream's question to the agent and its answer back (${era} agent)`, async () => {
      const asked: string[] = [];
      const client = await connect(agent.token, era, true, asked);
      const result = await client.callTool({ name: 'ops__deploy', arguments: { env: 'prod' } });
      expect(asked).toEqual(['Deploy to prod?']);
      // The upstream got the agent's answer and its own state back, unchanged.
      expect(text(result)).toContain('deploy prod: true (asked:prod)');
      expect(rounds).toEqual([
        { responses: false, state: undefined },
        { responses: true, state: 'asked:prod' },
      ]);
      // Each round is one audited call (events are written in small batches).
      let events: { outcome: string; verdict: string }[] = [];
      for (let i = 0; i < 50 && events.length < 2; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 20));
        events = (await gw.request('GET', '/api/audit?kind=call&server=ops')).json().events;
      }
      expect(events.map((e) => `${e.verdict}:${e.outcome}`).sort()).toEqual(['allow:input_required', 'allow:ok']);
    });
  }

  it('hands the agent a signed state of its own, bound to the token, tool and arguments', async () => {
    const client = await manual(agent.token);
    const first = (await client.callTool(
      { name: 'ops__deploy', arguments: { env: 'prod' } },
      { allowInputRequired: true },
    )) as unknown as { resultType: string; inputRequests: Record<string, unknown>; requestState: string };
    expect(first.resultType).toBe('input_required');
    expect(Object.keys(first.inputRequests)).toEqual(['confirm']);
    // Not the upstream's raw state: the hub's, which carries it.
    expect(first.requestState).not.toBe('asked:prod');
    expect(first.requestState.startsWith('v1.')).toBe(true);

    const round = (requestState: string, args: Record<string, unknown>, who = client) =>
      who.request({
        method: 'tools/call',
        params: {
          name: 'ops__deploy',
          arguments: args,
          inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
          requestState,
        },
      });

    // A forged state never reaches a handler: the SDK seam answers -32602.
    const [body, mac] = first.requestState.slice(3).split('.');
    const forged = `v1.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body ?? '', 'base64url').toString()), p: { v: 1, c: 'x', s: 'ops', t: 'deploy', h: 'x', u: 'forged' } })).toString('base64url')}.${mac}`;
    await expect(round(forged, { env: 'prod' })).rejects.toThrow(/requestState/i);

    // The genuine state with other arguments, or from another token, is refused as a tool error.
    const changed = await round(first.requestState, { env: 'staging' });
    expect(structured(changed)).toMatchObject({ status: 'error', error: { code: 'hub.request_state_mismatch' } });
    const other = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-two' } })).json();
    const stolen = await round(first.requestState, { env: 'prod' }, await manual(other.token));
    expect(structured(stolen)).toMatchObject({ status: 'error', error: { code: 'hub.request_state_mismatch' } });
    expect(rounds).toHaveLength(1);

    const done = await round(first.requestState, { env: 'prod' });
    expect(text(done)).toContain('deploy prod: true (asked:prod)');
  });

  for (const era of ['modern', 'legacy'] as const) {
    it(`relays the later rounds of an approved call without a new approval (${era} agent)`, async () => {
      await gw.request('PATCH', '/api/mcp/servers/ops/tools', { body: { allow: ['echo'], gated: ['deploy'] } });
      const asked: string[] = [];
      const client = await connect(agent.token, era, false, asked);
      const pending = structured(await client.callTool({ name: 'ops__deploy', arguments: { env: 'prod' } }));
      expect(pending).toMatchObject({ status: 'pending_approval' });
      const id = pending.approval_id as string;
      await gw.request('POST', `/api/approvals/${id}/approve`, { body: { reason: 'ok' } });

      // Reading the outcome is where the upstream's question reaches the agent.
      const done = structured(
        await client.callTool({ name: 'gatehouse__approval_status', arguments: { approval_id: id, wait_s: 10 } }),
      );
      expect(asked).toEqual(['Deploy to prod?']);
      expect(done).toMatchObject({ status: 'executed', approval_id: id });
      expect(JSON.stringify(done.result)).toContain('deploy prod: false (asked:prod)');
      expect(rounds).toHaveLength(2);
      expect((await gw.request('GET', '/api/approvals?status=pending')).json().count).toBe(0);

      // Asking again returns the stored outcome of the last round; the upstream is not called again.
      const again = structured(
        await client.callTool({ name: 'gatehouse__approval_status', arguments: { approval_id: id } }),
      );
      expect(again).toEqual(done);
      expect(rounds).toHaveLength(2);
    });
  }

  it('stops an approved call’s later rounds when its tool changed', async () => {
    await gw.request('PATCH', '/api/mcp/servers/ops/tools', { body: { allow: ['echo'], gated: ['deploy'] } });
    const client = await manual(agent.token);
    const pending = structured(await client.callTool({ name: 'ops__deploy', arguments: { env: 'prod' } }));
    const id = pending.approval_id as string;
    await gw.request('POST', `/api/approvals/${id}/approve`, { body: {} });
    const asking = (await client.callTool(
      { name: 'gatehouse__approval_status', arguments: { approval_id: id, wait_s: 10 } },
      { allowInputRequired: true },
    )) as unknown as { resultType: string; requestState: string };
    expect(asking.resultType).toBe('input_required');

    // The policy changes between the rounds: the approval no longer covers the call.
    await gw.request('PATCH', '/api/mcp/servers/ops/tools', {
      body: { allow: ['echo'], gated: [], blocked: ['deploy'] },
    });
    const refused = await client.request({
      method: 'tools/call',
      params: {
        name: 'gatehouse__approval_status',
        arguments: { approval_id: id },
        inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
        requestState: asking.requestState,
      },
    });
    expect(structured(refused)).toMatchObject({ status: 'error', error: { code: 'approval.out_of_scope' } });
    expect(rounds).toHaveLength(1);
  });
});
