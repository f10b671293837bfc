/**
 * The Tasks extension through the hub (issue 19, "New reach"): a gated call answers as a task to an agent
 * that declared `io.modelcontextprotocol/tasks` — `working` while the approval waits, `completed` with
 * the tool's result once approved, `failed` with the reason once rejected, `cancelled` when withdrawn —
 * while an agent without it still gets `pending_approval`; and an upstream's own tasks pass through,
 * bound to the token that created them (another token's `tasks/get` is "not found"), on any replica.
 *
 * Agents: the official SDK v2 client (2025 era, the extension in its initialize capabilities; its
 * 2026-07-28 codec refuses `resultType: "task"` locally, so 2026-07-28 tasks are driven over plain HTTP
 * with the spec's headers and `_meta` envelope, as the conformance suite's client does). Upstreams: an
 * SDK-built server on 127.0.0.2 for the gated tool, and an SDK-built server that implements the extension.
 */
import type { Client } from '@modelcontextprotocol/client';
import { acceptedContent, inputRequired, type McpServer } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { startTasksServer, TASKS_EXTENSION, type TasksFixture } from '../fixtures/tasks-server.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

type Json = Record<string, unknown>;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/;
const AnyResult = z.looseObject({});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A tool that asks the agent to confirm (a 2026-07-28 `input_required` round) before it answers. */
const confirmation = z.object({ confirm: z.boolean() });
function registerDeploy(server: McpServer): void {
  server.registerTool('deploy', { inputSchema: z.object({ env: z.string() }) }, async ({ env }, ctx) => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', confirmation);
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
}

describeEachStore('the Tasks extension through the hub', (target) => {
  let gw: TestGateway;
  let files: McpFixture;
  let jobs: TasksFixture;
  let base: string;
  let agent: { id: string; token: string };
  let other: { id: string; token: string };
  const clients: Client[] = [];
  const extra: TestGateway[] = [];

  let nextId = 1;
  /** One 2026-07-28 request over plain HTTP: the spec's headers and `_meta` envelope (the extension, or none). */
  async function rpc(
    url: string,
    token: string,
    method: string,
    params: Json,
    declare: boolean | Json = true,
  ): Promise<{ status: number; result?: Json; error?: { code: number; message: string; data?: Json } }> {
    const name = method === 'tools/call' ? params.name : method.startsWith('tasks/') ? params.taskId : undefined;
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': method,
        ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: nextId++,
        method,
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'tasks-test', version: '1.0.0' },
            'io.modelcontextprotocol/clientCapabilities': declare
              ? { ...(declare === true ? {} : declare), extensions: { [TASKS_EXTENSION]: {} } }
              : {},
          },
        },
      }),
    });
    const body = (await response.json()) as { result?: Json; error?: { code: number; message: string } };
    return { status: response.status, ...body };
  }

  /** `tasks/get` until the task is no longer `working` (or `until` says stop). */
  async function settle(url: string, token: string, taskId: string): Promise<Json> {
    for (let i = 0; i < 200; i++) {
      const got = await rpc(url, token, 'tasks/get', { taskId });
      expect(got.error).toBeUndefined();
      if (got.result?.status !== 'working') return got.result as Json;
      await sleep(25);
    }
    throw new Error(`task ${taskId} never settled`);
  }

  async function api(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: Json }> {
    const response = await gw.request(method, path, { body, token: TEST_ADMIN_TOKEN });
    return { status: response.statusCode, body: response.json() };
  }

  beforeEach(async () => {
    gw = await startTestGateway(target);
    files = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'], register: registerDeploy });
    jobs = await startTasksServer(PUBLIC_TEST_HOST);
    for (const [id, url] of [
      ['files', files.url],
      ['jobs', jobs.url],
    ] as const) {
      expect((await gw.request('POST', '/api/mcp/install', { body: { url, id } })).statusCode).toBeLessThan(300);
    }
    const policy = await gw.request('PATCH', '/api/mcp/servers/files/tools', {
      body: { mode: 'all', allow: ['echo'], gated: ['add', 'deploy'], defaultTier: 'blocked' },
    });
    expect(policy.statusCode).toBe(200);
    const jobsPolicy = await gw.request('PATCH', '/api/mcp/servers/jobs/tools', {
      body: { mode: 'all', allow: ['greet', 'slow_compute'], defaultTier: 'blocked' },
    });
    expect(jobsPolicy.statusCode).toBe(200);
    for (const id of ['files', 'jobs']) {
      expect((await gw.request('POST', `/api/mcp/servers/${id}/test`)).json().ok).toBe(true);
    }
    for (const name of ['agent-one', 'agent-two']) {
      const created = await gw.request('POST', '/api/tokens', { body: { role: 'agent', name } });
      expect(created.statusCode).toBe(201);
      if (name === 'agent-one') agent = created.json();
      else other = created.json();
    }
    base = await gw.listen();
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    for (const replica of extra.splice(0)) await replica.close();
    await jobs.close();
    await files.close();
    await gw.close();
  });

  it('a gated call is a task on /mcp and /mcp/s/{id}: working while it waits, completed with the result once approved', async () => {
    for (const [round, [path, name]] of (
      [
        ['/mcp', 'files__add'],
        ['/mcp/s/files', 'add'],
      ] as const
    ).entries()) {
      const url = `${base}${path}`;
      // The extension is declared on discovery.
      const discovered = await rpc(url, agent.token, 'server/discover', {});
      expect(discovered.result?.capabilities).toMatchObject({ extensions: { [TASKS_EXTENSION]: {} } });

      const created = await rpc(url, agent.token, 'tools/call', { name, arguments: { a: 2, b: 3 } });
      expect(created.status).toBe(200);
      const task = created.result as Json;
      // SEP-2663's CreateTaskResult: flat, no result/error/inputRequests, ISO times, integer or null TTL.
      expect(task).toMatchObject({
        resultType: 'task',
        taskId: expect.stringMatching(/^gatehouse__apr_/),
        status: 'working',
        createdAt: expect.stringMatching(ISO),
        lastUpdatedAt: expect.stringMatching(ISO),
        ttlMs: null,
        pollIntervalMs: expect.any(Number),
      });
      for (const key of ['task', 'result', 'error', 'inputRequests', 'requestState', 'ttl', 'pollInterval']) {
        expect(task).not.toHaveProperty(key);
      }
      const taskId = task.taskId as string;
      const approvalId = taskId.slice('gatehouse__'.length);

      const waiting = await rpc(url, agent.token, 'tasks/get', { taskId });
      expect(waiting.result).toMatchObject({ resultType: 'complete', taskId, status: 'working' });
      expect(waiting.result?.statusMessage).toContain(approvalId);
      expect(waiting.result).not.toHaveProperty('result');
      expect(files.stats.calls.add ?? 0).toBe(round);

      // The operator sees an ordinary approval card and approves it over REST.
      expect((await api('GET', `/api/approvals/${approvalId}`)).body).toMatchObject({
        status: 'pending',
        tool: 'add',
        requester: { id: agent.id },
      });
      expect((await api('POST', `/api/approvals/${approvalId}/approve`, {})).status).toBe(200);

      const done = await settle(url, agent.token, taskId);
      expect(done).toMatchObject({
        taskId,
        status: 'completed',
        result: { content: [{ type: 'text', text: '5' }], structuredContent: { sum: 5 } },
      });
      expect(done).not.toHaveProperty('error');
      // Another token's tasks/get of it reads exactly like a task that does not exist.
      const foreign = await rpc(url, other.token, 'tasks/get', { taskId });
      expect(foreign.error).toMatchObject({ code: -32602 });
      // tasks/result and tasks/list are not methods of the extension.
      expect((await rpc(url, agent.token, 'tasks/result', { taskId })).error).toMatchObject({ code: -32601 });
    }
    expect(files.stats.calls.add).toBe(2);
  });

  it('a rejection fails the task with the reason; tasks/cancel withdraws a call that waits', async () => {
    const url = `${base}/mcp`;
    const rejectedId = (await rpc(url, agent.token, 'tools/call', { name: 'files__add', arguments: { a: 1, b: 1 } }))
      .result?.taskId as string;
    const approvalId = rejectedId.slice('gatehouse__'.length);
    expect((await api('POST', `/api/approvals/${approvalId}/reject`, { reason: 'not on a Friday' })).status).toBe(200);
    const failed = await settle(url, agent.token, rejectedId);
    expect(failed).toMatchObject({
      status: 'failed',
      error: { code: expect.any(Number), message: expect.stringContaining('not on a Friday') },
    });
    expect(failed).not.toHaveProperty('result');

    const withdrawn = (await rpc(url, agent.token, 'tools/call', { name: 'files__add', arguments: { a: 4, b: 4 } }))
      .result?.taskId as string;
    // Another token cannot cancel it (not found); its owner can, and the ack is empty.
    expect((await rpc(url, other.token, 'tasks/cancel', { taskId: withdrawn })).error).toMatchObject({ code: -32602 });
    const ack = await rpc(url, agent.token, 'tasks/cancel', { taskId: withdrawn });
    expect(ack.result).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    expect((await rpc(url, agent.token, 'tasks/get', { taskId: withdrawn })).result).toMatchObject({
      status: 'cancelled',
    });
    const card = (await api('GET', `/api/approvals/${withdrawn.slice('gatehouse__'.length)}`)).body;
    expect(card).toMatchObject({ status: 'cancelled' });
    expect(files.stats.calls.add ?? 0).toBe(0);
  });

  it('an approved call that asks for input puts its task in input_required; tasks/update answers it', async () => {
    const url = `${base}/mcp`;
    const elicits = { elicitation: { form: {} } };
    const created = await rpc(
      url,
      agent.token,
      'tools/call',
      { name: 'files__deploy', arguments: { env: 'prod' } },
      elicits,
    );
    const taskId = created.result?.taskId as string;
    expect((await api('POST', `/api/approvals/${taskId.slice('gatehouse__'.length)}/approve`, {})).status).toBe(200);
    const asking = await settle(url, agent.token, taskId);
    expect(asking).toMatchObject({
      status: 'input_required',
      inputRequests: { confirm: { method: 'elicitation/create', params: { message: 'Deploy to prod?' } } },
    });
    expect(asking).not.toHaveProperty('requestState');
    // Another token's answers are not found, and change nothing.
    const foreign = await rpc(url, other.token, 'tasks/update', { taskId, inputResponses: {} }, elicits);
    expect(foreign.error).toMatchObject({ code: -32602 });
    const ack = await rpc(
      url,
      agent.token,
      'tasks/update',
      { taskId, inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } },
      elicits,
    );
    expect(ack.result).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    const done = await settle(url, agent.token, taskId);
    expect(done).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'deploy prod: true (asked:prod)' }] },
    });
  });

  it('an agent without the extension gets pending_approval, and the task methods refuse it (-32021)', async () => {
    const url = `${base}/mcp`;
    const plain = await rpc(url, agent.token, 'tools/call', { name: 'files__add', arguments: { a: 1, b: 2 } }, false);
    expect(plain.result?.structuredContent).toMatchObject({ status: 'pending_approval' });
    expect(plain.result).not.toHaveProperty('taskId');
    const refused = await rpc(url, agent.token, 'tasks/get', { taskId: 'gatehouse__apr_x' }, false);
    expect(refused.error).toMatchObject({
      code: -32021,
      data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    });

    // The SDK v2 client of 2025: without the extension, pending_approval; with it (initialize), a task.
    const legacy = await connectAgent(`${base}/mcp/s/files`, agent.token, { era: 'legacy' });
    clients.push(legacy);
    const pending = await legacy.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
    expect(pending.structuredContent).toMatchObject({ status: 'pending_approval' });

    for (const [path, name, a] of [
      ['/mcp/s/files', 'add', 20],
      ['/mcp', 'files__add', 30],
    ] as const) {
      const declaring = await connectAgent(`${base}${path}`, agent.token, {
        era: 'legacy',
        client: { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
      });
      clients.push(declaring);
      expect(declaring.getServerCapabilities()?.extensions).toMatchObject({ [TASKS_EXTENSION]: {} });
      const task = await declaring.request(
        { method: 'tools/call', params: { name, arguments: { a, b: 22 } } },
        AnyResult,
      );
      expect(task).toMatchObject({ taskId: expect.stringMatching(/^gatehouse__apr_/), status: 'working' });
      const taskId = task.taskId as string;
      await api('POST', `/api/approvals/${taskId.slice('gatehouse__'.length)}/approve`, {});
      let got: Json = {};
      for (let i = 0; i < 200 && got.status !== 'completed'; i++) {
        got = await declaring.request({ method: 'tasks/get', params: { taskId } }, AnyResult);
        if (got.status !== 'completed') await sleep(25);
      }
      expect(got).toMatchObject({
        taskId,
        status: 'completed',
        result: { content: [{ type: 'text', text: String(a + 22) }] },
      });
    }
  });

  it("an upstream's task passes through, bound to the token that created it, on any replica", async () => {
    // /mcp/s/{id}: the upstream's own id; /mcp: `<server>__<id>`.
    const single = await rpc(`${base}/mcp/s/jobs`, agent.token, 'tools/call', {
      name: 'slow_compute',
      arguments: { ms: 100 },
    });
    expect(single.error).toBeUndefined();
    expect(single.result).toMatchObject({ resultType: 'task', status: 'working', ttlMs: 60_000 });
    const upstreamId = single.result?.taskId as string;
    expect(jobs.tasks.has(upstreamId)).toBe(true);
    expect(await settle(`${base}/mcp/s/jobs`, agent.token, upstreamId)).toMatchObject({
      taskId: upstreamId,
      status: 'completed',
      result: { content: [{ type: 'text', text: 'computed in 100 ms' }] },
    });

    const url = `${base}/mcp`;
    const created = await rpc(url, agent.token, 'tools/call', {
      name: 'jobs__slow_compute',
      arguments: { ms: 60_000 },
    });
    const taskId = created.result?.taskId as string;
    expect(taskId).toMatch(/^jobs__task-/);
    const ownId = taskId.slice('jobs__'.length);
    expect(jobs.tasks.get(ownId)?.status).toBe('working');
    const seen = jobs.received.length;

    // Another token: not found, for every task method, and nothing reaches the upstream.
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const foreign = await rpc(url, other.token, method, { taskId, inputResponses: {} });
      expect(foreign.error, method).toMatchObject({ code: -32602 });
    }
    expect(jobs.received.length).toBe(seen);
    expect(jobs.tasks.get(ownId)?.status).toBe('working');

    // Another replica on the same store knows the binding.
    const replica = await startTestGateway(
      target,
      {},
      {},
      {
        dataDir: gw.dataDir,
        databaseUrl: gw.databaseUrl,
        cleanup: async () => {},
      },
    );
    extra.push(replica);
    const replicaUrl = `${await replica.listen()}/mcp`;
    expect((await rpc(replicaUrl, agent.token, 'tasks/get', { taskId })).result).toMatchObject({
      taskId,
      status: 'working',
    });
    expect((await rpc(replicaUrl, other.token, 'tasks/get', { taskId })).error).toMatchObject({ code: -32602 });
    expect((await rpc(replicaUrl, agent.token, 'tasks/cancel', { taskId })).result).toMatchObject({
      resultType: 'complete',
    });
    expect(jobs.tasks.get(ownId)?.status).toBe('cancelled');
    expect((await rpc(url, agent.token, 'tasks/get', { taskId })).result).toMatchObject({ status: 'cancelled' });
    expect(jobs.received.slice(seen).map((r) => [r.method, r.taskId])).toEqual([
      ['tasks/get', ownId],
      ['tasks/cancel', ownId],
      ['tasks/get', ownId],
    ]);

    // Without the extension the upstream is not offered it, and answers synchronously.
    const sync = await rpc(url, agent.token, 'tools/call', { name: 'jobs__slow_compute', arguments: { ms: 0 } }, false);
    expect(sync.result).toMatchObject({ content: [{ type: 'text', text: 'computed in 0 ms' }] });
    expect(sync.result).not.toHaveProperty('taskId');
  });
});
