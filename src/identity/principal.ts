/**
 * Who is calling: a principal with a role, and the way a request names one.
 * Every layer (policy, approvals, audit, surfaces, REST) reads identity from
 * here; nothing below `src/api/` imports it from there.
 */
import type { FastifyRequest } from 'fastify';
import type { PrincipalUser } from './users.js';

/** `member`: a signed-in person who owns tokens and sees its own activity, but administers nothing. */
export type Role = 'admin' | 'operator' | 'agent' | 'ops' | 'member';

export interface Principal {
  /** The agent: a token's id (or a dashboard session's user id when no token is involved). */
  id: string;
  name: string;
  role: Role;
  groups: readonly string[];
  /** The person behind it: a token's owner, or the signed-in user of a dashboard session. */
  user?: PrincipalUser | undefined;
}

/** A principal read from a stored token: its own call limits ride along (null: the platform default). */
export interface TokenPrincipal extends Principal {
  rateLimit: number | null;
  maxConcurrent: number | null;
  /** Its own cap on live 2025-era sessions (null: `hub.maxSessionsPerToken`). */
  maxSessions?: number | null;
}

/** Turns a request into a principal (or nothing). */
export type Authenticator = (request: FastifyRequest) => Principal | undefined | Promise<Principal | undefined>;

/** The bearer token of an `Authorization: Bearer <token>` header, if any. */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header);
  return match?.[1];
}
