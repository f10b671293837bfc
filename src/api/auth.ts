/**
 * Who may call a REST route: routes declare which roles they accept (the
 * principals themselves live in `src/identity/`).
 */
import type { FastifyRequest } from 'fastify';
import { GatehouseError } from '../errors.js';
import type { Principal, Role } from '../identity/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    /** Set when an MCP surface runs this request in-process for an agent (see grants.ts). */
    surfaceGrant?: import('./grants.js').SurfaceGrant;
  }
}

/**
 * Throws 401 without a principal, 403 when its role is not allowed. An agent passes only with a surface
 * grant for this route's scope: agent tokens reach REST routes through an MCP surface, never directly.
 */
export function requirePrincipal(request: FastifyRequest, roles: readonly Role[], scope?: string): Principal {
  const principal = request.principal;
  if (!principal) throw new GatehouseError('unauthorized');
  if (request.surfaceGrant && request.surfaceGrant.scope === scope) return principal;
  if (!roles.includes(principal.role)) throw new GatehouseError('forbidden');
  return principal;
}
