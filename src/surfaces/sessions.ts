/**
 * 2025-era sessions (initialize + `Mcp-Session-Id`). Each session is bound to
 * the token and scope that opened it: another token presenting that id gets
 * the same 404 as an id that never existed. Idle sessions are closed, and the
 * number of sessions is bounded.
 */
import { randomUUID } from 'node:crypto';
import type { AuthInfo, Server } from '@modelcontextprotocol/server';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  owner: string;
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
  maxSessions: number;
  maxRequestBodySize: number;
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
    if (this.sessions.size >= this.options.maxSessions) this.evictOldest();
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
        this.sessions.set(id, { transport, server, owner, lastSeen: Date.now(), fastCalls });
      },
      onsessionclosed: (id) => {
        this.sessions.delete(id);
        cancelFastCalls();
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
      cancelFastCalls();
    };
    await server.connect(transport);
    return transport.handleRequest(request, options);
  }

  /** Tells every live session its lists changed. */
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
    await Promise.all(all.map((s) => s.transport.close().catch(() => {})));
  }

  private sweep(): void {
    const cutoff = Date.now() - this.options.idleMs;
    for (const [id, session] of this.sessions) {
      if (session.lastSeen < cutoff) {
        this.sessions.delete(id);
        void session.transport.close().catch(() => {});
      }
    }
  }

  private evictOldest(): void {
    let oldest: [string, Session] | undefined;
    for (const entry of this.sessions) if (!oldest || entry[1].lastSeen < oldest[1].lastSeen) oldest = entry;
    if (oldest) {
      this.sessions.delete(oldest[0]);
      void oldest[1].transport.close().catch(() => {});
    }
  }
}
