/**
 * `/mcp` and `/mcp/s/{server}`: the hub's Streamable HTTP endpoints, both
 * protocol eras. Per request: transport hygiene (Origin, Host), identity
 * (agent token, or the `local` client when hub auth is off), the settings gate
 * (404 while the hub is off), then the era: 2026-07-28 requests go to the SDK's
 * stateless handler (any process can answer), 2025-era ones to sessions bound
 * to the token that opened them.
 */

import { toNodeHandler } from '@modelcontextprotocol/node';
import type { AuthInfo, Server } from '@modelcontextprotocol/server';
import { createMcpHandler, isLegacyRequest } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TokenPrincipal } from '../../api/token-auth.js';
import { isLoopbackHost } from '../../config.js';
import { GatehouseError } from '../../errors.js';
import type { SettingsService } from '../../settings/service.js';
import type { CallScope } from './calls.js';
import { LegacySessions } from './sessions.js';

/** The unauthenticated caller when `GATEHOUSE_HUB_AUTH=none` (loopback only). */
export const LOCAL_PRINCIPAL: TokenPrincipal = {
  id: 'local',
  name: 'local',
  role: 'agent',
  groups: ['default'],
  rateLimit: null,
  maxConcurrent: null,
};

const LOOPBACK_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

export interface HubEndpointOptions {
  host: string;
  hubAuth: 'token' | 'none';
  allowedOrigins: readonly string[];
  allowedHosts: readonly string[];
  maxBodySize: number;
  settings: SettingsService;
  /** Whether the caller may see this server at all (for `/mcp/s/{server}`). */
  serverVisible(serverId: string, principal: TokenPrincipal): Promise<boolean>;
  buildServer(principal: TokenPrincipal, scope: CallScope): Server;
  sessionIdleMs?: number;
  maxSessions?: number;
}

interface Grant {
  principal: TokenPrincipal;
  scope: CallScope;
}

function hostnameOf(hostHeader: string): string {
  try {
    return new URL(`http://${hostHeader}`).hostname.toLowerCase();
  } catch {
    return '';
  }
}

export class HubEndpoint {
  readonly sessions: LegacySessions;
  private readonly modern;
  private readonly node;

  constructor(private readonly options: HubEndpointOptions) {
    this.sessions = new LegacySessions({
      idleMs: options.sessionIdleMs ?? 30 * 60_000,
      maxSessions: options.maxSessions ?? 10_000,
      maxRequestBodySize: options.maxBodySize,
    });
    this.modern = createMcpHandler(
      (ctx) => {
        const grant = ctx.authInfo?.extra?.grant as Grant | undefined;
        if (!grant) throw new GatehouseError('unauthorized');
        return options.buildServer(grant.principal, grant.scope);
      },
      { legacy: 'reject', maxRequestBodySize: options.maxBodySize },
    );
    // One fetch-shaped face for both eras; the Node adapter writes the Response (SSE included) back.
    this.node = toNodeHandler(
      {
        fetch: async (request, handlerOptions) => {
          const authInfo = handlerOptions?.authInfo as AuthInfo;
          const grant = authInfo.extra?.grant as Grant;
          const parsedBody = handlerOptions?.parsedBody;
          if (await isLegacyRequest(request, parsedBody, { maxRequestBodySize: options.maxBodySize })) {
            const owner = `${grant.principal.id}|${grant.scope.kind === 'single' ? grant.scope.serverId : '*'}`;
            return this.sessions.handle(request, { authInfo, parsedBody }, owner, () =>
              options.buildServer(grant.principal, grant.scope),
            );
          }
          return this.modern.fetch(request, { authInfo, ...(parsedBody !== undefined ? { parsedBody } : {}) });
        },
      },
      { maxRequestBodySize: options.maxBodySize },
    );
  }

  register(app: FastifyInstance): void {
    const handler =
      (scopeOf: (request: FastifyRequest) => CallScope) => async (request: FastifyRequest, reply: FastifyReply) => {
        this.checkTransport(request);
        if (!(await this.options.settings.current())['mcp.hubEnabled']) throw new GatehouseError('hub.disabled');
        const principal = this.principalOf(request);
        const scope = scopeOf(request);
        if (scope.kind === 'single' && !(await this.options.serverVisible(scope.serverId, principal))) {
          throw new GatehouseError('not_found', 'No such MCP endpoint.');
        }
        const authInfo: AuthInfo = {
          token: principal.id, // an identifier, never the bearer itself
          clientId: principal.name,
          scopes: [],
          extra: { grant: { principal, scope } satisfies Grant },
        };
        reply.hijack();
        const raw = request.raw as typeof request.raw & { auth?: AuthInfo };
        raw.auth = authInfo;
        await this.node(raw, reply.raw, request.body);
      };
    const mcpRoute = { mcpEndpoint: true } as const;
    app.route({
      method: ['GET', 'POST', 'DELETE'],
      url: '/mcp',
      config: mcpRoute,
      handler: handler(() => ({ kind: 'aggregate' })),
    });
    app.route({
      method: ['GET', 'POST', 'DELETE'],
      url: '/mcp/s/:server',
      config: mcpRoute,
      handler: handler((request) => ({ kind: 'single', serverId: (request.params as { server: string }).server })),
    });
  }

  notifyListChanged(): void {
    this.modern.notify.toolsChanged();
    this.modern.notify.promptsChanged();
    this.modern.notify.resourcesChanged();
    this.sessions.notifyListChanged();
  }

  async close(): Promise<void> {
    await this.modern.close();
    await this.sessions.close();
  }

  /** Origin (a present, unlisted Origin is 403 — exact match, so prefix tricks fail) and Host on loopback. */
  private checkTransport(request: FastifyRequest): void {
    const loopback = isLoopbackHost(this.options.host);
    const origin = request.headers.origin;
    if (origin !== undefined) {
      let allowed = this.options.allowedOrigins.includes(origin);
      if (!allowed && loopback) {
        try {
          const parsed = new URL(origin);
          allowed =
            (parsed.protocol === 'http:' || parsed.protocol === 'https:') && LOOPBACK_HOSTNAMES.has(parsed.hostname);
        } catch {
          allowed = false;
        }
      }
      if (!allowed) throw new GatehouseError('forbidden', 'This Origin may not use the MCP endpoint.');
    }
    if (loopback) {
      const hostname = hostnameOf(request.headers.host ?? '');
      if (!LOOPBACK_HOSTNAMES.has(hostname) && !this.options.allowedHosts.includes(hostname)) {
        throw new GatehouseError('forbidden', 'This Host may not use the MCP endpoint (DNS-rebinding defence).');
      }
    }
  }

  private principalOf(request: FastifyRequest): TokenPrincipal {
    const principal = request.principal as TokenPrincipal | undefined;
    if (!principal) {
      if (this.options.hubAuth === 'none' && request.headers.authorization === undefined) return LOCAL_PRINCIPAL;
      throw new GatehouseError('unauthorized');
    }
    if (principal.role !== 'agent') throw new GatehouseError('forbidden', 'The hub serves agent tokens.');
    return principal;
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** An MCP endpoint (not a REST route): the admin surface leaves it out. */
    mcpEndpoint?: boolean;
  }
}
