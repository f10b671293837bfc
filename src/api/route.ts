/**
 * The one way a REST route is declared.
 *
 * A route states, where it is defined: its zod schemas, who may call it, its
 * scope, and either its admin-surface tool name and tier or its exclusion with
 * a reason. That declaration is the only source of truth: it is stored on the
 * Fastify route's `config`, so the admin surface can walk the live route table.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { type ValidationIssue, validationError } from '../errors.js';
import type { Principal, Role } from '../identity/index.js';
import { requirePrincipal } from './auth.js';

export type Scope =
  | 'servers'
  | 'approvals'
  | 'audit'
  | 'settings'
  | 'tokens'
  | 'platform'
  | 'ops'
  | 'system'
  | 'memory';
export type Tier = 'autonomousRead' | 'autonomousWrite' | 'gated';
export type McpDeclaration =
  | {
      tool: string;
      tier: Tier;
      /**
       * The tier of each body field, for a route whose fields differ in blast radius: a request is
       * taken at the highest tier among the route's and its fields' (one gated field gates it whole).
       * When given, every body field must be listed (the admin catalog refuses to build otherwise).
       */
      fields?: Readonly<Record<string, Tier>>;
      /** The read tool (same path arguments) whose answer is the "before" of an approval card's diff. */
      current?: string;
      /**
       * The body replaces the record whole (a PUT): a field left out is cleared. A gated field left out then gates
       * the call when the record (read through `current`) holds something in it — leaving it out removes it.
       */
      replaces?: boolean;
      /** The body as an approval card shows it: secrets masked. Default: the body as given. */
      shown?: (body: Record<string, unknown>) => Record<string, unknown>;
    }
  | { exclude: string };
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

type AnySchema = z.ZodType;
type Infer<S> = S extends AnySchema ? z.output<S> : undefined;

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** The authenticated caller, or undefined on a public route. */
  principal: Principal | undefined;
  request: FastifyRequest;
  reply: FastifyReply;
}

export interface RouteDeclaration<
  PS extends AnySchema | undefined = AnySchema | undefined,
  QS extends AnySchema | undefined = AnySchema | undefined,
  BS extends AnySchema | undefined = AnySchema | undefined,
> {
  method: HttpMethod;
  /** Fastify path, `:param` style (`/api/mcp/servers/:id`). */
  url: string;
  summary: string;
  scope: Scope;
  /** `'public'` or the roles that may call it. */
  access: 'public' | readonly Role[];
  mcp: McpDeclaration;
  params?: PS;
  query?: QS;
  body?: BS;
  /** HTTP status of a successful answer (default 200). */
  status?: number;
  /** For a `*` route: the admin-surface argument that carries it (a path of segments, e.g. `name`). */
  wildcard?: string;
  handler(ctx: RouteContext<Infer<PS>, Infer<QS>, Infer<BS>>): Promise<unknown> | unknown;
}

/** Typed identity helper: keeps the schema types flowing into the handler. */
export function defineRoute<
  PS extends AnySchema | undefined = undefined,
  QS extends AnySchema | undefined = undefined,
  BS extends AnySchema | undefined = undefined,
>(declaration: RouteDeclaration<PS, QS, BS>): RouteDeclaration {
  return declaration as unknown as RouteDeclaration;
}

function issuesOf(error: z.ZodError, prefix: string): ValidationIssue[] {
  return error.issues.map((issue) => ({
    path: [prefix, ...issue.path.map(String)].filter(Boolean).join('.'),
    message: issue.message,
  }));
}

function parsePart(schema: AnySchema | undefined, value: unknown, part: string): unknown {
  if (!schema) return undefined;
  const result = schema.safeParse(value ?? (part === 'body' ? undefined : {}));
  if (!result.success) throw validationError(issuesOf(result.error, part));
  return result.data;
}

/** Registers declared routes on a Fastify instance; the declaration rides along in `config.gatehouse`. */
export function registerRoutes(app: FastifyInstance, routes: readonly RouteDeclaration[]): void {
  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.url,
      config: { gatehouse: route },
      handler: async (request, reply) => {
        const principal = route.access === 'public' ? undefined : requirePrincipal(request, route.access, route.scope);
        const params = parsePart(route.params, request.params, 'params');
        const query = parsePart(route.query, request.query, 'query');
        const body = parsePart(route.body, request.body, 'body');
        const result = await route.handler({ params, query, body, principal, request, reply });
        if (reply.sent) return reply;
        reply.code(route.status ?? 200);
        return result;
      },
    });
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    gatehouse?: RouteDeclaration;
  }
}
