/**
 * The process routes of stdio servers (hal0 left them as 501 stubs): start, stop and restart the
 * supervised child. Each answers the process view (`state`, `pid`, `crashes`, `lastError`, …) once
 * the change is complete; a start that fails answers its typed error (and the supervisor retries it
 * with backoff).
 */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { Principal } from '../identity/index.js';
import { serverIdSchema } from '../registry/ids.js';
import type { ProcessView, StdioSupervisor } from '../supervisor/supervisor.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;
const idParams = z.strictObject({ id: serverIdSchema });

export interface ProcessRouteDeps {
  supervisor: StdioSupervisor;
  audit: AuditLog;
}

/** The three process actions share one declaration; restart is gated (DESIGN.md), start and stop are reversible. */
const ACTIONS = [
  {
    action: 'start',
    summary:
      'Start a stdio server under the supervisor and wait until it is running; answers its process state (a fresh count of crashes).',
    tier: 'autonomousWrite',
  },
  {
    action: 'stop',
    summary:
      'Stop a stdio server: SIGTERM to its process group, SIGKILL after the grace period; cancels a pending restart.',
    tier: 'autonomousWrite',
  },
  {
    action: 'restart',
    summary: 'Stop then start a stdio server (its whole process group), waiting until it is running again.',
    tier: 'gated',
  },
] as const;

export function processRoutes({ supervisor, audit }: ProcessRouteDeps): RouteDeclaration[] {
  const act = async (
    action: 'start' | 'stop' | 'restart',
    id: string,
    principal: Principal | undefined,
  ): Promise<{ process: ProcessView }> => {
    try {
      const view = await supervisor[action](id);
      await audit.recordAdmin({ action: `server.${action}`, actor: principal, serverId: id, data: { ok: true } });
      return { process: view };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      await audit
        .recordAdmin({ action: `server.${action}`, actor: principal, serverId: id, data: { ok: false, code } })
        .catch(() => {});
      throw error;
    }
  };
  return [
    ...ACTIONS.map(({ action, summary, tier }) =>
      defineRoute({
        method: 'POST',
        url: `/api/mcp/servers/:id/${action}`,
        summary,
        scope: 'servers',
        access: MANAGERS,
        mcp: { tool: `mcp_server_${action}`, tier },
        params: idParams,
        handler: ({ params, principal }) => act(action, params.id, principal),
      }),
    ),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers/:id/process',
      summary: "A stdio server's process: state, pid, start time, crashes in a row, last error, next restart.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_process', tier: 'autonomousRead' },
      params: idParams,
      handler: async ({ params }) => ({ process: await supervisor.describe(params.id) }),
    }),
  ];
}
