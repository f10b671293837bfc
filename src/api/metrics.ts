/** `GET /metrics`: Prometheus text exposition (admin token). */
import type { Metrics } from '../metrics/index.js';
import { defineRoute, type RouteDeclaration } from './route.js';

export function metricsRoutes(deps: { metrics: Metrics }): RouteDeclaration[] {
  const { metrics } = deps;
  return [
    defineRoute({
      method: 'GET',
      url: '/metrics',
      summary: 'Prometheus metrics: tool calls by verdict and outcome, latency per server, pool, approvals, process.',
      scope: 'system',
      access: ['admin'],
      mcp: { exclude: 'Prometheus text for a scraper, not a tool result; audit_list answers the same questions' },
      async handler({ reply }) {
        const text = await metrics.text();
        reply.header('cache-control', 'no-store');
        reply.type(metrics.contentType);
        return text;
      },
    }),
  ];
}
