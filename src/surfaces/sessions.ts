/**
 * 2025-era sessions (initialize + `Mcp-Session-Id`). Each session is bound to
 * the token and scope that opened it: another token presenting that id gets
 * the same 404 as an id that never existed. Idle sessions are closed, and the
 * number of sessions is bounded per token (`hub.maxSessionsPerToken`, or the
 * token's own `maxSessions`) and in all (a backstop): a token at its cap loses
 * its own oldest session, never another token's; when the backstop is full a
 * token with no session to give up is refused (`session_limit`).
 *
 * On PostgreSQL (several replicas) the sessions live in the shared store (`shared-sessions.ts`): a
 * request naming a session this process does not hold rebuilds it on demand — a fresh server and
 * transport, its `initialize` (and log level) replayed into them — so any replica serves any session,
 * and one that dies loses none. Caps count there; the in-process copy is a cache checked for its owner
 * on every request, written back only when the expiry needs pushing or the log level changed.
 *
 * A resource subscription is relayed by the replica where the agent made it. Every few seconds each replica
 * takes over the subscriptions of replicas that died (`SharedSessionStore.takeOverOrphans`): it rebuilds the
 * session from its row (with the principal stored there, as no request of the agent is at hand) and replays
 * `resources/subscribe`, so the agent's updates go on.
 */
import { randomUUID } from 'node:crypto';
import type { AuthInfo, Server } from '@modelcontextprotocol/server';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import type { Canceller } from '../cancellation.js';
import { ERROR_CATALOGUE, findGatehouseError, GatehouseError } from '../errors.js';
import type { OrphanedSubscription, SessionMessage, SharedSessionRow, SharedSessionStore } from './shared-sessions.js';

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  owner: string;
  /** The token that opened it: caps and evictions count per token. */
  tokenId: string;
  lastSeen: number;
  /** When the shared row's expiry was last pushed forward (shared sessions only). */
  lastWritten: number;
  /** The log level the agent set, as the shared row knows it. */
  logLevel: string | null;
  /** Requests of this session served outside the SDK (the hub's fast path), by JSON-RPC id. */
  fastCalls: Map<string | number, Canceller>;
  /** Sends a resource update on this process's copy only (on a fleet, `server.sendResourceUpdated` tells the others too). */
  sendUpdatedHere(params: { uri: string }): Promise<void>;
  /**
   * On a fleet: the URIs whose subscriptions this replica relays, each with when it began (such a copy is kept
   * while its session lives).
   */
  relayed: Map<string, number>;
}

/** What a fast path may know of a live session: its server (era, capabilities) and its fast calls. */
export interface SessionView {
  id: string;
  server: Server;
  fastCalls: Map<string | number, Canceller>;
}

export interface LegacySessionOptions {
  idleMs: number;
  /** The backstop over every token. */
  maxSessions: number;
  maxRequestBodySize: number;
  /** Told of every session closed to make room for another (counted on /metrics). */
  onEvicted?: (() => void) | undefined;
  /** On a fleet: the agent unsubscribed on another replica from `uri`, which it may have subscribed to here. */
  onUnsubscribedElsewhere?: ((server: Server, uri: string) => void) | undefined;
  /** The shared store (PostgreSQL) and this surface's name in it; absent: sessions live in this process only. */
  shared?:
    | {
        store: SharedSessionStore;
        surface: string;
        /**
         * How to build a session's server from its row alone (its stored principal and scope), if it can be. Given
         * by a surface that relays resource subscriptions: it takes over those of replicas that died.
         */
        rebuild?: ((row: SharedSessionRow) => (() => Server) | undefined) | undefined;
      }
    | undefined;
}

/** What opening a session needs to know of its token, asked only when an `initialize` opens one. */
export interface SessionAdmission {
  tokenId: string;
  /** The principal opening it, stored with a shared session (JSON, no secret) so another replica can rebuild it. */
  principal?: unknown;
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

/** What `notifications/cancelled` names, if `body` is that notification. */
function cancelOf(body: unknown): { requestId: string | number; reason?: string } | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { method, params } = body as { method?: unknown; params?: { requestId?: unknown; reason?: unknown } };
  if (method !== 'notifications/cancelled' || typeof params !== 'object' || params === null) return undefined;
  const { requestId, reason } = params;
  if (typeof requestId !== 'string' && typeof requestId !== 'number') return undefined;
  return { requestId, ...(typeof reason === 'string' ? { reason } : {}) };
}

/** The URI of a `resources/unsubscribe` request, if `body` is one. */
function unsubscribedUri(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { method, params } = body as { method?: unknown; params?: { uri?: unknown } };
  if (method !== 'resources/unsubscribe' || typeof params !== 'object' || params === null) return undefined;
  return typeof params.uri === 'string' ? params.uri : undefined;
}

/** Whether a response body (JSON, or the SSE events of a session's POST) holds the result of request `id`. */
function answeredWithResult(text: string, id: unknown): boolean {
  const messages = text.trimStart().startsWith('{')
    ? [text]
    : text.split('\n').flatMap((line) => (line.startsWith('data:') ? [line.slice(5)] : []));
  return messages.some((json) => {
    try {
      const message = JSON.parse(json) as { id?: unknown; result?: unknown };
      return message.id === id && message.result !== undefined;
    } catch {
      return false;
    }
  });
}

/** A level `logging/setLevel` may set, if `body` is that request. */
function setLevelOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { method, params } = body as { method?: unknown; params?: { level?: unknown } };
  if (method !== 'logging/setLevel' || typeof params !== 'object' || params === null) return undefined;
  return typeof params.level === 'string' && LOG_LEVELS.has(params.level) ? params.level : undefined;
}

const LOG_LEVELS = new Set(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']);

/** How often a replica looks for the subscriptions of replicas that died (the README promises about 5 s). */
const TAKEOVER_EVERY_MS = 5_000;

/** The origin of the requests replayed into a rebuilt session (they never leave the process). */
const REPLAY_URL = 'http://gatehouse.invalid/mcp';
const REPLAY_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

export class LegacySessions {
  private readonly sessions = new Map<string, Session>();
  /** Session ids by the token that opened them. */
  private readonly byToken = new Map<string, Set<string>>();
  /** Rebuilds under way, so concurrent requests for one session rebuild it once. */
  private readonly restoring = new Map<string, Promise<Session | undefined>>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly takeover: NodeJS.Timeout | undefined;
  /** A takeover pass is running (passes do not overlap). */
  private takingOver = false;
  /** Session ids by their servers, so a subscription the server accepted is recorded under its session. */
  private readonly idOfServer = new WeakMap<Server, string>();
  private readonly shared: LegacySessionOptions['shared'];
  /** How often a live shared session's expiry is pushed forward (a quarter of the idle time). */
  private readonly touchEveryMs: number;
  private readonly unsubscribe: Array<() => void> = [];

  constructor(private readonly options: LegacySessionOptions) {
    this.shared = options.shared;
    this.touchEveryMs = Math.max(1, Math.floor(options.idleMs / 4));
    this.sweeper = setInterval(() => this.sweep(), Math.min(options.idleMs, 60_000));
    this.sweeper.unref();
    if (this.shared) {
      // Ended elsewhere (DELETE, evicted, expired): drop the copy held here, without ending it again.
      this.unsubscribe.push(this.shared.store.onClosed((id) => this.dropLocal(id)));
      this.unsubscribe.push(this.shared.store.onReconnect(() => void this.recheckAll()));
      // Work of a session this process serves, told by another replica (`shared-sessions.ts`, SessionMessage).
      this.unsubscribe.push(this.shared.store.onMessage((message) => this.fromOthers(message)));
      if (this.shared.rebuild) {
        this.takeover = setInterval(() => void this.takeOverOrphans(), TAKEOVER_EVERY_MS);
        this.takeover.unref();
      }
    }
  }

  get size(): number {
    return this.sessions.size;
  }

  /**
   * The live session `sessionId` if `owner` opened it (it counts as activity), else undefined. A
   * shared session this process does not hold is rebuilt with `build` (its token and scope's server).
   */
  async find(sessionId: string, owner: string, build: () => Server): Promise<SessionView | undefined> {
    const session = this.sessions.get(sessionId) ?? (await this.restore(sessionId, owner, build));
    if (!session || session.owner !== owner) return undefined;
    this.seen(sessionId, session);
    return { id: sessionId, server: session.server, fastCalls: session.fastCalls };
  }

  /**
   * Serves one 2025-era request. `owner` identifies token and scope; `build` makes the session's
   * server when an `initialize` opens a session (or a shared session is rebuilt here).
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
      const session = this.sessions.get(sessionId) ?? (await this.restore(sessionId, owner, build));
      if (!session || session.owner !== owner) return jsonRpcError(404, -32001, 'Session not found');
      this.seen(sessionId, session);
      const response = await session.transport.handleRequest(request, options);
      if (this.shared && response.ok) this.tellOthersOf(sessionId, options.parsedBody);
      const level = this.shared ? setLevelOf(options.parsedBody) : undefined;
      if (level !== undefined && level !== session.logLevel && response.ok) {
        session.logLevel = level;
        await this.shared?.store.setLogLevel(sessionId, level).catch(() => {});
      }
      return response;
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
    const id = randomUUID();
    if (this.shared) {
      const params = (options.parsedBody as { params?: unknown }).params;
      const admitted = await this.shared.store.admit(
        {
          id,
          surface: this.shared.surface,
          owner,
          tokenId: admission.tokenId,
          init: typeof params === 'object' && params !== null ? (params as Record<string, unknown>) : {},
          logLevel: null,
          principal: admission.principal ?? null,
        },
        cap.maxPerToken,
        this.options.maxSessions,
      );
      if (!admitted.ok) return this.backstopRefusal();
      for (const evicted of admitted.evicted) {
        this.dropLocal(evicted);
        this.options.onEvicted?.();
      }
    } else {
      const mine = this.byToken.get(admission.tokenId)?.size ?? 0;
      if (mine >= cap.maxPerToken) this.evictOldestOf(admission.tokenId);
      else if (this.sessions.size >= this.options.maxSessions) {
        // The backstop: room is made only from this token's own sessions, never another's.
        if (mine === 0) return this.backstopRefusal();
        this.evictOldestOf(admission.tokenId);
      }
    }
    const { transport } = await this.open(id, owner, admission.tokenId, build, null);
    const response = await transport.handleRequest(request, options);
    // An initialize the SDK refused opened nothing: its shared row goes too.
    if (!response.ok && this.shared && !this.sessions.has(id)) await this.shared.store.remove(id).catch(() => {});
    return response;
  }

  /**
   * Ends every session a principal opened once it has lost access (a token revoked, an OAuth grant revoked, a
   * person disabled): their streams close at once rather than when the agent next calls, and on a fleet their
   * shared rows go (each replica ends the copies it holds on the same event).
   */
  async endAccessOf(principalId: string): Promise<void> {
    for (const id of [...(this.byToken.get(principalId) ?? [])]) this.dropLocal(id);
    if (this.shared) await this.shared.store.removeSessionsOf(this.shared.surface, principalId);
  }

  /**
   * What the other replicas must know of a request served here (a balancer without affinity): the request an
   * agent cancels may run elsewhere, and so may the subscription it ends.
   */
  private tellOthersOf(sessionId: string, body: unknown): void {
    const shared = this.shared;
    if (!shared) return;
    const cancel = cancelOf(body);
    if (cancel) void shared.store.tellOthers({ kind: 'cancelled', sessionId, ...cancel }).catch(() => {});
    const uri = unsubscribedUri(body);
    if (uri !== undefined) {
      this.sessions.get(sessionId)?.relayed.delete(uri);
      void shared.store.forgetSubscription(sessionId, uri).catch(() => {});
      void shared.store.tellOthers({ kind: 'unsubscribed', sessionId, uri }).catch(() => {});
    }
  }

  /**
   * A session's server accepted a subscription (the agent's, or one replayed in a takeover): on a fleet this
   * replica now relays it, and another takes it over if this one dies.
   */
  subscribed(server: Server, uri: string): void {
    const id = this.idOfServer.get(server);
    const session = id === undefined ? undefined : this.sessions.get(id);
    if (!this.shared || id === undefined || !session) return;
    session.relayed.set(uri, Date.now());
    void this.shared.store.recordSubscription(id, uri).catch(() => {});
  }

  /**
   * Subscribes again, here, to what replicas that died relayed: each session rebuilt from its row (or the copy
   * held here), `resources/subscribe` replayed into it. One the session no longer allows (the resource gone, the
   * principal's access narrowed) or one of a session that cannot be rebuilt is forgotten.
   */
  private async takeOverOrphans(): Promise<void> {
    const shared = this.shared;
    if (!shared || this.takingOver) return;
    this.takingOver = true;
    try {
      await this.stopRelayingOthers(shared.store);
      const orphans = await shared.store.takeOverOrphans(shared.surface).catch((): OrphanedSubscription[] => []);
      const bySession = new Map<string, string[]>();
      for (const { sessionId, uri } of orphans) bySession.set(sessionId, [...(bySession.get(sessionId) ?? []), uri]);
      for (const [id, uris] of bySession) {
        const session = await this.rebuilt(id).catch(() => undefined);
        for (const [n, uri] of uris.entries()) {
          const accepted =
            session !== undefined &&
            (await this.replay(
              session.transport,
              { jsonrpc: '2.0', id: `gatehouse-takeover-${n}`, method: 'resources/subscribe', params: { uri } },
              id,
            ).catch(() => false));
          if (!accepted) await shared.store.forgetSubscription(id, uri).catch(() => {});
        }
      }
    } finally {
      this.takingOver = false;
    }
  }

  /**
   * Stops relaying here what another replica now relays: its row names another holder. That happens when this
   * replica's lock was lost for a moment (its connection dropped, so the others took it for dead and took its
   * rows over) or when the agent subscribed again on another replica; either way, relaying it twice would send
   * the agent every update twice. A subscription that began here since the last sweep is left alone: its row
   * may not be written yet.
   */
  private async stopRelayingOthers(store: SharedSessionStore): Promise<void> {
    const settled = Date.now() - TAKEOVER_EVERY_MS;
    const ids = [...this.sessions].filter(([, session]) => session.relayed.size > 0).map(([id]) => id);
    if (ids.length === 0) return;
    const elsewhere = await store.relayedElsewhere(ids).catch((): OrphanedSubscription[] => []);
    for (const { sessionId, uri } of elsewhere) {
      const session = this.sessions.get(sessionId);
      const since = session?.relayed.get(uri);
      if (!session || since === undefined || since > settled) continue;
      session.relayed.delete(uri);
      this.options.onUnsubscribedElsewhere?.(session.server, uri);
    }
  }

  /** Session `id` as held here, or rebuilt from its shared row alone. */
  private async rebuilt(id: string): Promise<Session | undefined> {
    const held = this.sessions.get(id);
    if (held) return held;
    const row = await this.shared?.store.get(id);
    const build = row && this.shared?.rebuild?.(row);
    return row && build ? this.restore(id, row.owner, build) : undefined;
  }

  /**
   * Another replica's word on a session this process holds. A cancelled fast call is aborted, and the SDK's
   * server handed the notification as if it had arrived here (it aborts its handler); neither knows a request
   * that does not run here. An update is sent on this copy (it reaches the agent if its GET stream is here).
   */
  private fromOthers(message: SessionMessage): void {
    const session = this.sessions.get(message.sessionId);
    if (!session) return;
    switch (message.kind) {
      case 'cancelled': {
        const { requestId, reason } = message;
        session.fastCalls.get(requestId)?.abort(reason);
        session.transport.onmessage?.({
          jsonrpc: '2.0',
          method: 'notifications/cancelled',
          params: { requestId, ...(reason !== undefined ? { reason } : {}) },
        });
        return;
      }
      case 'updated':
        void session.sendUpdatedHere({ uri: message.uri }).catch(() => {});
        return;
      case 'unsubscribed':
        session.relayed.delete(message.uri);
        this.options.onUnsubscribedElsewhere?.(session.server, message.uri);
        return;
    }
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
    clearInterval(this.takeover);
    for (const off of this.unsubscribe.splice(0)) off();
    const all = [...this.sessions.values()];
    this.sessions.clear();
    this.byToken.clear();
    // Closing this process's copies ends no shared session: another replica serves them next.
    await Promise.all(all.map((s) => s.transport.close().catch(() => {})));
  }

  /** How many live sessions `tokenId` holds in this process. */
  countOf(tokenId: string): number {
    return this.byToken.get(tokenId)?.size ?? 0;
  }

  /** How many live sessions `tokenId` holds: across the fleet when shared, else in this process. */
  async fleetCountOf(tokenId: string): Promise<number> {
    if (this.shared) return this.shared.store.countOf(this.shared.surface, tokenId);
    return this.countOf(tokenId);
  }

  private backstopRefusal(): Response {
    return refusal(
      new GatehouseError(
        'session_limit',
        `The gateway holds its maximum of ${this.options.maxSessions} sessions; retry later.`,
      ),
    );
  }

  /** Counts as activity; a shared session's expiry is pushed forward at most every `touchEveryMs`. */
  private seen(id: string, session: Session): void {
    const now = Date.now();
    session.lastSeen = now;
    if (this.shared && now - session.lastWritten >= this.touchEveryMs) {
      session.lastWritten = now;
      void this.shared.store.touch(id, now).catch(() => {});
    }
  }

  /**
   * A server and transport for session `id`. The transport hands out `id` at the `initialize` it
   * serves (the agent's, or the replayed one of a rebuild); the session is registered there.
   */
  private async open(
    id: string,
    owner: string,
    tokenId: string,
    build: () => Server,
    logLevel: string | null,
  ): Promise<{ transport: WebStandardStreamableHTTPServerTransport; server: Server }> {
    const server = build();
    this.idOfServer.set(server, id);
    const sendUpdatedHere = server.sendResourceUpdated.bind(server);
    const shared = this.shared;
    if (shared) {
      // The agent's GET stream may be on another replica: the update is sent there too (where it has no stream,
      // the SDK sends nothing).
      server.sendResourceUpdated = async (params) => {
        await sendUpdatedHere(params);
        await shared.store.tellOthers({ kind: 'updated', sessionId: id, uri: params.uri }).catch(() => {});
      };
    }
    // A session that ends (DELETE, idle, evicted, shutdown) cancels its calls, the fast ones too.
    const fastCalls = new Map<string | number, Canceller>();
    const cancelFastCalls = () => {
      for (const call of fastCalls.values()) call.abort();
      fastCalls.clear();
    };
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      maxRequestBodySize: this.options.maxRequestBodySize,
      onsessioninitialized: (sessionId) => {
        const now = Date.now();
        this.sessions.set(sessionId, {
          transport,
          server,
          owner,
          tokenId,
          lastSeen: now,
          lastWritten: now,
          logLevel,
          fastCalls,
          sendUpdatedHere,
          relayed: new Map(),
        });
        const ids = this.byToken.get(tokenId) ?? new Set<string>();
        ids.add(sessionId);
        this.byToken.set(tokenId, ids);
      },
      onsessionclosed: async (sessionId) => {
        // DELETE: the agent ended its session, everywhere.
        this.forget(sessionId);
        cancelFastCalls();
        await this.shared?.store.remove(sessionId).catch(() => {});
      },
    });
    transport.onclose = () => {
      if (transport.sessionId && this.sessions.get(transport.sessionId)?.transport === transport) {
        this.forget(transport.sessionId);
      }
      cancelFastCalls();
    };
    await server.connect(transport);
    return { transport, server };
  }

  /** Rebuilds shared session `id` here, if it lives in the store and `owner` opened it. */
  private restore(id: string, owner: string, build: () => Server): Promise<Session | undefined> {
    const shared = this.shared;
    if (!shared) return Promise.resolve(undefined);
    let pending = this.restoring.get(id);
    if (!pending) {
      pending = (async () => {
        const row = await shared.store.get(id);
        // Another token's (or another surface's) session is answered like one that never existed.
        if (!row || row.owner !== owner || row.surface !== shared.surface) return undefined;
        const { transport } = await this.open(id, owner, row.tokenId, build, row.logLevel);
        // The agent's own handshake, replayed: the SDK negotiates the same version and records the same
        // client capabilities and info as when the session opened. Its answer goes nowhere.
        await this.replay(transport, {
          jsonrpc: '2.0',
          id: 'gatehouse-restore',
          method: 'initialize',
          params: row.init,
        });
        if (row.logLevel !== null) {
          await this.replay(
            transport,
            {
              jsonrpc: '2.0',
              id: 'gatehouse-restore-level',
              method: 'logging/setLevel',
              params: { level: row.logLevel },
            },
            id,
          );
        }
        const session = this.sessions.get(id);
        if (session) session.lastWritten = Date.now();
        return session;
      })().finally(() => this.restoring.delete(id));
      this.restoring.set(id, pending);
    }
    return pending;
  }

  /** Serves `message` on `transport` as if the agent had sent it; whether the SDK answered with a result. */
  private async replay(
    transport: WebStandardStreamableHTTPServerTransport,
    message: Record<string, unknown>,
    sessionId?: string,
  ): Promise<boolean> {
    const headers: Record<string, string> = { ...REPLAY_HEADERS };
    if (sessionId) headers['mcp-session-id'] = sessionId;
    const response = await transport.handleRequest(new Request(REPLAY_URL, { method: 'POST', headers }), {
      parsedBody: message,
    });
    const text = await response.text().catch(() => '');
    return response.ok && answeredWithResult(text, message.id);
  }

  /** Drops this process's copy of a session ended elsewhere (or evicted here). */
  private dropLocal(id: string): void {
    const session = this.sessions.get(id);
    if (!session) return;
    this.forget(id);
    void session.transport.close().catch(() => {});
  }

  /** After the message channel was down: drops copies of sessions that ended meanwhile. */
  private async recheckAll(): Promise<void> {
    if (!this.shared) return;
    const gone = await this.shared.store.missing([...this.sessions.keys()]).catch(() => []);
    for (const id of gone) this.dropLocal(id);
  }

  private sweep(): void {
    const cutoff = Date.now() - this.options.idleMs;
    const relaying: string[] = [];
    for (const [id, session] of this.sessions) {
      if (session.lastSeen >= cutoff) continue;
      // Shared: an idle copy here may be a session another replica serves; only its row's expiry ends it. A copy
      // relaying subscriptions stays while its session lives (the agent may be busy on other replicas).
      if (this.shared && session.relayed.size > 0) relaying.push(id);
      else this.dropLocal(id);
    }
    const shared = this.shared;
    if (!shared) return;
    void (async () => {
      await shared.store.sweep().catch(() => 0);
      for (const id of await shared.store.missing(relaying).catch(() => [])) this.dropLocal(id);
    })();
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
      this.dropLocal(oldest[0]);
      this.options.onEvicted?.();
    }
  }
}
