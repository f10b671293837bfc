/**
 * 2025-era sessions (initialize + `Mcp-Session-Id`). Each session is bound to
 * the token and scope that opened it: another token presenting that id gets
 * the same 404 as an id that never existed. Idle sessions are closed, and the
 * number of sessions is bounded per token (`hub.maxSessionsPerToken`, or the
 * token's own `maxSessions`) and in all (a backstop): a token at its cap loses
 * its own oldest session, never another token's; when the backstop is full a
 * token with no session to give up is refused (`session_limit`).
 */
import { randomUUID } from 'node:crypto';
import type { AuthInfo, Server } from '@modelcontextprotocol/server';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { ERROR_CATALOGUE, findGatehouseError, GatehouseError } from '../errors.js';

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  owner: string;
  /** The token that opened it: caps and evictions count per token. */
  tokenId: string;
  lastSeen: number;
  /** Requests of this session served outside the SDK (the hub's fast path), by JSON-RPC id. */
  fastCalls: Map<string | number, AbortController>;
}

/** What a fast path may know of a live session: its server (era, capabilities) and its fast calls. */
export interface SessionView {
  id: string;
  server: Server;
  fastCalls: Map<string | number, AbortController>;
}

export interface LegacySessionOptions {
  idleMs: number;
  /** The backstop over every token. */
  maxSessions: number;
  maxRequestBodySize: number;
  /** Told of every session closed to make room for another (counted on /metrics). */
  onEvicted?: (() => void) | undefined;
}

/** What opening a session needs to know of its token, asked only when an `initialize` opens one. */
export interface SessionAdmission {
  tokenId: string;
  /** Reads the token's cap and admits the opening against its rate limit (throws `rate_limited`). */
  admit(): Promise<{ maxPerToken: number }>;
}

/** A refusal as the JSON-RPC error answer of the `initialize` it refuses, with the catalogue's status. */
function refusal(error: GatehouseError): Response {
  return new Response(
    JSON.stringify({
      jsonrpc: '2.0',
      error: { code: -32000, message: error.message, data: error.toBody().error },
      id: null,
    }),
    { status: ERROR_CATALOGUE[error.code].status, headers: { 'content-type': 'application/json' } },
  );
}

function jsonRpcError(status: number, code: number, message: string): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), {
    status,
    headers: { 'content-type': 'application/json' },
  });
}

function isInitialize(body: unknown): boolean {
  return (
    typeof body === 'object' &&
    body !== null &&
    !Array.isArray(body) &&
    (body as { method?: unknown }).method === 'initialize'
  );
}

export class LegacySessions {
  private readonly sessions = new Map<string, Session>();
  /** Session ids by the token that opened them. */
  private readonly byToken = new Map<string, Set<string>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly options: LegacySessionOptions) {
    this.sweeper = setInterval(() => this.sweep(), Math.min(options.idleMs, 60_000));
    this.sweeper.unref();
  }

  get size(): number {
    return this.sessions.size;
  }

  /** The live session `sessionId` if `owner` opened it (it counts as activity), else undefined. */
  find(sessionId: string, owner: string): SessionView | undefined {
    const session = this.sessions.get(sessionId);
    if (!session || session.owner !== owner) return undefined;
    session.lastSeen = Date.now();
    return { id: sessionId, server: session.server, fastCalls: session.fastCalls };
  }

  /**
   * Serves one 2025-era request. `owner` identifies token and scope; `build` makes the session's
   * server when an `initialize` opens a session.
   */
  async handle(
    request: Request,
    options: { authInfo: AuthInfo; parsedBody: unknown },
    owner: string,
    build: () => Server,
    admission: SessionAdmission,
  ): Promise<Response> {
    const sessionId = request.headers.get('mcp-session-id');
    if (sessionId) {
      const session = this.sessions.get(sessionId);
      if (!session || session.owner !== owner) return jsonRpcError(404, -32001, 'Session not found');
      session.lastSeen = Date.now();
      return session.transport.handleRequest(request, options);
    }
    if (request.method !== 'POST' || !isInitialize(options.parsedBody)) {
      return jsonRpcError(400, -32000, 'Bad Request: No valid session ID provided');
    }
    let cap: { maxPerToken: number };
    try {
      cap = await admission.admit();
    } catch (error) {
      const typed = findGatehouseError(error);
      if (typed) return refusal(typed);
      throw error;
    }
    const mine = this.byToken.get(admission.tokenId)?.size ?? 0;
    if (mine >= cap.maxPerToken) this.evictOldestOf(admission.tokenId);
    else if (this.sessions.size >= this.options.maxSessions) {
      // The backstop: room is made only from this token's own sessions, never another's.
      if (mine === 0) {
        return refusal(
          new GatehouseError(
            'session_limit',
            `The gateway holds its maximum of ${this.options.maxSessions} sessions; retry later.`,
          ),
        );
      }
      this.evictOldestOf(admission.tokenId);
    }
    const server = build();
    // A session that ends (DELETE, idle, evicted, shutdown) cancels its calls, the fast ones too.
    const fastCalls = new Map<string | number, AbortController>();
    const cancelFastCalls = () => {
      for (const call of fastCalls.values()) call.abort();
      fastCalls.clear();
    };
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      maxRequestBodySize: this.options.maxRequestBodySize,
      onsessioninitialized: (id) => {
        this.sessions.set(id, {
          transport,
          server,
          owner,
          tokenId: admission.tokenId,
          lastSeen: Date.now(),
          fastCalls,
        });
        const ids = this.byToken.get(admission.tokenId) ?? new Set<string>();
        ids.add(id);
        this.byToken.set(admission.tokenId, ids);
      },
      onsessionclosed: (id) => {
        this.forget(id);
        cancelFastCalls();
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) this.forget(transport.sessionId);
      cancelFastCalls();
    };
    await server.connect(transport);
    return transport.handleRequest(request, options);
  }

  /** Tells every live session its lists changed. */
  notifyToolsChangedFor(tokenId: string): void {
    for (const id of this.byToken.get(tokenId) ?? []) {
      void this.sessions
        .get(id)
        ?.server.sendToolListChanged()
        .catch(() => {});
    }
  }

  notifyListChanged(): void {
    for (const { server } of this.sessions.values()) {
      void server.sendToolListChanged().catch(() => {});
      void server.sendPromptListChanged().catch(() => {});
      void server.sendResourceListChanged().catch(() => {});
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.sessions.values()];
    this.sessions.clear();
    this.byToken.clear();
    await Promise.all(all.map((s) => s.transport.close().catch(() => {})));
  }

  private sweep(): void {
    const cutoff = Date.now() - this.options.idleMs;
    for (const [id, session] of this.sessions) {
      if (session.lastSeen < cutoff) {
        this.forget(id);
        void session.transport.close().catch(() => {});
      }
    }
  }

  /** How many live sessions `tokenId` holds. */
  countOf(tokenId: string): number {
    return this.byToken.get(tokenId)?.size ?? 0;
  }

  private forget(id: string): void {
    const session = this.sessions.get(id);
    if (!session) return;
    this.sessions.delete(id);
    const ids = this.byToken.get(session.tokenId);
    ids?.delete(id);
    if (ids?.size === 0) this.byToken.delete(session.tokenId);
  }

  private evictOldestOf(tokenId: string): void {
    let oldest: [string, Session] | undefined;
    for (const id of this.byToken.get(tokenId) ?? []) {
      const session = this.sessions.get(id);
      if (session && (!oldest || session.lastSeen < oldest[1].lastSeen)) oldest = [id, session];
    }
    if (oldest) {
      this.forget(oldest[0]);
      void oldest[1].transport.close().catch(() => {});
      this.options.onEvicted?.();
    }
  }
}
