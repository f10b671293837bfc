/**
 * An upstream task on the SDK client's path (`task-results.ts`): the pool without the lean exchange sends every
 * call through the SDK client, whose 2026-07-28 codec refuses `resultType: "task"`. A call that declared the
 * Tasks extension gets the task, checked and bounded like on the direct path; a call that did not still fails
 * as the SDK fails it; the connection goes on serving calls afterwards. A real SDK v2 server on loopback.
 */

import { toNodeHandler } from '@modelcontextprotocol/node';
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  createMcpHandler,
  Server,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listen } from '../fixtures/http.js';
import { Cleanup, expectFailure, makePool } from './helpers.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const NOW = '2026-12-02T07:00:00.000Z';

/** Answers `job` (and `bad_job`, whose id no agent could send back) with a task, whoever asks; `plain` with text. */
async function startServer() {
  const declared: boolean[] = [];
  const build = () => {
    const server = new Server({ name: 'task-answers', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler('tools/list', async () => ({ tools: [] }));
    server.setRequestHandler('tools/call', async (request, ctx: ServerContext) => {
      const capabilities = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[
        CLIENT_CAPABILITIES_META_KEY
      ] as { extensions?: Record<string, unknown> } | undefined;
      declared.push(capabilities?.extensions?.[TASKS] !== undefined);
      const { name } = request.params;
      if (name === 'plain') return { content: [{ type: 'text', text: 'plain answer' }] };
      const taskId = name === 'bad_job' ? 'task with spaces' : 'task-1';
      return {
        resultType: 'task',
        taskId,
        status: 'working',
        createdAt: NOW,
        lastUpdatedAt: NOW,
        ttlMs: 60_000,
        statusMessage: 'x'.repeat(5_000),
      } as unknown as CallToolResult;
    });
    return server;
  };
  const handler = createMcpHandler(build, { legacy: 'reject' });
  const node = toNodeHandler(handler);
  const listening = await listen((req, res) => void node(req, res));
  return {
    url: `${listening.origin}/mcp`,
    declared,
    async close() {
      await handler.close();
      await listening.close();
    },
  };
}

describe('an upstream task on the SDK client path', () => {
  const cleanup = new Cleanup();
  let server: Awaited<ReturnType<typeof startServer>>;
  beforeEach(async () => {
    server = cleanup.add(await startServer());
  });
  afterEach(() => cleanup.run());

  it('is the task for a call that declared the extension, and the connection serves the next calls', async () => {
    // No exchange: every call goes through the SDK client.
    const pool = cleanup.add(makePool());
    const target = { url: server.url };
    const onProgress = () => {};
    const answer = await pool.callToolInteractive(target, 'job', {}, { tasks: true, onProgress });
    expect(answer).toEqual({
      task: {
        taskId: 'task-1',
        status: 'working',
        createdAt: NOW,
        lastUpdatedAt: NOW,
        ttlMs: 60_000,
        statusMessage: 'x'.repeat(1024),
      },
    });
    expect(server.declared).toEqual([true]);
    // The same connection, a plain call: a result as ever, and no extension declared.
    expect(await pool.callToolInteractive(target, 'plain', {})).toMatchObject({
      content: [{ type: 'text', text: 'plain answer' }],
    });
    expect(server.declared).toEqual([true, false]);
    expect(pool.stats()).toMatchObject({ open: 1, directCalls: 0 });
  });

  it('is a protocol error when the task is not valid, or when the call declared nothing', async () => {
    const pool = cleanup.add(makePool());
    const target = { url: server.url };
    await expectFailure(pool.callToolInteractive(target, 'bad_job', {}, { tasks: true }), 'upstream_protocol_error', {
      reason: 'invalid_task',
    });
    // Undeclared, a task is what the SDK client refuses: the upstream's protocol error, never passed on.
    await expectFailure(pool.callToolInteractive(target, 'job', {}), 'upstream_protocol_error');
    expect(server.declared).toEqual([true, false]);
    expect(await pool.callToolInteractive(target, 'plain', {}, { tasks: true })).toMatchObject({
      content: [{ type: 'text', text: 'plain answer' }],
    });
  });
});
