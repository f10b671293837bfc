/** `/healthz` (public liveness) and `/info` (what this Gatehouse offers). */

import type { Role } from '../identity/index.js';
import { VERSION } from '../version.js';
import { defineRoute, type RouteDeclaration } from './route.js';

export type Capability = 'ops' | 'registry' | 'hub' | 'admin' | 'memory';

export interface InfoSource {
  operations: readonly string[];
  transports: readonly string[];
  /** Read per request: surfaces can be switched on and off while running. */
  capabilities(): readonly Capability[] | Promise<readonly Capability[]>;
  infoRoles: readonly Role[];
}

export function systemRoutes(source: InfoSource): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/healthz',
      summary: 'Liveness: answers while the process serves requests.',
      scope: 'system',
      access: 'public',
      mcp: { exclude: 'process liveness for load balancers; platform_health is the agent-facing view' },
      handler: () => ({ status: 'ok' }),
    }),
    defineRoute({
      method: 'GET',
      url: '/info',
      summary: 'Name, version, operations, transports and the surfaces that are on.',
      scope: 'system',
      access: source.infoRoles,
      mcp: { exclude: 'platform_version and platform_status carry the same facts for agents' },
      handler: async () => ({
        name: 'gatehouse',
        version: VERSION,
        operations: source.operations,
        transports: source.transports,
        capabilities: await source.capabilities(),
      }),
    }),
  ];
}
