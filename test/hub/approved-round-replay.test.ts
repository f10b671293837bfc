/**
 * The later rounds of an approved (gated) call are answered once each. An approved call whose 2026-07-28
 * upstream asks for input hands the agent a signed state through `gatehouse__approval_status`; that state
 * answers that one round: replaying it (with the same or other answers) after the round ran, or sending it
 * in several requests at once, reaches the upstream once — later or losing requests get
 * `hub.request_state_mismatch`. The same holds for `tasks/update` of the gated call's task, and a round
 * whose upstream call fails ends the approved call (its answers are never relayed again).
 *
 * A real gateway on loopback, an SDK-built 2026-07-28 upstream on 127.0.0.2 with a gated `transfer` that
 * asks for confirmation, SDK v2 clients (and plain HTTP for the Tasks extension) as agents.
 */
import type { Client } from '@modelcontextprotocol/client';
import { acceptedContent, inputRequired, type McpServer } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { TASKS_EXTENSION } from '../fixtures/tasks-server.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

type Json = Record<string, unknown>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeEachStore('hub: an approved call’s rounds are answered once', (target) => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  let agent: { id: string; token: string };
  /** Every transfer the upstream made (a round that carried a confirmation). */
  let transfers: { to: string; confirm: boolean }[];
  /** Every time the upstream tool ran at all. */
  let runs: number;
  /** When set, a confirmed transfer waits for it (a round held running). */
  let hold: Promise<void> | undefined;
  const clients: Client[] = [];

  const confirmation = z.object({ confirm: z.boolean() });
  const register = (server: McpServer) => {
    server.registerTool(
      'transfer',
      { inputSchema: z.object({ to: z.string(), amount: z.number() }) },
      async ({ to, amount }, ctx) => {
        runs++;
        const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', confirmation);
        if (!answer) {
          return inputRequired({
            inputRequests: {
              confirm: inputRequired.elicit({ message: `Send ${amount} to ${to}?`, requestedSchema: confirmation }),
            },
            requestState: `asked:${to}`,
          });
        }
        // Slow enough that concurrent rounds overlap on the upstream.
        await sleep(150);
        await hold;
        transfers.push({ to, confirm: answer.confirm });
        return { content: [{ type: 'text', text: `sent ${amount} to ${to}: ${answer.confirm}` }] };
      },
    );
  };

  /** A 2026-07-28 agent that handles rounds itself, to send the states it chooses. */
  const manual = async () => {
    const client = await connectAgent(`${base}/mcp`, agent.token, {
      client: { capabilities: { elicitation: { form: {} } }, inputRequired: { autoFulfill: false } },
    });
    clients.push(client);
    return client;
  };

  const structured = (result: unknown) => (result as { structuredContent: Json }).structuredContent;
  const answers = (confirm: boolean) => ({ confirm: { action: 'accept', content: { confirm } } });

  /** The gated call made, approved, and its first round read: the approval id and the state it handed out. */
  async function approvedAsking(client: Client, to: string): Promise<{ id: string; state: string }> {
    const pending = structured(await client.callTool({ name: 'pay__transfer', arguments: { to, amount: 100 } }));
    expect(pending).toMatchObject({ status: 'pending_approval' });
    const id = pending.approval_id as string;
    expect((await gw.request('POST', `/api/approvals/${id}/approve`, { body: { reason: 'ok' } })).statusCode).toBe(200);
    const asking = (await client.callTool(
      { name: 'gatehouse__approval_status', arguments: { approval_id: id, wait_s: 10 } },
      { allowInputRequired: true },
    )) as unknown as { resultType: string; requestState: string };
    expect(asking.resultType).toBe('input_required');
    return { id, state: asking.requestState };
  }

  const round = (client: Client, id: string, state: string, confirm = true) =>
    client.request({
      method: 'tools/call',
      params: {
        name: 'gatehouse__approval_status',
        arguments: { approval_id: id },
        inputResponses: answers(confirm),
        requestState: state,
      },
    });

  beforeEach(async () => {
    transfers = [];
    runs = 0;
    hold = undefined;
    gw = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'pay' } });
    await gw.request('PATCH', '/api/mcp/servers/pay/tools', { body: { allow: ['echo'], gated: ['transfer'] } });
    expect((await gw.request('POST', '/api/mcp/servers/pay/test')).json().ok).toBe(true);
    agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-one' } })).json();
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
  });

  it('refuses a replayed state once its round ran: the upstream runs the approved call once', async () => {
    const client = await manual();
    const { id, state } = await approvedAsking(client, 'mallory');
    expect(runs).toBe(1);

    const done = structured(await round(client, id, state));
    expect(done).toMatchObject({ status: 'executed', approval_id: id });
    expect(JSON.stringify(done.result)).toContain('sent 100 to mallory: true');
    expect(transfers).toHaveLength(1);

    // The same state again, with the same or other answers: refused, and the upstream is not called.
    for (const confirm of [true, false, true]) {
      const replayed = structured(await round(client, id, state, confirm));
      expect(replayed).toMatchObject({ status: 'error', error: { code: 'hub.request_state_mismatch' } });
    }
    expect(transfers).toHaveLength(1);
    expect(runs).toBe(2);

    // Reading the outcome still answers the stored result of the one round that ran.
    const again = structured(
      await client.callTool({ name: 'gatehouse__approval_status', arguments: { approval_id: id } }),
    );
    expect(again).toEqual(done);
  });

  it('runs one of several concurrent rounds carrying the same state', async () => {
    const client = await manual();
    const { id, state } = await approvedAsking(client, 'mallory');
    const answered = await Promise.all([1, 2, 3, 4].map(() => round(client, id, state).then(structured)));
    expect(answered.filter((a) => a.status === 'executed')).toHaveLength(1);
    for (const lost of answered.filter((a) => a.status !== 'executed')) {
      expect(lost).toMatchObject({ status: 'error', error: { code: 'hub.request_state_mismatch' } });
    }
    expect(transfers).toHaveLength(1);
  });

  it('refuses a state minted for an earlier round of the same approved call', async () => {
    const client = await manual();
    const { id, state } = await approvedAsking(client, 'mallory');
    // Declining is answered with the same question again: a new round, with the same upstream state.
    const declined = (await client.request(
      {
        method: 'tools/call',
        params: {
          name: 'gatehouse__approval_status',
          arguments: { approval_id: id },
          inputResponses: { confirm: { action: 'decline' } },
          requestState: state,
        },
      },
      { allowInputRequired: true },
    )) as unknown as { resultType: string; requestState: string };
    expect(declined.resultType).toBe('input_required');
    expect(runs).toBe(2);
    // The first round's state does not answer the second round; the second round's does, once.
    expect(structured(await round(client, id, state))).toMatchObject({
      status: 'error',
      error: { code: 'hub.request_state_mismatch' },
    });
    expect(transfers).toHaveLength(0);
    expect(structured(await round(client, id, declined.requestState))).toMatchObject({ status: 'executed' });
    expect(structured(await round(client, id, declined.requestState))).toMatchObject({
      status: 'error',
      error: { code: 'hub.request_state_mismatch' },
    });
    expect(transfers).toHaveLength(1);
  });

  it('ends the approved call when a round’s upstream call fails: the round is not offered again', async () => {
    const client = await manual();
    const { id, state } = await approvedAsking(client, 'mallory');
    await upstream.close();
    const failed = structured(await round(client, id, state));
    expect(failed).toMatchObject({ status: 'error' });
    expect(failed.error).not.toMatchObject({ code: 'hub.request_state_mismatch' });

    // The approval's outcome says so, and the same state (or a new read) does not run the round again.
    const after = structured(
      await client.callTool({ name: 'gatehouse__approval_status', arguments: { approval_id: id } }),
    );
    expect(after).toMatchObject({ status: 'executed', approval_id: id, result: { isError: true } });
    expect(JSON.stringify(after.result)).toMatch(/round failed/i);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    expect(structured(await round(client, id, state))).toMatchObject({
      status: 'error',
      error: { code: 'hub.request_state_mismatch' },
    });
    expect(transfers).toHaveLength(0);
  });

  it('reads a running round as pending (approval_status) and working (its task) until it ends', async () => {
    const client = await manual();
    const { id, state } = await approvedAsking(client, 'mallory');
    let release = () => {};
    hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const running = round(client, id, state);
    for (let i = 0; i < 100 && transfers.length === 0 && runs < 2; i++) await sleep(20);
    expect(runs).toBe(2);

    const read = () => client.callTool({ name: 'gatehouse__approval_status', arguments: { approval_id: id } });
    expect(structured(await read())).toMatchObject({ status: 'pending', approval_id: id });
    // While it runs, its state is refused like a replay.
    expect(structured(await round(client, id, state))).toMatchObject({
      status: 'error',
      error: { code: 'hub.request_state_mismatch' },
    });
    const task = (await rpc('tasks/get', { taskId: `gatehouse__${id}` })).result;
    expect(task).toMatchObject({ status: 'working' });
    expect(task).not.toHaveProperty('error');

    // A read that waits gets the round's outcome once it ends.
    const waiting = client.callTool({ name: 'gatehouse__approval_status', arguments: { approval_id: id, wait_s: 10 } });
    await sleep(100);
    release();
    const done = structured(await running);
    expect(done).toMatchObject({ status: 'executed', approval_id: id });
    expect(structured(await waiting)).toEqual(done);
    expect(transfers).toHaveLength(1);
  });

  it('ends a round its replica left running (stopped mid-round) once the call deadline lapsed, never runs it again', async () => {
    const client = await manual();
    const { id, state } = await approvedAsking(client, 'mallory');
    // What a replica killed mid-round leaves: the claim marker, never replaced by an outcome.
    const leaveMarker = (startedAt: Date) =>
      gw.gateway.store.db
        .updateTable('approvals')
        .set({
          result: JSON.stringify({
            gatehouse: 'round_running',
            claim: 'dead-replica',
            startedAt: startedAt.toISOString(),
          }),
        })
        .where('id', '=', id)
        .execute();
    const read = async () =>
      structured(await client.callTool({ name: 'gatehouse__approval_status', arguments: { approval_id: id } }));

    // Within the call deadline (55 s by default) and its grace it may still be running somewhere.
    await leaveMarker(new Date(Date.now() - 60_000));
    expect(await read()).toMatchObject({ status: 'pending', approval_id: id });
    expect((await rpc('tasks/get', { taskId: `gatehouse__${id}` })).result).toMatchObject({ status: 'working' });

    // Long past it: the call ends failed, says why, and the round's state does not run it again.
    await leaveMarker(new Date(Date.now() - 10 * 60_000));
    const ended = await read();
    expect(ended).toMatchObject({ status: 'executed', approval_id: id, result: { isError: true } });
    expect(JSON.stringify(ended.result)).toMatch(/stopped while it ran this round/);
    expect(await read()).toEqual(ended);
    expect((await rpc('tasks/get', { taskId: `gatehouse__${id}` })).result?.status).not.toBe('working');
    expect(structured(await round(client, id, state))).toMatchObject({
      status: 'error',
      error: { code: 'hub.request_state_mismatch' },
    });
    expect(runs).toBe(1);
    expect(transfers).toHaveLength(0);
  });

  let nextId = 1;
  /** One 2026-07-28 request over plain HTTP, declaring the Tasks extension and form elicitation. */
  async function rpc(method: string, params: Json): Promise<{ result?: Json; error?: { code: number } }> {
    const name = method === 'tools/call' ? params.name : params.taskId;
    const response = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${agent.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': method,
        'mcp-name': String(name),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: nextId++,
        method,
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'replay-test', version: '1.0.0' },
            'io.modelcontextprotocol/clientCapabilities': {
              elicitation: { form: {} },
              extensions: { [TASKS_EXTENSION]: {} },
            },
          },
        },
      }),
    });
    return (await response.json()) as { result?: Json; error?: { code: number } };
  }

  it('runs one of several concurrent tasks/update answers of a gated call’s task', async () => {
    const created = await rpc('tools/call', { name: 'pay__transfer', arguments: { to: 'mallory', amount: 100 } });
    const taskId = created.result?.taskId as string;
    expect(taskId).toMatch(/^gatehouse__/);
    await gw.request('POST', `/api/approvals/${taskId.slice('gatehouse__'.length)}/approve`, { body: {} });
    let task: Json | undefined;
    for (let i = 0; i < 200; i++) {
      task = (await rpc('tasks/get', { taskId })).result;
      if (task?.status !== 'working') break;
      await sleep(25);
    }
    expect(task).toMatchObject({ status: 'input_required' });

    const updates = await Promise.all(
      [true, true, false, true].map((confirm) => rpc('tasks/update', { taskId, inputResponses: answers(confirm) })),
    );
    for (const update of updates) expect(update.error).toBeUndefined();
    expect(transfers).toHaveLength(1);
    const done = (await rpc('tasks/get', { taskId })).result;
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ type: 'text' }] } });
    // A later answer changes nothing.
    await rpc('tasks/update', { taskId, inputResponses: answers(true) });
    expect(transfers).toHaveLength(1);
    expect(runs).toBe(2);
  });
});
