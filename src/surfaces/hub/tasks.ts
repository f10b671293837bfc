/**
 * Upstream tasks through the hub (the Tasks extension, SEP-2663). An agent that declared the extension
 * may get an upstream's answer to its call as a task; the hub passes the task on and binds its handle to
 * the agent's token in the store (`hub_tasks`), so `tasks/get`, `tasks/update` and `tasks/cancel` reach
 * the upstream only for that token — from any replica — and read as "not found" for every other one.
 *
 * On `/mcp/s/{server}` the agent sees the upstream's own task id; on `/mcp` (and toolsets) it is
 * `<server>__<task id>`, as tool names are, so tasks of two upstreams never collide. Gated calls are
 * tasks too, but the gate's own (`gate.ts`: `gatehouse__<approval id>`).
 */
import type { Client } from '@modelcontextprotocol/client';
import { CLIENT_CAPABILITIES_META_KEY } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { GatehouseError } from '../../errors.js';
import type { TokenPrincipal } from '../../identity/index.js';
import type { Store } from '../../store/db.js';
import { MAX_STATUS_MESSAGE, MAX_TASK_TTL_MS, TASKS_EXTENSION } from '../../upstream/direct-result.js';
import { boundCallResult, boundStrings } from '../../upstream/index.js';
import type { UpstreamTask } from '../../upstream/types.js';
import { isPlainObject } from '../../wire.js';
import type { EndpointScope } from '../endpoint.js';
import type { DetailedTask, TaskFields, TaskStatus } from '../results.js';
import { withLinksThroughHub } from './calls.js';
import type { HubServer, Snapshot } from './view.js';

export type TaskMethod = 'tasks/get' | 'tasks/update' | 'tasks/cancel';

/** Runs `fn` on a connected client of a server's upstream (the hub's `withUpstream`). */
export type WithUpstream = <T>(
  snapshot: Snapshot,
  server: HubServer,
  fn: (client: Client, signal: AbortSignal) => Promise<T>,
  signal: AbortSignal,
  principal?: TokenPrincipal,
) => Promise<T>;

/** Any JSON object: the upstream's answer is checked field by field below, not by the SDK. */
const AnyResult = z.looseObject({});

const STATUSES: ReadonlySet<string> = new Set(['working', 'input_required', 'completed', 'failed', 'cancelled']);

/** The id an agent sees for an upstream's task in `scope`. */
export function agentTaskId(scope: EndpointScope, serverId: string, taskId: string): string {
  return scope.kind === 'single' ? taskId : `${serverId}__${taskId}`;
}

/** An upstream's task as `createTaskResult` shapes it for the agent (its id as the agent sees it). */
export function passedTask(scope: EndpointScope, serverId: string, upstream: UpstreamTask): TaskFields {
  const { task } = upstream;
  return {
    taskId: agentTaskId(scope, serverId, task.taskId),
    status: task.status as TaskStatus,
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: task.ttlMs,
    ...(task.pollIntervalMs !== undefined ? { pollIntervalMs: task.pollIntervalMs } : {}),
    ...(task.statusMessage !== undefined ? { statusMessage: task.statusMessage } : {}),
  };
}

export class HubTasks {
  constructor(
    private readonly store: Store,
    private readonly withUpstream: WithUpstream,
  ) {}

  /**
   * Binds an upstream's new task to the token whose call created it, before the agent hears of it (so
   * a `tasks/get` right after resolves on any replica). An id the upstream already gave another token
   * is refused: the handle would be shared.
   */
  async bind(principal: TokenPrincipal, serverId: string, upstream: UpstreamTask): Promise<void> {
    const now = Date.now();
    const ttl = upstream.task.ttlMs === null ? MAX_TASK_TTL_MS : Math.min(upstream.task.ttlMs, MAX_TASK_TTL_MS);
    const nowIso = new Date(now).toISOString();
    const db = this.store.db;
    // Ended bindings go as new ones arrive (one indexed delete; nothing else keeps the table small).
    await db.deleteFrom('hub_tasks').where('expires_at', '<=', nowIso).execute();
    await db
      .insertInto('hub_tasks')
      .values({
        server_id: serverId,
        task_id: upstream.task.taskId,
        token_id: principal.id,
        created_at: nowIso,
        expires_at: new Date(now + ttl).toISOString(),
      })
      .onConflict((oc) => oc.columns(['server_id', 'task_id']).doNothing())
      .execute();
    const owner = await db
      .selectFrom('hub_tasks')
      .select('token_id')
      .where('server_id', '=', serverId)
      .where('task_id', '=', upstream.task.taskId)
      .executeTakeFirst();
    if (owner?.token_id !== principal.id) {
      throw new GatehouseError('upstream_protocol_error', 'The upstream answered with a task id it already gave.', {
        reason: 'task_id_reused',
      });
    }
  }

  /** The server and upstream task id an agent's task id names, when bound to this token and not ended. */
  async find(
    principal: TokenPrincipal,
    snapshot: Snapshot,
    scope: EndpointScope,
    taskId: string,
  ): Promise<{ server: HubServer; taskId: string } | undefined> {
    let serverId: string;
    let upstreamId = taskId;
    if (scope.kind === 'single') serverId = scope.serverId;
    else {
      const split = taskId.indexOf('__');
      if (split <= 0) return undefined;
      serverId = taskId.slice(0, split);
      upstreamId = taskId.slice(split + 2);
    }
    // A server the token no longer sees has no tasks for it either.
    const server = snapshot.server(serverId, principal.groups);
    if (!server || upstreamId.length === 0) return undefined;
    const bound = await this.store.db
      .selectFrom('hub_tasks')
      .select('task_id')
      .where('server_id', '=', serverId)
      .where('task_id', '=', upstreamId)
      .where('token_id', '=', principal.id)
      .where('expires_at', '>', new Date().toISOString())
      .executeTakeFirst();
    return bound ? { server, taskId: upstreamId } : undefined;
  }

  /**
   * A task method relayed to the upstream that owns the task, for the token it is bound to; undefined when
   * it is not this token's (the caller answers "not found"). `tasks/get` answers the task (checked, bounded,
   * its id as the agent knows it); `tasks/update` and `tasks/cancel` their empty acknowledgement.
   */
  async relay(
    principal: TokenPrincipal,
    snapshot: Snapshot,
    scope: EndpointScope,
    method: TaskMethod,
    params: { taskId: string; inputResponses?: unknown },
    signal: AbortSignal,
  ): Promise<DetailedTask | Record<string, never> | undefined> {
    const found = await this.find(principal, snapshot, scope, params.taskId);
    if (!found) return undefined;
    const { server } = found;
    const answer = await this.withUpstream(
      snapshot,
      server,
      (client, upstreamSignal) =>
        client.request(
          {
            method,
            params: {
              taskId: found.taskId,
              ...(method === 'tasks/update' ? { inputResponses: params.inputResponses ?? {} } : {}),
              // This request only: the extension the agent declared (the pooled client itself declares none).
              _meta: { [CLIENT_CAPABILITIES_META_KEY]: { extensions: { [TASKS_EXTENSION]: {} } } },
            },
          },
          AnyResult,
          { signal: upstreamSignal },
        ),
      signal,
      principal,
    );
    if (method !== 'tasks/get') return {};
    return detailedTaskOf(answer, agentTaskId(scope, server.row.id, found.taskId), scope, server.row.id);
  }
}

/** An upstream's `tasks/get` answer as the agent gets it: the task's fields only, each checked and bounded. */
function detailedTaskOf(
  answer: Record<string, unknown>,
  taskId: string,
  scope: EndpointScope,
  serverId: string,
): DetailedTask {
  const { status, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs, statusMessage, result, error, inputRequests } =
    answer;
  if (typeof status !== 'string' || !STATUSES.has(status)) {
    throw new GatehouseError('upstream_protocol_error', 'The upstream answered tasks/get without a valid status.', {
      reason: 'invalid_task',
    });
  }
  const task: DetailedTask = {
    taskId,
    status: status as TaskStatus,
    createdAt: typeof createdAt === 'string' ? boundStrings(createdAt, { maxStringChars: 64 }).value : '',
    lastUpdatedAt: typeof lastUpdatedAt === 'string' ? boundStrings(lastUpdatedAt, { maxStringChars: 64 }).value : '',
    ttlMs: typeof ttlMs === 'number' && Number.isInteger(ttlMs) && ttlMs > 0 ? ttlMs : null,
    ...(typeof pollIntervalMs === 'number' && Number.isInteger(pollIntervalMs) && pollIntervalMs > 0
      ? { pollIntervalMs }
      : {}),
    ...(typeof statusMessage === 'string'
      ? { statusMessage: boundStrings(statusMessage, { maxStringChars: MAX_STATUS_MESSAGE }).value }
      : {}),
  };
  if (status === 'completed' && isPlainObject(result)) {
    const { truncated, ...bounded } = boundCallResult(result);
    const inlined = bounded as unknown as NonNullable<DetailedTask['result']>;
    task.result = scope.kind === 'single' ? inlined : withLinksThroughHub(inlined, serverId);
  }
  if (status === 'failed' && isPlainObject(error)) {
    const bounded = boundStrings(error).value;
    task.error = {
      code: typeof bounded.code === 'number' ? bounded.code : -32603,
      message: typeof bounded.message === 'string' ? bounded.message : 'The upstream task failed.',
      ...(bounded.data !== undefined ? { data: bounded.data } : {}),
    };
  }
  if (status === 'input_required' && isPlainObject(inputRequests)) {
    task.inputRequests = boundStrings(inputRequests).value;
  }
  return task;
}
