/**
 * A Streamable HTTP MCP endpoint of Gatehouse's own surfaces (`/mcp`,
 * `/mcp/s/{server}`, `/mcp/t/{toolset}`, `/mcp/admin`), both protocol eras. Per request:
 * transport hygiene (Origin, Host), identity (an agent token, or the `local`
 * client when hub auth is off), the surface's settings gate (404 while off),
 * then the era: 2026-07-28 requests go to the SDK's stateless handler (any
 * process can answer), 2025-era ones to sessions bound to the token and scope
 * that opened them.
 */

import { createHash } from 'node:crypto';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { AuthInfo, Server, ServerEventBus } from '@modelcontextprotocol/server';
import { createMcpHandler, isLegacyRequest } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Cancellation, Canceller } from '../cancellation.js';
import { isLoopbackHost } from '../config.js';
import { GatehouseError } from '../errors.js';
import { credentialKeysOf } from '../identity/ended-access.js';
import type { TokenPrincipal } from '../identity/index.js';
import type { Store } from '../store/db.js';
import { agentContext, withContext } from '../telemetry/tracing.js';
import { LOOPBACK_HOSTNAMES, originAllowed } from './cors.js';
import { LegacySessions, type SessionView } from './sessions.js';
import { type SharedSessionRow, SharedSessionStore } from './shared-sessions.js';

/** The unauthenticated caller when `GATEHOUSE_HUB_AUTH=none` (loopback only). */
export const LOCAL_PRINCIPAL: TokenPrincipal = {
  id: 'local',
  name: 'local',
  role: 'agent',
  groups: ['default'],
  rateLimit: null,
  maxConcurrent: null,
  maxSessions: null,
};

/**
 * What part of a surface a request addresses: the whole surface, one upstream server unprefixed, or a
 * toolset (a curated set of tools from several servers, aggregated names).
 */
export type EndpointScope =
  | { kind: 'aggregate' }
  | { kind: 'single'; serverId: string }
  | { kind: 'toolset'; toolset: string };

export interface McpEndpointOptions {
  host: string;
  hubAuth: 'token' | 'none';
  allowedOrigins: readonly string[];
  allowedHosts: readonly string[];
  maxBodySize: number;
  /** The surface's settings gate, read per request: a refusal (e.g. 404 while switched off), or nothing. */
  gate(): Promise<GatehouseError | undefined>;
  /** Whether the caller may address this scope at all (a server outside its groups is 404). */
  scopeVisible?(scope: EndpointScope, principal: TokenPrincipal): Promise<boolean>;
  buildServer(principal: TokenPrincipal, scope: EndpointScope): Server;
  /**
   * Serves some requests without the SDK, with the same answers (the hub's plain `tools/call` and
   * `tools/list`): the request's JSON-RPC id and a function producing the JSON bytes of its response,
   * or undefined when the SDK serves the request. `session` is the live 2025-era session the request
   * names, if its token opened it.
   */
  fastPath?(
    request: FastifyRequest,
    principal: TokenPrincipal,
    scope: EndpointScope,
    session: SessionView | undefined,
  ): FastAnswer | undefined;
  /**
   * Checks a request against what only this surface knows before either path serves it (the hub: the
   * `Mcp-Param-*` headers of a 2026-07-28 `tools/call` against the named tool's schema): the JSON-RPC
   * error body and HTTP status to answer with, or undefined to go on.
   */
  precheck?(
    request: FastifyRequest,
    principal: TokenPrincipal,
    scope: EndpointScope,
  ): Promise<{ status: number; body: unknown } | undefined>;
  sessionIdleMs?: number;
  /** The backstop over every token's 2025-era sessions (default 10,000). */
  maxSessions?: number;
  /**
   * Admits the opening of a 2025-era session by `principal`: counts it against the token's rate limit
   * (throws `rate_limited`) and answers its session cap (the token's `maxSessions`, else
   * `hub.maxSessionsPerToken`). Without it, a cap of 100 and no rate check.
   */
  admitSession?(principal: TokenPrincipal): Promise<{ maxPerToken: number }>;
  /** Told of every session closed to make room for another of the same token. */
  onSessionEvicted?(): void;
  /** On a fleet: an agent unsubscribed on another replica from `uri`, which it may have subscribed to here. */
  onUnsubscribedElsewhere?(server: Server, uri: string): void;
  /**
   * The store and this surface's name in it: on PostgreSQL, 2025-era sessions live there, so any
   * replica serves any session (`shared-sessions.ts`). On SQLite (one process) they stay in memory.
   */
  sessionStore?: { store: Store; surface: string };
  /** The stateless era's own `subscriptions/listen` streams, when this surface scopes what they receive (the hub). */
  listens?: ListenStreams;
  /** The keep-alive interval of a fast call's answer in a 2025-era session (the SDK's 15 s; shorter in tests). */
  sseKeepAliveMs?: number;
}

/**
 * What a surface supplies for 2026-07-28 listen streams: the bus the SDK's handler takes its events from, the
 * most streams it keeps open, and `serve`, which every 2026-07-28 request the SDK serves passes through (so a
 * listen request can be prepared for its caller's grant, and its body narrowed, before `fetch` serves it).
 */
export interface ListenStreams {
  bus: ServerEventBus;
  maxStreams: number;
  serve(
    principal: TokenPrincipal,
    scope: EndpointScope,
    body: unknown,
    signal: AbortSignal,
    fetch: (body: unknown) => Promise<Response>,
  ): Promise<Response>;
}

export interface FastAnswer {
  id: string | number;
  serve(signal: Cancellation): Promise<FastResponse>;
}

/** A fast-path answer: the JSON-RPC response's bytes and the HTTP status a stateless request gets with it. */
export interface FastResponse {
  body: Buffer;
  status: number;
}

/** The SDK's keep-alive interval on a 2025-era response stream. */
const SSE_KEEP_ALIVE_MS = 15_000;

interface Grant {
  principal: TokenPrincipal;
  scope: EndpointScope;
}

/** A Host header as RFC 9110 allows it: a name or an IP literal, then an optional port; nothing else. */
const HOST_SYNTAX = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%!$&'()*+,;=-]+)(?::\d{1,5})?$/;

/** Host headers already parsed: a client sends the same one on every request, and a URL parse is most of the check. */
const hostnames = new Map<string, string>();
const MAX_REMEMBERED_HOSTS = 64;

function hostnameOf(hostHeader: string): string {
  let hostname = hostnames.get(hostHeader);
  if (hostname !== undefined) return hostname;
  try {
    hostname = new URL(`http://${hostHeader}`).hostname.toLowerCase();
  } catch {
    hostname = '';
  }
  // Bounded whatever hosts callers make up.
  if (hostnames.size >= MAX_REMEMBERED_HOSTS) hostnames.clear();
  hostnames.set(hostHeader, hostname);
  return hostname;
}

/** Where a browser may reach a Gatehouse surface from: the bind address and the operator's extra origins and hosts. */
export type TransportRule = Pick<McpEndpointOptions, 'host' | 'allowedOrigins' | 'allowedHosts'>;

/**
 * The browser-facing check of the MCP endpoints and the operations plane (`/ops/*`): a present, unlisted
 * `Origin` is 403 (exact match, so prefix tricks fail); on a loopback bind, a `Host` that is neither
 * loopback nor listed is 403 (DNS-rebinding defence), and a malformed one 400 (`bad_host`).
 */
export function checkTransport(request: FastifyRequest, rule: TransportRule, surface = 'the MCP endpoint'): void {
  const origin = request.headers.origin;
  if (origin !== undefined && !originAllowed(origin, rule.host, rule.allowedOrigins)) {
    throw new GatehouseError('forbidden', `This Origin may not use ${surface}.`);
  }
  const host = request.headers.host ?? '';
  // `evil.com@localhost` would parse as host `localhost`: userinfo, paths and the like are refused first.
  if (!HOST_SYNTAX.test(host)) throw new GatehouseError('bad_host');
  if (isLoopbackHost(rule.host)) {
    const hostname = hostnameOf(host);
    if (!LOOPBACK_HOSTNAMES.has(hostname) && !rule.allowedHosts.includes(hostname)) {
      throw new GatehouseError('forbidden', `This Host may not use ${surface} (DNS-rebinding defence).`);
    }
  }
}

export class McpEndpoint {
  readonly sessions: LegacySessions;
  private readonly modern;
  private readonly node;

  private readonly sharedSessions: SharedSessionStore | undefined;
  /**
   * Open streams (2026-07-28 `subscriptions/listen`, a 2025-era session's GET stream), each with what ends it,
   * under every key that ends it: the principal's id, and an OAuth access token's own id and family
   * (`credentialKeysOf`).
   */
  private readonly openStreams = new Map<string, Set<() => void>>();

  constructor(private readonly options: McpEndpointOptions) {
    const idleMs = options.sessionIdleMs ?? 30 * 60_000;
    const { sessionStore } = options;
    this.sharedSessions =
      sessionStore?.store.kind === 'postgres' ? new SharedSessionStore(sessionStore.store, idleMs) : undefined;
    this.sessions = new LegacySessions({
      idleMs,
      maxSessions: options.maxSessions ?? 10_000,
      maxRequestBodySize: options.maxBodySize,
      onEvicted: () => options.onSessionEvicted?.(),
      onUnsubscribedElsewhere: (server, uri) => options.onUnsubscribedElsewhere?.(server, uri),
      ...(this.sharedSessions && sessionStore
        ? {
            shared: {
              store: this.sharedSessions,
              surface: sessionStore.surface,
              // Only a surface that relays resource subscriptions (the hub) has any to take over.
              ...(options.onUnsubscribedElsewhere && {
                rebuild: (row: SharedSessionRow) => {
                  const scope = scopeOfOwner(row.owner, row.tokenId);
                  const principal = row.principal as TokenPrincipal | null;
                  if (!scope || principal?.id !== row.tokenId) return undefined;
                  return () => options.buildServer(principal, scope);
                },
              }),
            },
          }
        : {}),
    });
    this.modern = createMcpHandler(
      (ctx) => {
        const grant = ctx.authInfo?.extra?.grant as Grant | undefined;
        if (!grant) throw new GatehouseError('unauthorized');
        return options.buildServer(grant.principal, grant.scope);
      },
      {
        legacy: 'reject',
        maxRequestBodySize: options.maxBodySize,
        ...(options.listens && { bus: options.listens.bus, maxSubscriptions: options.listens.maxStreams }),
      },
    );
    // One fetch-shaped face for both eras; the Node adapter writes the Response (SSE included) back.
    this.node = toNodeHandler(
      {
        fetch: async (request, handlerOptions) => {
          const authInfo = handlerOptions?.authInfo as AuthInfo;
          const grant = authInfo.extra?.grant as Grant;
          const parsedBody = handlerOptions?.parsedBody;
          if (await isLegacyRequest(request, parsedBody, { maxRequestBodySize: options.maxBodySize })) {
            const owner = ownerOf(grant.principal, grant.scope);
            const answer = this.sessions.handle(
              request,
              { authInfo, parsedBody },
              owner,
              () => options.buildServer(grant.principal, grant.scope),
              {
                tokenId: grant.principal.id,
                principal: grant.principal,
                admit: async () =>
                  options.admitSession
                    ? options.admitSession(grant.principal)
                    : { maxPerToken: grant.principal.maxSessions ?? 100 },
              },
            );
            // The session's GET stream ends with the credential that opened it (the session may go on with another).
            return request.method === 'GET' ? this.tracked(grant.principal, await answer) : answer;
          }
          const modern = (body: unknown) =>
            this.modern.fetch(request, { authInfo, ...(body !== undefined ? { parsedBody: body } : {}) });
          const { listens } = options;
          const answer = listens
            ? listens.serve(grant.principal, grant.scope, parsedBody, request.signal, modern)
            : modern(parsedBody);
          return methodOf(parsedBody) === 'subscriptions/listen' ? this.tracked(grant.principal, await answer) : answer;
        },
      },
      { maxRequestBodySize: options.maxBodySize },
    );
  }

  /** Serves `url` on GET, POST and DELETE; `scopeOf` reads the scope from the request (its params). */
  route(app: FastifyInstance, url: string, scopeOf: (request: FastifyRequest) => EndpointScope): void {
    app.route({
      method: ['GET', 'POST', 'DELETE'],
      url,
      config: { mcpEndpoint: true },
      // The agent's trace context (header or `_meta`) is the parent of what this request does (tracing on).
      handler: (request: FastifyRequest, reply: FastifyReply) =>
        withContext(agentContext(request.headers, request.body), () => this.serve(request, reply, scopeOf)),
    });
  }

  private async serve(
    request: FastifyRequest,
    reply: FastifyReply,
    scopeOf: (request: FastifyRequest) => EndpointScope,
  ) {
    checkTransport(request, this.options);
    // JSON-RPC batching was removed in 2025-06-18 (the revision that also introduced this header).
    const version = request.headers['mcp-protocol-version'];
    if (Array.isArray(request.body) && typeof version === 'string' && version >= '2025-06-18') {
      return reply.code(400).send({
        jsonrpc: '2.0',
        error: { code: -32600, message: `JSON-RPC batches are not allowed in protocol version ${version}.` },
        id: null,
      });
    }
    const refused = await this.options.gate();
    if (refused) throw refused;
    const principal = this.principalOf(request);
    const scope = scopeOf(request);
    if (this.options.scopeVisible && !(await this.options.scopeVisible(scope, principal))) {
      throw new GatehouseError('not_found', 'No such MCP endpoint.');
    }
    const rejected = await this.options.precheck?.(request, principal, scope);
    if (rejected) return reply.code(rejected.status).header('content-type', 'application/json').send(rejected.body);
    if (this.options.fastPath) {
      const sessionId = request.headers['mcp-session-id'];
      const session =
        typeof sessionId === 'string'
          ? await this.sessions.find(sessionId, ownerOf(principal, scope), () =>
              this.options.buildServer(principal, scope),
            )
          : undefined;
      // A 2025 agent cancels by notification: one for a fast call reaches it here (the SDK sees it too).
      if (session) cancelledFastCall(session, request.body)?.abort();
      const fast = this.options.fastPath(request, principal, scope, session);
      if (fast) return session ? this.serveFastInSession(reply, session, fast) : this.serveFast(reply, fast);
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
  }

  /** Answers a fast-path request with its JSON-RPC response, as the SDK's per-request transport would. */
  private async serveFast(reply: FastifyReply, fast: FastAnswer) {
    const abandoned = abandonedWith(reply);
    const answer = await fast.serve(abandoned);
    // Bytes, so the content type goes out as the SDK sends it (no charset parameter added).
    return reply.code(answer.status).header('content-type', 'application/json').send(answer.body);
  }

  /**
   * Answers a fast-path request inside a 2025-era session. An answer ready within the SDK's keep-alive
   * interval goes out as one JSON response (`application/json`, which every 2025 client accepts and the
   * fast path only takes requests whose Accept names): the agent reads it without an event-stream parser.
   * A call still running at the first keep-alive becomes what the SDK's session transport sends: an event
   * stream, kept alive with comments, then one event carrying the response.
   */
  private async serveFastInSession(reply: FastifyReply, session: SessionView, fast: FastAnswer) {
    reply.hijack();
    const res = reply.raw;
    let streaming = false;
    const openStream = () => {
      if (!streaming) res.writeHead(200, { ...SSE_HEADERS, 'mcp-session-id': session.id });
      streaming = true;
    };
    const abandoned = abandonedWith(reply);
    const keepAlive = setInterval(() => {
      openStream();
      res.write(': keepalive\n\n');
    }, this.options.sseKeepAliveMs ?? SSE_KEEP_ALIVE_MS);
    session.fastCalls.set(fast.id, abandoned);
    try {
      const answer = await fast.serve(abandoned);
      // A cancelled request gets no answer (the SDK sends none); its stream just ends.
      if (abandoned.aborted) {
        openStream();
        res.end();
      } else if (streaming) res.end(Buffer.concat([SSE_EVENT_OPENING, answer.body, SSE_EVENT_CLOSING]));
      else {
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': answer.body.length,
          'mcp-session-id': session.id,
        });
        res.end(answer.body);
      }
    } finally {
      clearInterval(keepAlive);
      if (session.fastCalls.get(fast.id) === abandoned) session.fastCalls.delete(fast.id);
    }
  }

  /**
   * Ends everything a principal (a token, an OAuth grant, a person: `identity/ended-access.ts`) holds open here
   * once it has lost access: its 2025-era sessions and their streams, and its 2026-07-28 listen streams. Its
   * next request is refused anyway; this stops what it would still be told. `key` may also name one OAuth
   * access token or refresh family (`credentialKeysOf`): then the streams opened with it end, and the grant's
   * sessions, which its other tokens may carry on, stay.
   */
  async endAccessOf(key: string): Promise<void> {
    for (const end of [...(this.openStreams.get(key) ?? [])]) end();
    await this.sessions.endAccessOf(key);
  }

  /** A stream's response, tracked under its credential's keys until it ends (`endAccessOf` ends it early). */
  private tracked(principal: TokenPrincipal, response: Response): Response {
    const source = response.body;
    if (!source || !response.headers.get('content-type')?.startsWith('text/event-stream')) return response;
    const reader = source.getReader();
    const keys = credentialKeysOf(principal);
    const untrack = () => {
      for (const key of keys) {
        const streams = this.openStreams.get(key);
        streams?.delete(end);
        if (streams?.size === 0) this.openStreams.delete(key);
      }
    };
    // Cancelling the SDK's stream runs its teardown (the upstream subscriptions go) and ends the pending read.
    const end = () => {
      untrack();
      void reader.cancel(new GatehouseError('unauthorized', 'Access was revoked.')).catch(() => {});
    };
    for (const key of keys) {
      let streams = this.openStreams.get(key);
      if (!streams) {
        streams = new Set();
        this.openStreams.set(key, streams);
      }
      streams.add(end);
    }
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        // An empty first chunk sends the headers now: a quiet stream (a 2025 GET stream before its first event)
        // would otherwise look unanswered to the agent until the first keep-alive, 15 s on.
        controller.enqueue(new Uint8Array(0));
      },
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            untrack();
            controller.close();
          } else controller.enqueue(value);
        } catch (error) {
          untrack();
          controller.error(error);
        }
      },
      cancel(reason) {
        untrack();
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  }

  /** A 2025-era session's server accepted a resource subscription (on a fleet, recorded for takeover). */
  subscribed(server: Server, uri: string): void {
    this.sessions.subscribed(server, uri);
  }

  /** Tells one token's agents that their tool list changed (its 2025 sessions; the stateless era's listeners). */
  notifyToolsChangedFor(tokenId: string): void {
    this.modern.notify.toolsChanged();
    this.sessions.notifyToolsChangedFor(tokenId);
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
    this.sharedSessions?.close();
  }

  private principalOf(request: FastifyRequest): TokenPrincipal {
    const principal = request.principal as TokenPrincipal | undefined;
    if (!principal) {
      if (this.options.hubAuth === 'none' && request.headers.authorization === undefined) return LOCAL_PRINCIPAL;
      throw new GatehouseError('unauthorized');
    }
    if (principal.role !== 'agent') throw new GatehouseError('forbidden', 'MCP surfaces serve agent tokens.');
    return principal;
  }
}

const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
} as const;
const SSE_EVENT_OPENING = Buffer.from('event: message\ndata: ');
const SSE_EVENT_CLOSING = Buffer.from('\n\n');

/** The JSON-RPC method of a parsed request body, if it is one request. */
function methodOf(body: unknown): unknown {
  return body !== null && typeof body === 'object' && !Array.isArray(body)
    ? (body as { method?: unknown }).method
    : undefined;
}

/** Whose a 2025-era session is: the token and the scope that opened it. */
/**
 * Who a 2025-era session belongs to: the principal, the endpoint's scope, and a fingerprint of what the
 * principal sees (its groups and tool view). The session's server was built with the principal of its
 * `initialize`; once the principal's view changes — a token's groups, a member losing a group, a person's
 * OAuth grant narrowed — the session is no longer its owner's on any path or replica ("Session not found"),
 * and the agent initializes again with the view it has now.
 */
function ownerOf(principal: TokenPrincipal, scope: EndpointScope): string {
  const where = scope.kind === 'toolset' ? `t:${scope.toolset}` : scope.kind === 'single' ? scope.serverId : '*';
  return `${principal.id}|${where}|v:${viewOf(principal)}`;
}

/** Per principal object (the authenticators cache theirs, so a hot 2025 session hashes once per change). */
const views = new WeakMap<TokenPrincipal, string>();

function viewOf(principal: TokenPrincipal): string {
  let view = views.get(principal);
  if (view === undefined) {
    view = createHash('sha256')
      .update(JSON.stringify([[...principal.groups].sort(), principal.toolView ?? null]))
      .digest('base64url')
      .slice(0, 16);
    views.set(principal, view);
  }
  return view;
}

/** The scope `ownerOf` wrote into a session's owner, read back (a stored session rebuilt without a request). */
function scopeOfOwner(owner: string, principalId: string): EndpointScope | undefined {
  if (!owner.startsWith(`${principalId}|`)) return undefined;
  const rest = owner.slice(principalId.length + 1).replace(/\|v:[^|]*$/, '');
  if (rest === '*') return { kind: 'aggregate' };
  if (rest.startsWith('t:')) return { kind: 'toolset', toolset: rest.slice(2) };
  return rest === '' ? undefined : { kind: 'single', serverId: rest };
}

/**
 * Aborted when the agent goes away before its answer: the call is cancelled, as the SDK's transports do. A
 * `Canceller`, so a fast call that nobody abandons makes no AbortSignal (`../cancellation.ts`).
 */
function abandonedWith(reply: FastifyReply): Canceller {
  const abandoned = new Canceller();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) abandoned.abort();
  });
  return abandoned;
}

/** The fast call a `notifications/cancelled` body names in this session, if one is running. */
function cancelledFastCall(session: SessionView, body: unknown): Canceller | undefined {
  if (session.fastCalls.size === 0 || body === null || typeof body !== 'object' || Array.isArray(body))
    return undefined;
  const { method, params } = body as { method?: unknown; params?: { requestId?: unknown } };
  if (method !== 'notifications/cancelled' || params === null || typeof params !== 'object') return undefined;
  const id = params.requestId;
  return typeof id === 'string' || typeof id === 'number' ? session.fastCalls.get(id) : undefined;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** An MCP endpoint (not a REST route): the admin surface leaves it out. */
    mcpEndpoint?: boolean;
  }
}
