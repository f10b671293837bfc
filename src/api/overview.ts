/** `GET /api/overview`: the dashboard's Overview page in one request, aggregated in SQL (see `overview/aggregate.ts`). */
import { z } from 'zod';
import { overview } from '../overview/aggregate.js';
import type { Store } from '../store/db.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const overviewQuery = z.strictObject({ window: z.enum(['hour', 'day']).default('hour') });

/** `settle` resolves once every call row this process answered is in the store (the audit's journal). */
export function overviewRoutes({ store, settle }: { store: Store; settle?: () => Promise<void> }): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/api/overview',
      summary:
        'Calls per minute by verdict and outcome over the last hour (or per 10 minutes over the last day), p50/p95 latency and errors per server, top tools, pending approvals, quarantined tools, servers by status.',
      scope: 'audit',
      access: ['admin', 'operator'],
      mcp: { tool: 'audit_overview', tier: 'autonomousRead' },
      query: overviewQuery,
      handler: async ({ query }) => {
        await settle?.();
        return overview(store.db, query.window);
      },
    }),
  ];
}
