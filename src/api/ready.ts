/** `GET /readyz`: 200 while this replica takes new work, 503 with the reason while it does not. */
import type { Readiness } from '../readiness.js';
import { defineRoute, type RouteDeclaration } from './route.js';

export function readyRoutes(readiness: Readiness): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/readyz',
      summary:
        'Readiness for a load balancer: 200 {"status":"ready"}; 503 {"status":"not_ready","reason":"starting"|"migrations"|"store"|"drain","message"} while starting, without its store, or draining for a shutdown.',
      scope: 'system',
      access: 'public',
      mcp: { exclude: 'replica readiness for load balancers; platform_health is the agent-facing view' },
      handler: async ({ reply }) => {
        const state = await readiness.check();
        if (state.ready) return { status: 'ready' };
        reply.header('cache-control', 'no-store');
        return reply.code(503).send({ status: 'not_ready', reason: state.reason, message: state.message });
      },
    }),
  ];
}
