/**
 * `gatehouse serve`: the full gateway assembled from its parts — store,
 * sealing key, tokens, settings, audit, event stream, egress guards, upstream
 * pools, registry — behind one Fastify app. No listening here: the CLI
 * listens, tests inject or use port 0.
 */

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { approvalRoutes } from './api/approvals.js';
import { auditRoutes } from './api/audit.js';
import { catalogRoutes } from './api/catalog.js';
import { connectRoutes } from './api/connect.js';
import { SurfaceGrants } from './api/grants.js';
import { importRoutes } from './api/import.js';
import { memoryRoutes } from './api/memory.js';
import { metricsRoutes } from './api/metrics.js';
import { opsRoutes } from './api/ops.js';
import { overrideRoutes } from './api/overrides.js';
import { overviewRoutes } from './api/overview.js';
import { pinRoutes } from './api/pins.js';
import { platformRoutes } from './api/platform.js';
import { processRoutes } from './api/processes.js';
import { readyRoutes } from './api/ready.js';
import { secretsRoutes } from './api/secrets.js';
import { serverRoutes } from './api/servers.js';
import { settingsRoutes } from './api/settings.js';
import { signInRoutes } from './api/signin.js';
import { streamRoutes } from './api/stream.js';
import { type Capability, systemRoutes } from './api/system.js';
import { tokenRoutes } from './api/tokens.js';
import { toolsetRoutes } from './api/toolsets.js';
import { upstreamAuthRoutes } from './api/upstream-auth.js';
import { userRoutes } from './api/users.js';
import { buildApp } from './app.js';
import { ApprovalQueue } from './approvals/queue.js';
import { CallAuditor } from './audit/calls.js';
import { AuditJournal } from './audit/journal.js';
import { AuditLog } from './audit/log.js';
import { AuditRetention } from './audit/retention.js';
import { EventHub } from './audit/stream.js';
import { opsTransportCheck } from './conduit.js';
import { type Config, isLoopbackHost, publicBaseUrl } from './config.js';
import { createEgressFromConfig } from './egress/from-config.js';
import type { EgressGuard, Resolver } from './egress/index.js';
import { GatehouseError } from './errors.js';
import { principalsEndedBy } from './identity/ended-access.js';
import {
  combinedAuthenticator,
  eitherAuthenticator,
  type Principal,
  sessionAuthenticator,
  tokenAuthenticator,
} from './identity/index.js';
import { OidcClient } from './identity/oidc.js';
import { createLogger, type Logger } from './logging.js';
import { MemoryEngine } from './memory/engine.js';
import { LlmClient } from './memory/llm.js';
import { Metrics } from './metrics/index.js';
import { createOAuth } from './oauth/index.js';
import { ArgumentValidator } from './policy/arguments.js';
import { assertCommandAllowed } from './policy/commands.js';
import { FleetCallLimiter } from './policy/fleet-limits.js';
import { CallLimiter } from './policy/limits.js';
import { Readiness } from './readiness.js';
import { loadCatalog } from './registry/catalog.js';
import { endUnwantedConnections } from './registry/connection-janitor.js';
import { createHandshaker } from './registry/handshake.js';
import { ListWatchers, type ListWatchTimings } from './registry/list-watch.js';
import { type ServerOptions, ServerStore } from './registry/records.js';
import { Registry } from './registry/service.js';
import { StateProbe } from './registry/state.js';
import { loadSealKey } from './secrets/key.js';
import { SettingsService } from './settings/service.js';
import { openStore, type Store } from './store/db.js';
import { nowIso, parseJson } from './store/json.js';
import type { ServerTable } from './store/schema.js';
import { SessionStore } from './store/sessions.js';
import { TokenUsage } from './store/token-usage.js';
import { TokenStore } from './store/tokens.js';
import { UserStore } from './store/users.js';
import { SandboxPlanner } from './supervisor/sandbox-plan.js';
import { StdioSupervisor } from './supervisor/supervisor.js';
import { type AdminSurface, accessTo, createAdminSurface, mayUse } from './surfaces/admin/index.js';
import { corsHook } from './surfaces/cors.js';
import { createHub, type Hub } from './surfaces/hub/index.js';
import { createHubStateCodec } from './surfaces/hub/request-state.js';
import { ToolEmbeddings } from './surfaces/hub/search/embeddings.js';
import type { UpstreamAuthorizer } from './surfaces/hub/view.js';
import { createMemorySurface, type MemorySurface } from './surfaces/memory/index.js';
import { startTracing } from './telemetry/tracing.js';
import { UpstreamPool } from './upstream/index.js';
import { GrantStore } from './upstream-auth/grants.js';
import { UpstreamAuth } from './upstream-auth/service.js';
import { dashboardRoutes } from './web-serve.js';

const STDERR_LINES_PER_MINUTE = 120;

export interface GatewayDeps {
  logger?: Logger;
  /** Test seam: the egress guards' DNS resolver. */
  resolver?: Resolver;
  /** Test seam: the list watches' debounce, reconnect and ping intervals. */
  listWatchTimings?: Partial<ListWatchTimings>;
  /** Host paths no stdio child may see besides the data folder and the working directory (the config file). */
  hiddenPaths?: string[];
  /** Bench seam: false keeps the hub's 2025-era sessions in this process even on PostgreSQL (the shared store's cost). */
  sharedSessions?: boolean;
  /** Test seam: how long a hub call in a 2025-era session runs before its answer turns into a kept-alive stream (15 s). */
  sseKeepAliveMs?: number;
}

export interface Gateway {
  app: FastifyInstance;
  store: Store;
  registry: Registry;
  settings: SettingsService;
  tokens: TokenStore;
  events: EventHub;
  audit: AuditLog;
  approvals: ApprovalQueue;
  hub: Hub;
  admin: AdminSurface;
  /** The embedded memory engine behind `/mcp/memory` and `/api/memory/…`. */
  memory: MemoryEngine;
  /** The stdio process supervisor (one child per running stdio server). */
  supervisor: StdioSupervisor;
  /** The watches that keep servers' lists current (`GATEHOUSE_LIST_WATCH`). */
  listWatchers: ListWatchers;
  /** The admin token created by this start (first start only), to print once. */
  bootstrapToken: string | undefined;
  /** What `GET /readyz` answers. */
  readiness: Readiness;
  /**
   * The start of a graceful shutdown: not ready from now on (`/readyz` 503 `drain`), no new approved
   * call claimed here, list watches stopped and their locks released (another replica takes them
   * over). Calls in flight and open streams go on; `app.close()` ends the rest.
   */
  drain(): Promise<void>;
  /** Notes each token's use and writes `lastUsedAt` in batches. */
  tokenUsage: TokenUsage;
  /** People (issue 17) and their dashboard sessions. */
  users: UserStore;
  sessions: SessionStore;
  /** Gatehouse as an OAuth client of its upstreams (grants, connect, refresh). */
  upstreamAuth: UpstreamAuth;
}

/** The egress guards by policy: servers marked `privateNetwork` use the `private` one. */
class Guards {
  private readonly byPolicy = new Map<'public' | 'private', EgressGuard>();
  constructor(
    private readonly config: Config,
    private readonly resolver: Resolver | undefined,
  ) {}
  for(privateNetwork: boolean): EgressGuard {
    const policy = privateNetwork ? 'private' : 'public';
    let guard = this.byPolicy.get(policy);
    if (!guard) {
      guard = createEgressFromConfig(this.config, this.resolver, policy);
      this.byPolicy.set(policy, guard);
    }
    return guard;
  }
  async close(): Promise<void> {
    await Promise.all([...this.byPolicy.values()].map((g) => g.close()));
  }
}

export async function createGateway(config: Config, deps: GatewayDeps = {}): Promise<Gateway> {
  if (config.hubAuth === 'none' && !isLoopbackHost(config.host)) {
    throw new GatehouseError(
      'validation_error',
      `GATEHOUSE_HUB_AUTH=none serves the hub without a token; refusing to bind ${config.host}. Bind 127.0.0.1.`,
    );
  }
  const logger = deps.logger ?? createLogger(config);
  const catalog = await loadCatalog(config.catalog);
  // OpenTelemetry, only when OTEL_EXPORTER_OTLP_ENDPOINT is set (nothing is loaded otherwise).
  await startTracing();
  const store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  try {
    const key = await loadSealKey(store, {
      secretKey: config.secretKey,
      secretKeyPrevious: config.secretKeyPrevious,
      dataDir: config.dataDir,
    });
    const tokens = new TokenStore(store);
    const users = new UserStore(store);
    const sessions = new SessionStore(store);
    const bootstrapToken = await tokens.bootstrapAdmin(config.adminToken);
    const settings = new SettingsService(store);
    const audit = new AuditLog(store);
    // One machine, one disk: call rows are committed by an append to a local journal (`audit/journal.ts`).
    if (store.kind === 'sqlite') {
      audit.journalTo(await AuditJournal.open(store, config.dataDir, { onError: audit.onError }));
    }
    const events = await EventHub.open(store);
    const guards = new Guards(config, deps.resolver);
    const pools = new Map<boolean, UpstreamPool>();
    const poolFor = (privateNetwork: boolean): UpstreamPool => {
      let pool = pools.get(privateNetwork);
      if (!pool) {
        const guard = guards.for(privateNetwork);
        pool = new UpstreamPool({
          fetch: guard.fetch,
          sessionMode: config.sessionMode,
          poolMaxSize: config.poolMaxSize,
          poolIdleMs: config.poolIdleMs,
          listTimeoutMs: config.listTimeoutMs,
          callTimeoutMs: config.callTimeoutMs,
          ...(config.hubFastPath ? { exchange: guard.exchange } : {}),
          logger,
        });
        pools.set(privateNetwork, pool);
      }
      return pool;
    };
    const probe = new StateProbe({
      guardFor: (p) => guards.for(p),
      stdioState: (id) => supervisor.stateOf(id),
      stdioSandboxed: (server) => config.stdioSandbox === 'on' && server.sandbox?.mode !== 'off',
    });
    const stderrWindow = new Map<string, { start: number; lines: number }>();
    // A chatty child must not flood the event table: at most so many output lines per server per minute.
    const onChildOutput = (id: string, line: string, kind: 'stderr' | 'stdout' = 'stderr') => {
      const now = Date.now();
      const window = stderrWindow.get(id);
      if (!window || now - window.start > 60_000) stderrWindow.set(id, { start: now, lines: 1 });
      else if (++window.lines > STDERR_LINES_PER_MINUTE) return;
      void registry.serverEvent(id, kind, line).catch(() => {});
    };
    const planner = new SandboxPlanner({
      mode: config.stdioSandbox,
      uidBase: config.stdioSandboxUidBase,
      dataDir: config.dataDir,
      settings,
      hidden: deps.hiddenPaths ?? [],
    });
    const handshaker = createHandshaker({
      poolFor,
      // A child started for a test is checked, resolved and sandboxed exactly as a supervised one.
      launchFor: async (row, command, env) => {
        const launch = await planner.prepare(row.id, command, parseJson<ServerOptions>(row.options, {}), env);
        return { program: launch.program, sandbox: launch.sandbox };
      },
      timeoutMs: config.listTimeoutMs,
      installTimeoutMs: config.stdioInstallTimeoutMs,
      onStderr: onChildOutput,
      // A running supervised server is tested over its own connection, not a second process.
      supervised: (id, fn) => supervisor.ifRunning(id, config.listTimeoutMs, fn),
    });
    const registry: Registry = new Registry(
      store,
      new ServerStore(store, key, config.secretEnvPrefix),
      audit,
      events,
      handshaker,
      probe,
      async (command) => assertCommandAllowed(command, (await settings.current())['stdio.allowedCommands']),
    );
    const supervisor: StdioSupervisor = new StdioSupervisor({
      records: registry.records,
      settings,
      events,
      logger,
      dataDir: config.dataDir,
      serverEvent: (id, kind, message, data) => registry.serverEvent(id, kind, message, data),
      // Only over the new connection: never a second process for it.
      onStarted: async (id) => (supervisor.stateOf(id) === 'running' ? registry.test(id, undefined) : undefined),
      onOutput: (id, kind, line) => onChildOutput(id, line, kind),
      ...(config.listWatch && { onListChanged: (id: string) => listWatchers.schedule(id, 'list_changed') }),
      graceMs: config.stdioGraceMs,
      maxLineBytes: config.stdioMaxLineBytes,
      restartBaseMs: config.stdioRestartBaseMs,
      maxRestarts: config.stdioMaxRestarts,
      connectTimeoutMs: config.listTimeoutMs,
      installTimeoutMs: config.stdioInstallTimeoutMs,
      callTimeoutMs: config.callTimeoutMs,
      planner,
    });

    const listWatchers = new ListWatchers({
      records: registry.records,
      poolFor,
      refresh: (id, trigger, signal) => registry.refresh(id, trigger, signal),
      logger,
      locks: store.locks,
      ...(deps.listWatchTimings && { timings: deps.listWatchTimings }),
    });

    const approvals = new ApprovalQueue({
      store,
      sealKey: key,
      audit,
      events,
      logger,
      defaultTtlMs: config.approvalTtlMs,
    });
    const llm = config.llmUrl
      ? new LlmClient({
          url: config.llmUrl,
          model: config.llmModel,
          embeddingsModel: config.embeddingsModel,
          apiKey: config.llmKey,
          sealKey: key,
          timeoutMs: config.llmTimeoutMs,
          fetch: guards.for(config.llmPrivateNetwork).fetch,
        })
      : undefined;
    const memory = new MemoryEngine({ store, logger, llm });
    const metrics = new Metrics({
      poolConnections: () => [...pools.values()].reduce((n, p) => n + p.stats().open, 0),
      // Read at scrape time only (indexed by status).
      approvalsPending: async () =>
        Number(
          (
            await store.db
              .selectFrom('approvals')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('status', '=', 'pending')
              .executeTakeFirstOrThrow()
          ).n,
        ),
    });
    metrics.setSources({ auditRows: () => auditRowCount(store) });
    const retention = new AuditRetention({
      store,
      settings,
      logger,
      onBatch: (deleted) => metrics.auditPruned.inc(deleted),
    });
    registry.onSchemaRefused = (reason) => metrics.schemasRefused.inc({ reason });
    registry.testWarnings = (row) => {
      if (row.transport !== 'stdio') return [];
      const { uid, roots } = planner.unwritableRoots(row.id, parseJson<ServerOptions>(row.options, {}));
      return roots.map(({ root, missing }) => ({
        code: 'stdio.workspace_root_unwritable' as const,
        message: missing
          ? `The workspace root ${root} does not exist; create it (writable by uid ${uid}) or remove it from workspaceRoots.`
          : `The workspace root ${root} is read-only for the child's uid ${uid}; chown or chmod the folder to let it write.`,
        details: { root, uid, missing },
      }));
    };
    // Upstream OAuth (issue 18): grants per (shared | user, server, issuer); the hub and handshakes send them.
    const upstreamAuth = new UpstreamAuth({
      records: registry.records,
      grants: new GrantStore(store, key),
      locks: store.locks,
      events,
      guardFor: (p) => guards.for(p),
      publicBaseUrl: () => {
        const address = app?.server.address();
        return publicBaseUrl(config, typeof address === 'object' && address ? address.port : config.port);
      },
      userActive: async (id) => (await users.get(id))?.disabled === false,
    });
    // A hub call is the person's own agent: its refusal may carry their connect link.
    const authorizer: UpstreamAuthorizer = async (row: ServerTable, principal: Principal | undefined, options) => {
      const oauth = upstreamAuth.oauthOf(row);
      const connectLink = options?.connectLink ?? true;
      return oauth && upstreamAuth.bearer(row, upstreamAuth.subjectFor(oauth, principal), { connectLink });
    };
    authorizer.rejected = (row, principal, token) => {
      const oauth = upstreamAuth.oauthOf(row);
      if (oauth && (oauth.mode === 'shared' || principal?.user)) {
        upstreamAuth.rejected(row, upstreamAuth.subjectFor(oauth, principal), token);
      }
    };
    authorizer.insufficientScope = async (row, principal, scope) => {
      const oauth = upstreamAuth.oauthOf(row);
      if (!oauth) return new GatehouseError('auth_failed', undefined, { reason: 'insufficient_scope' });
      const subject = upstreamAuth.subjectFor(oauth, principal);
      return upstreamAuth.insufficientScope(row, subject, scope.split(' ').filter(Boolean));
    };
    // A handshake's error lands in the record everyone reads: it never starts a flow nor carries a link.
    registry.authorizer = async (row, principal) => {
      const oauth = upstreamAuth.oauthOf(row);
      return oauth && upstreamAuth.bearer(row, upstreamAuth.subjectFor(oauth, principal));
    };
    const callAuditor = new CallAuditor({ audit, settings, metrics, events });
    // Across the fleet on PostgreSQL (leases of calls from a shared counter); one process's own on SQLite.
    const limiter = store.kind === 'postgres' ? new FleetCallLimiter({ store, logger }) : new CallLimiter();
    // Logs to the gateway's log a validation that threw (once per schema).
    const validator = new ArgumentValidator({ log: logger });
    const hub = createHub({
      validator,
      config,
      store,
      records: registry.records,
      authorizer,
      settings,
      events,
      approvals,
      poolFor,
      stdio: supervisor,
      limiter,
      audit: (record) => callAuditor.record(record),
      stateCodec: createHubStateCodec(key),
      onFastRequest: () => metrics.hubFastRequests.inc(),
      onSessionEvicted: () => metrics.sessionEvictions.inc(),
      ...(deps.sharedSessions === false && { sharedSessions: false }),
      ...(deps.sseKeepAliveMs !== undefined && { sseKeepAliveMs: deps.sseKeepAliveMs }),
      searchEmbeddings:
        llm && config.searchEmbeddings === 'on'
          ? new ToolEmbeddings({
              embedder: llm,
              logger,
              queryTimeoutMs: config.embeddingsTimeoutMs,
              minSimilarity: config.embeddingsMinSimilarity,
            })
          : undefined,
    });

    const capabilities = async (): Promise<Capability[]> => [
      'registry',
      ...((await settings.current())['mcp.hubEnabled'] ? (['hub'] as const) : []),
      ...((await settings.current())['mcp.adminEnabled'] ? (['admin'] as const) : []),
      ...((await settings.current())['mcp.memoryEnabled'] ? (['memory'] as const) : []),
      ...(config.opsEnabled ? (['ops'] as const) : []),
    ];
    const opsAuditor = {
      record(event: {
        operation: string;
        url: string;
        tool?: string;
        principal?: { id: string; name: string } | undefined;
        outcome: string;
        latencyMs: number;
      }) {
        const target = new URL(event.url);
        return audit.enqueue({
          at: nowIso(),
          kind: 'ops',
          action: event.operation,
          actor_id: event.principal?.id ?? null,
          actor_name: event.principal?.name ?? null,
          user_id: null,
          user_name: null,
          server_id: null,
          tool: event.tool ?? null,
          verdict: null,
          approval_id: null,
          outcome: event.outcome,
          latency_ms: event.latencyMs,
          request_bytes: null,
          response_bytes: null,
          args_digest: null,
          // Origin and path only: a query string or userinfo may carry credentials.
          data: JSON.stringify({ upstream: `${target.origin}${target.pathname}` }),
        });
      },
    };

    // OAuth 2.1 for the MCP endpoints (src/oauth); the port is read per request (0 binds any).
    const oauth = createOAuth({
      config,
      store,
      sealKey: key,
      settings,
      audit,
      tokens,
      events,
      resolver: deps.resolver,
      port: () => {
        const address = app?.server.address();
        return typeof address === 'object' && address ? address.port : config.port;
      },
    });
    const readiness = new Readiness(store);
    const tokenUsage = new TokenUsage(store);
    const grants = new SurfaceGrants();
    // Assigned right after the app is built; the platform routes read it per request.
    let admin: AdminSurface;
    let app: FastifyInstance | undefined;
    // Who a request is: a token, a dashboard session or an OAuth access token (usage is tracked for the app's own check).
    const people = combinedAuthenticator(
      tokenAuthenticator(store, tokens, users),
      sessionAuthenticator({ store, sessions, users, tokens }),
    );
    const identify = eitherAuthenticator(people, oauth.authenticate);
    app = await buildApp({
      config,
      logger,
      grants,
      // Draining: every answer closes its connection, so keep-alive clients open their next one elsewhere.
      closingConnections: () => readiness.draining,
      onRequestTimeout: () => metrics.requestTimeouts.inc(),
      authenticate: eitherAuthenticator(tokenUsage.tracking(people), oauth.authenticate),
      challenge: oauth.challenge,
      cors: corsHook(config),
      routes: [
        ...systemRoutes({
          operations: config.opsEnabled ? ['list-tools', 'call-tool'] : [],
          transports: ['streamable-http', 'stdio'],
          capabilities,
          infoRoles: ['admin', 'operator', 'agent', 'ops', 'member'],
        }),
        ...tokenRoutes({ tokens, audit, events, approvals, users }),
        ...settingsRoutes({ settings, audit, events }),
        ...serverRoutes({ registry, catalog, guard: guards.for(false) }),
        ...processRoutes({ supervisor, audit }),
        ...catalogRoutes({
          catalog,
          guard: guards.for(false),
          installed: () => store.db.selectFrom('servers').select(['id', 'name']).execute(),
        }),
        ...streamRoutes(events, identify),
        ...approvalRoutes({ queue: approvals }),
        ...pinRoutes({ store, audit, events, registry }),
        ...auditRoutes({ store, settle: () => audit.settle() }),
        ...metricsRoutes({ metrics }),
        ...memoryRoutes({ engine: memory }),
        ...platformRoutes({
          store,
          settings,
          opsEnabled: config.opsEnabled,
          capabilities: (current) => ({
            scopes: Object.fromEntries(
              (['servers', 'approvals', 'audit', 'settings', 'tokens', 'platform', 'memory'] as const).map((scope) => [
                scope,
                accessTo(current, scope),
              ]),
            ),
            tools: [...admin.catalog().tools.values()].filter((t) => mayUse(t, current)).map((t) => t.name),
          }),
        }),
        ...(config.opsEnabled ? opsRoutes(poolFor(false), opsAuditor) : []),
        ...readyRoutes(readiness),
        ...oauth.restRoutes(approvals),
        ...secretsRoutes({ store, key, audit }),
        ...dashboardRoutes(),
        ...userRoutes({
          users,
          sessions,
          tokens,
          upstreamGrants: upstreamAuth,
          approvals,
          audit,
          events,
          providerManaged:
            Boolean(config.oidcIssuer && config.oidcClientId) && Object.keys(config.oidcRoleMap).length > 0,
        }),
        ...signInRoutes({
          store,
          sessions,
          users,
          tokens,
          audit,
          events,
          oidc: oidcClient(config, guards),
          baseUrl: () => publicBaseUrl(config, (app?.server.address() as AddressInfo | null)?.port ?? config.port),
        }),
        ...toolsetRoutes({ store, audit, events, hub: hub.registry }),
        ...overrideRoutes({ store, audit, events, registry, hub: hub.registry, validator }),
        ...importRoutes({
          registry,
          settings,
          baseUrl: () => publicBaseUrl(config, (app?.server.address() as AddressInfo | null)?.port ?? config.port),
          listening: () => ({
            host: config.host,
            port: (app?.server.address() as AddressInfo | null)?.port ?? config.port,
          }),
        }),
        ...overviewRoutes({ store, settle: () => audit.settle() }),
        ...connectRoutes({
          tokens,
          audit,
          events,
          baseUrl: () => publicBaseUrl(config, (app?.server.address() as AddressInfo | null)?.port ?? config.port),
        }),
        ...upstreamAuthRoutes({
          auth: upstreamAuth,
          grants: upstreamAuth.grants,
          audit,
          // A shared grant just connected: the handshake now runs with it, so status and tools follow.
          afterConnect: async (id, subject) => {
            if (subject === 'shared') await registry.test(id, undefined).catch(() => undefined);
          },
        }),
      ],
    });
    // The ops mount: the conduit's DNS-rebinding defence (Host and Origin, the MCP endpoints' rule) on `/ops/*`.
    if (config.opsEnabled) app.addHook('onRequest', opsTransportCheck(config));
    hub.register(app);
    await oauth.register(app);
    admin = createAdminSurface({
      config,
      app,
      grants,
      settings,
      approvals,
      audit: (record) => callAuditor.record(record),
      limiter,
      store,
    });
    const memorySurface: MemorySurface = createMemorySurface({
      config,
      app,
      engine: memory,
      settings,
      approvals,
      audit: (record) => callAuditor.record(record),
      limiter,
      store,
    });
    // Whoever loses access (a token revoked, a person disabled or deleted, an OAuth grant revoked) has what it
    // holds open ended at once on every surface and replica (each hears the event), rather than going on
    // receiving notifications until its next request is refused.
    const unrevoke = events.subscribe((event) => {
      if (event.type !== 'token.changed' && event.type !== 'user.changed') return;
      void principalsEndedBy(store, event)
        .then(async (ids) => {
          for (const id of ids) {
            for (const endpoint of [hub.endpoint, admin.endpoint, memorySurface.endpoint])
              await endpoint.endAccessOf(id);
          }
        })
        .catch((error) => logger.warn({ err: error }, 'could not end the open sessions of a revoked principal'));
    });
    app.addHook('onClose', async () => unrevoke());
    await approvals.start();
    await sessions.sweep();
    retention.start();
    await memory.start();
    await supervisor.boot();
    // A record's change ends the pooled connections it no longer wants (removed, disabled, repointed) here too.
    const unpool = events.subscribe((event) => {
      const id = event.data.id;
      if (event.type !== 'server.changed' || typeof id !== 'string') return;
      void endUnwantedConnections(id, registry.records, pools).catch((error) =>
        logger.warn({ server: id, err: error }, 'could not end the upstream connections of a changed server'),
      );
    });
    app.addHook('onClose', async () => unpool());
    if (config.listWatch) {
      // Any replica's change to a record (install, configure, enable, a first handshake) reaches every
      // replica's watches. A watch (re)started by a change of the record refreshes once connected (a
      // new URL is another upstream; a re-enabled one may have changed); one started by a handshake
      // has just seen the lists.
      const unwatch = events.subscribe((event) => {
        const id = event.data.id;
        if ((event.type === 'server.changed' || event.type === 'server.status') && typeof id === 'string') {
          void listWatchers.sync(id, event.type === 'server.changed');
        }
      });
      app.addHook('onClose', async () => unwatch());
      void listWatchers.start().catch((error) => logger.warn({ err: error }, 'list watches did not start'));
    }
    app.addHook('onClose', async () => {
      await retention.close();
      await listWatchers.close();
      await hub.close();
      await supervisor.close();
      await admin.close();
      await memorySurface.close();
      await memory.close();
      await approvals.close();
      await callAuditor.flush();
      events.close();
      await audit.close();
      await Promise.all([...pools.values()].map((p) => p.close()));
      await guards.close();
      await oauth.close();
      await tokenUsage.close();
      await store.close();
    });
    readiness.started();
    let drained: Promise<void> | undefined;
    const drain = () => {
      drained ??= (async () => {
        readiness.drain();
        approvals.stopClaiming();
        await listWatchers.close();
      })();
      return drained;
    };
    return {
      readiness,
      drain,
      app,
      store,
      registry,
      settings,
      tokens,
      events,
      audit,
      approvals,
      hub,
      admin,
      memory,
      supervisor,
      listWatchers,
      bootstrapToken,
      tokenUsage,
      users,
      sessions,
      upstreamAuth,
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * Rows in the audit table, for `/metrics`. PostgreSQL: the planner's own estimate (rows per page at the
 * last analyze × the pages the table has now), since `count(*)` would read the whole table on every
 * scrape; exact while the table has never been analyzed. SQLite counts.
 */
async function auditRowCount(store: Store): Promise<number> {
  if (store.kind === 'postgres') {
    const { rows } = await sql<{ n: number | string | null }>`
      select case when c.reltuples < 0 or c.relpages = 0 then null
        else round(c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::int))
        end as n
      from pg_class c where c.oid = to_regclass('audit_events')`.execute(store.db);
    const estimate = rows[0]?.n;
    if (estimate !== null && estimate !== undefined) return Number(estimate);
  }
  const row = await store.db
    .selectFrom('audit_events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The OIDC sign-in client when GATEHOUSE_OIDC_ISSUER and a client id are set (fetching through the egress guard). */
function oidcClient(config: Config, guards: Guards): OidcClient | undefined {
  if (!config.oidcIssuer || !config.oidcClientId) return undefined;
  return new OidcClient(
    {
      issuer: config.oidcIssuer,
      clientId: config.oidcClientId,
      clientSecret: config.oidcClientSecret,
      roleMap: config.oidcRoleMap,
      groupsClaim: config.oidcGroupsClaim,
    },
    guards.for(config.oidcPrivateNetwork).fetch,
  );
}
