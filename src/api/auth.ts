/**
 * Who is calling. An `Authenticator` turns a request into a `Principal` (or
 * nothing); routes declare which roles they accept. The conduit has one shared
 * bearer; `gatehouse serve` looks tokens up in its store.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { GatehouseError } from '../errors.js';

export type Role = 'admin' | 'operator' | 'agent' | 'ops';

export interface Principal {
  id: string;
  name: string;
  role: Role;
  groups: readonly string[];
}

export type Authenticator = (request: FastifyRequest) => Principal | undefined | Promise<Principal | undefined>;

/** The bearer token of an `Authorization: Bearer <token>` header, if any. */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header);
  return match?.[1];
}

/** Compares two secrets in constant time (hashing first so lengths leak nothing either). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** The conduit's gate: one shared bearer, or open when none is configured (loopback only, checked at start). */
export function conduitAuthenticator(token: string | undefined): Authenticator {
  const anonymous: Principal = { id: 'conduit', name: 'conduit', role: 'ops', groups: [] };
  return (request) => {
    if (token === undefined) return anonymous;
    const given = bearerToken(request);
    return given !== undefined && safeEqual(given, token) ? anonymous : undefined;
  };
}

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
