/**
 * Upstream tasks on every call path (issue 19, Tasks extension): a call from an agent that declared
 * `io.modelcontextprotocol/tasks` is offered to a 2026-07-28 upstream as a task-augmented call, and the task the
 * upstream answers with passes through bound to the calling token, whichever way the call goes out — not only
 * as the lean direct exchange (`tasks.test.ts`) but through the SDK client (a call with a progress token) and to
 * a stdio upstream (the SDK client on its pipes).
 *
 * Upstreams: the SDK-built tasks fixture over HTTP on 127.0.0.2 and over stdio (`fixtures/stdio/tasks-server.ts`).
 * Agents: plain 2026-07-28 HTTP requests with the spec's headers and `_meta` envelope, and the SDK v2 client of
 * 2025 with the extension in its initialize capabilities.
 */
import { fileURLToPath } from 'node:url';
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TSX_LOADER } from '../fixtures/stdio/index.js';
import { startTasksServer, TASKS_EXTENSION, type TasksFixture } from '../fixtures/tasks-server.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

type Json = Record<string, unknown>;

const STDIO_TASKS = fileURLToPath(new URL('../fixtures/stdio/tasks-server.ts', import.meta.url));
const AnyResult = z.looseObject({});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('upstream tasks on every call path', { timeout: 60_000 }, () => {
  let gw: TestGateway;
  let jobs: TasksFixture;
  let base: string;
  let agent: { id: string; token: string };
  let other: { id: string; token: string };
  const clients: Client[] = [];

  let nextId = 1;
  /** One 2026-07-28 request over plain HTTP; `declare` adds the extension to its envelope, `meta` to its `_meta`. */
  async function rpc(
    url: string,
    token: string,
    method: string,
    params: Json,
    { declare = true, meta = {}, capabilities = {} }: { declare?: boolean; meta?: Json; capabilities?: Json } = {},
  ): Promise<{ status: number; result?: Json; error?: { code: number; message: string } }> {
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
            ...meta,
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'tasks-paths-test', version: '1.0.0' },
            'io.modelcontextprotocol/clientCapabilities': {
              ...capabilities,
              ...(declare ? { extensions: { [TASKS_EXTENSION]: {} } } : {}),
            },
          },
        },
      }),
    });
    // A call with a progress token may be answered as an event stream: the response is its last `data:` line.
    const text = await response.text();
    const json = response.headers.get('content-type')?.startsWith('text/event-stream')
      ? (text
          .split('\n')
          .filter((line) => line.startsWith('data: '))
          .map((line) => JSON.parse(line.slice(6)) as Json)
          .find((message) => 'result' in message || 'error' in message) ?? {})
      : (JSON.parse(text) as Json);
    return { status: response.status, ...(json as { result?: Json; error?: { code: number; message: string } }) };
  }

  /** `tasks/get` until the task is no longer `working`. */
  async function settle(url: string, token: string, taskId: string): Promise<Json> {
    for (let i = 0; i < 400; i++) {
      const got = await rpc(url, token, 'tasks/get', { taskId });
      expect(got.error).toBeUndefined();
      if (got.result?.status !== 'working') return got.result as Json;
      await sleep(25);
    }
    throw new Error(`task ${taskId} never settled`);
  }

  beforeEach(async () => {
    // The stdio fixture imports the HTTP fixture's module, outside what a sandbox lets it read.
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_STDIO_SANDBOX: 'off', GATEHOUSE_CALL_TIMEOUT_MS: '20000' });
    jobs = await startTasksServer(PUBLIC_TEST_HOST);
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: jobs.url, id: 'jobs' } })).statusCode).toBe(
      201,
    );
    const installed = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'pipes',
          name: 'pipes',
          transport: 'stdio',
          command: process.execPath,
          args: ['--import', TSX_LOADER, STDIO_TASKS],
        },
      },
    });
    expect(installed.statusCode, installed.body).toBe(201);
    for (const id of ['jobs', 'pipes']) {
      const policy = await gw.request('PATCH', `/api/mcp/servers/${id}/tools`, {
        body: { mode: 'all', allow: ['greet', 'slow_compute'], defaultTier: 'blocked' },
      });
      expect(policy.statusCode).toBe(200);
      const tested = (await gw.request('POST', `/api/mcp/servers/${id}/test`)).json();
      expect(tested.ok, JSON.stringify(tested)).toBe(true);
    }
    expect((await gw.request('POST', '/api/mcp/servers/pipes/start')).statusCode).toBe(200);
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
    await jobs.close();
    await gw.close();
  });

  it('a call with a progress token (the SDK client path) is offered as a task, and its task passes through', async () => {
    const url = `${base}/mcp`;
    const progress = { progressToken: 'p-1' };
    const created = await rpc(
      url,
      agent.token,
      'tools/call',
      { name: 'jobs__slow_compute', arguments: { ms: 100 } },
      {
        meta: progress,
      },
    );
    expect(created.error, JSON.stringify(created)).toBeUndefined();
    expect(created.result).toMatchObject({ resultType: 'task', status: 'working', ttlMs: 60_000 });
    const taskId = created.result?.taskId as string;
    expect(taskId).toMatch(/^jobs__task-/);
    expect(jobs.tasks.has(taskId.slice('jobs__'.length))).toBe(true);
    // Bound to the token that called: another one's tasks/get is "not found".
    expect((await rpc(url, other.token, 'tasks/get', { taskId })).error).toMatchObject({ code: -32602 });
    expect(await settle(url, agent.token, taskId)).toMatchObject({
      taskId,
      status: 'completed',
      result: { content: [{ type: 'text', text: 'computed in 100 ms' }] },
    });

    // An agent that can be asked for input: its call is held for input-required rounds (`held-calls.ts`), and a
    // task still passes through.
    const askable = await rpc(
      url,
      agent.token,
      'tools/call',
      { name: 'jobs__slow_compute', arguments: { ms: 0 } },
      {
        meta: progress,
        capabilities: { elicitation: { form: {} } },
      },
    );
    expect(askable.result).toMatchObject({ resultType: 'task', taskId: expect.stringMatching(/^jobs__task-/) });

    // Without the extension the upstream is not offered it, and answers synchronously on the same path.
    const sync = await rpc(
      url,
      agent.token,
      'tools/call',
      { name: 'jobs__slow_compute', arguments: { ms: 0 } },
      {
        declare: false,
        meta: progress,
      },
    );
    expect(sync.result).toMatchObject({ content: [{ type: 'text', text: 'computed in 0 ms' }] });
    expect(sync.result).not.toHaveProperty('taskId');
    expect(jobs.tasks.size).toBe(2);
  });

  it("a stdio upstream's task passes through, bound to the token that created it", async () => {
    for (const [path, prefix] of [
      ['/mcp/s/pipes', ''],
      ['/mcp', 'pipes__'],
    ] as const) {
      const url = `${base}${path}`;
      const created = await rpc(url, agent.token, 'tools/call', {
        name: `${prefix}slow_compute`,
        arguments: { ms: 50 },
      });
      expect(created.error, JSON.stringify(created)).toBeUndefined();
      expect(created.result).toMatchObject({ resultType: 'task', status: 'working', ttlMs: 60_000 });
      const taskId = created.result?.taskId as string;
      expect(taskId.startsWith(`${prefix}task-`)).toBe(true);
      for (const method of ['tasks/get', 'tasks/cancel']) {
        expect((await rpc(url, other.token, method, { taskId })).error, method).toMatchObject({ code: -32602 });
      }
      expect(await settle(url, agent.token, taskId)).toMatchObject({
        taskId,
        status: 'completed',
        result: { content: [{ type: 'text', text: 'computed in 50 ms' }] },
      });
    }

    // A long one is cancelled through the hub by its owner.
    const url = `${base}/mcp`;
    const long = await rpc(url, agent.token, 'tools/call', { name: 'pipes__slow_compute', arguments: { ms: 60_000 } });
    const taskId = long.result?.taskId as string;
    expect((await rpc(url, agent.token, 'tasks/cancel', { taskId })).result).toMatchObject({ resultType: 'complete' });
    expect((await rpc(url, agent.token, 'tasks/get', { taskId })).result).toMatchObject({ status: 'cancelled' });

    // With a progress token too, and without the extension a synchronous answer.
    const withProgress = await rpc(
      url,
      agent.token,
      'tools/call',
      { name: 'pipes__slow_compute', arguments: { ms: 0 } },
      { meta: { progressToken: 7 } },
    );
    expect(withProgress.result).toMatchObject({ resultType: 'task' });
    const sync = await rpc(
      url,
      agent.token,
      'tools/call',
      { name: 'pipes__slow_compute', arguments: { ms: 0 } },
      {
        declare: false,
      },
    );
    expect(sync.result).toMatchObject({ content: [{ type: 'text', text: 'computed in 0 ms' }] });
  });

  it('a 2025 agent that declared the extension at initialize gets a 2026-07-28 upstream task on either transport', async () => {
    for (const [id, name] of [
      ['jobs', 'jobs__slow_compute'],
      ['pipes', 'pipes__slow_compute'],
    ] as const) {
      const declaring = await connectAgent(`${base}/mcp`, agent.token, {
        era: 'legacy',
        // It can be asked for input too (its calls relay a 2025-era upstream's asks; this one is 2026-07-28 only).
        client: { capabilities: { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } } },
      });
      clients.push(declaring);
      // With progress: the SDK client path for the HTTP upstream too.
      const task = await declaring.request(
        { method: 'tools/call', params: { name, arguments: { ms: 20 }, _meta: { progressToken: `t-${id}` } } },
        AnyResult,
      );
      expect(task, id).toMatchObject({ taskId: expect.stringMatching(new RegExp(`^${id}__task-`)), status: 'working' });
      let got: Json = {};
      for (let i = 0; i < 400 && got.status !== 'completed'; i++) {
        got = await declaring.request({ method: 'tasks/get', params: { taskId: task.taskId as string } }, AnyResult);
        if (got.status !== 'completed') await sleep(25);
      }
      expect(got, id).toMatchObject({ status: 'completed', result: { content: [{ text: 'computed in 20 ms' }] } });
    }
  });
});
