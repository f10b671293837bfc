/**
 * The agent hub assembled: the registry view, the call path, the MCP server
 * factory, the endpoints of both eras, and the approval executor that runs an
 * approved call once, after re-checking it is still the call that was approved.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { FastifyInstance } from 'fastify';
import { checkHubBinding } from '../../approvals/binding.js';
import type { ApprovalExecutor, ApprovalQueue, RecheckOutcome } from '../../approvals/queue.js';
import type { ApprovalView } from '../../approvals/types.js';
import type { EventHub } from '../../audit/stream.js';
import type { Config } from '../../config.js';
import { findGatehouseError, GatehouseError } from '../../errors.js';
import { type Principal, type TokenPrincipal, toolViewFor } from '../../identity/index.js';
import type { ArgumentValidator } from '../../policy/arguments.js';
import { assertPathsInside } from '../../policy/paths.js';
import type { ServerStore } from '../../registry/records.js';
import { DEFAULT_SETTINGS, type Settings } from '../../settings/keys.js';
import type { SettingsService } from '../../settings/service.js';
import type { Store } from '../../store/db.js';
import type { Continuation, UpstreamPool } from '../../upstream/index.js';
import { McpEndpoint } from '../endpoint.js';
import { ApprovedRounds, runAuditedRound, storedOutcome } from './approved-rounds.js';
import { type CallPorts, type CallScope, HubCalls, runUpstream } from './calls.js';
import { fastRequestOf, serveFastRequest } from './fast-path.js';
import { HeldRelay } from './held-relay.js';
import { HubListenStreams, MAX_LISTEN_STREAMS } from './listen-streams.js';
import { paramHeaderRejection } from './param-check.js';
import type { HubStateCodec } from './request-state.js';
import type { ToolEmbeddings } from './search/embeddings.js';
import { SearchIndexes } from './search/indexes.js';
import { RecentTools } from './search/recent.js';
import { buildHubServer, HUB_SERVER_INFO, type ListView } from './server.js';
import { revokeUnreachable } from './subscribe-upstream.js';
import { ResourceSubscriptions } from './subscriptions.js';
import { HubTasks } from './tasks.js';
import { createUiPinGuard } from './ui-pins.js';
import { type GrantOptions, HubRegistry, type HubServer, type Snapshot, type UpstreamAuthorizer } from './view.js';

export interface HubDeps {
  config: Pick<
    Config,
    | 'host'
    | 'hubAuth'
    | 'hubFastPath'
    | 'allowedOrigins'
    | 'allowedHosts'
    | 'maxBodySize'
    | 'toolNameMax'
    | 'listTimeoutMs'
    | 'listPageSize'
    | 'callTimeoutMs'
  >;
  store: Store;
  records: ServerStore;
  /** OAuth servers' bearer tokens per caller (src/upstream-auth); absent, no server is OAuth-authorized. */
  authorizer?: UpstreamAuthorizer | undefined;
  settings: SettingsService;
  events: EventHub;
  approvals: ApprovalQueue;
  poolFor(privateNetwork: boolean): UpstreamPool;
  stdio: CallPorts['stdio'];
  limiter: CallPorts['limiter'];
  /** Checks arguments against pinned schemas (one per gateway: its compiled schemas are shared). */
  validator: ArgumentValidator;
  audit: CallPorts['audit'];
  /** Signs the hub's multi-round-trip state; derived from the sealing key so every replica shares it. */
  stateCodec: HubStateCodec;
  /** Counts a request served by the fast path (`fast-path.ts`). */
  onFastRequest?: () => void;
  /** Counts a 2025-era session closed to make room for another of the same token. */
  onSessionEvicted?: () => void;
  /** Bench seam: false keeps 2025-era sessions in this process even on PostgreSQL. */
  sharedSessions?: boolean;
  /** How long a fast call in a 2025-era session runs before its answer turns into a kept-alive stream (the SDK's 15 s). */
  sseKeepAliveMs?: number;
  /** Search mode's optional embeddings (`GATEHOUSE_SEARCH_EMBEDDINGS=on`). */
  searchEmbeddings?: ToolEmbeddings | undefined;
}

export interface Hub {
  endpoint: McpEndpoint;
  /** Mounts `/mcp`, `/mcp/s/{server}` and `/mcp/t/{toolset}`. */
  register(app: FastifyInstance): void;
  registry: HubRegistry;
  close(): Promise<void>;
}

/** Stream events after which the aggregate may look different to agents. */
const LIST_EVENTS = new Set(['server.changed', 'server.status', 'tool.quarantined', 'tool.approved']);

/** A token's tool view, or the platform's default one, changed: the agents' lists may have. */
function changesToolViews(event: { type: string; data: unknown }): boolean {
  const data = (event.data ?? {}) as { change?: unknown; keys?: unknown };
  if (event.type === 'token.changed') return data.change === 'updated';
  if (event.type !== 'settings.changed' || !Array.isArray(data.keys)) return false;
  return data.keys.some((key) => key === 'hub.toolView' || key === 'hub.search.recentTools');
}

/** The input capabilities the agent declared when it asked (kept on the approval's card). */
function storedCapabilities(approval: ApprovalView): Record<string, unknown> | undefined {
  const declared = approval.detail.inputCapabilities;
  return declared !== null && typeof declared === 'object' ? (declared as Record<string, unknown>) : undefined;
}

export function createHub(deps: HubDeps): Hub {
  const registry = new HubRegistry(deps.store, deps.records, deps.config.toolNameMax, deps.authorizer);
  // Shared by the replicas through the store; another replica's change tells this one's sessions.
  const recent = new RecentTools({
    store: deps.store,
    onRemoteChange: (agentIds) => {
      for (const id of agentIds) endpoint.notifyToolsChangedFor(id);
    },
  });
  const searchIndexes = new SearchIndexes(undefined, undefined, deps.searchEmbeddings);
  /** The settings the endpoint's gate read for the request being served (servers are built synchronously). */
  let lastSettings: Settings = DEFAULT_SETTINGS;
  const listViewOf = async (principal: TokenPrincipal, scope: CallScope): Promise<ListView> => {
    if (scope.kind !== 'aggregate') return { view: { kind: 'all' } };
    const settings = await deps.settings.current();
    const view = toolViewFor(principal, settings);
    const count = settings['hub.search.recentTools'];
    return view.kind === 'search' && count > 0 ? { view, recent: await recent.recent(principal.id, count) } : { view };
  };
  // A search-mode agent whose recent tools gained one is told its list changed (its sessions; and the
  // stateless era's listeners, which carry no token to single out).
  const onToolCalled = (principal: TokenPrincipal, exposed: string) => {
    const count = lastSettings['hub.search.recentTools'];
    if (count === 0 || toolViewFor(principal, lastSettings).kind !== 'search') return;
    if (recent.record(principal.id, exposed, count)) endpoint.notifyToolsChangedFor(principal.id);
  };
  // Upstream tasks reach their upstream the way prompts and resources do (`withUpstream`, below).
  const tasks = new HubTasks(deps.store, (snapshot, server, fn, signal, principal) =>
    withUpstream(snapshot, server, fn, signal, principal),
  );
  const calls = new HubCalls({
    tasks,
    onToolCalled,
    settings: deps.settings,
    validator: deps.validator,
    poolFor: deps.poolFor,
    stateCodec: deps.stateCodec,
    stdio: deps.stdio,
    limiter: deps.limiter,
    audit: deps.audit,
    approvals: deps.approvals,
    // Replicas on one PostgreSQL relay a held call's rounds to the one holding it; SQLite has one process.
    heldRelay: deps.store.kind === 'postgres' ? new HeldRelay(deps.store) : undefined,
  });

  const subscriptions = new ResourceSubscriptions();
  const uiPins = createUiPinGuard({ store: deps.store, records: deps.records, events: deps.events });
  const withUpstream = async <T>(
    snapshot: Snapshot,
    server: HubServer,
    fn: (client: Client, signal: AbortSignal) => Promise<T>,
    signal: AbortSignal,
    principal?: Principal,
    options?: GrantOptions,
  ): Promise<T> => {
    if (server.row.transport === 'stdio') {
      return deps.stdio.withClient(server.row.id, deps.config.listTimeoutMs, fn, { signal });
    }
    const upstream = await snapshot.upstreamFor(server, principal, options);
    if (!upstream) throw new GatehouseError('internal_error');
    return deps.poolFor(upstream.privateNetwork).withClient(upstream.target, deps.config.listTimeoutMs, fn, { signal });
  };

  // A 2026-07-28 upstream's resource-update stream, on a channel of its own (`subscriptions.ts`).
  const openChannel = async (snapshot: Snapshot, server: HubServer, principal: Principal | undefined) => {
    if (server.row.transport === 'stdio') return deps.stdio.openChannel(server.row.id, deps.config.listTimeoutMs);
    const upstream = await snapshot.upstreamFor(server, principal);
    if (!upstream) throw new GatehouseError('internal_error');
    return deps
      .poolFor(upstream.privateNetwork)
      .openChannel(upstream.target, AbortSignal.timeout(deps.config.listTimeoutMs));
  };

  const subscribeDeps = {
    registry,
    withUpstream,
    openChannel,
    subscriptions,
    listTimeoutMs: deps.config.listTimeoutMs,
  };
  // A 2026-07-28 agent's own listen streams: its resource subscriptions, its updates only (`listen-streams.ts`).
  const listens = new HubListenStreams(subscribeDeps, MAX_LISTEN_STREAMS);

  const buildServer = (principal: TokenPrincipal, scope: Parameters<typeof buildHubServer>[2]) =>
    buildHubServer(
      {
        ...subscribeDeps,
        calls,
        approvedRounds,
        stateCodec: deps.stateCodec,
        listPageSize: deps.config.listPageSize,
        listViewOf,
        searchIndexes,
        uiPins,
        tasks,
        subscribed: (server, uri) => endpoint.subscribed(server, uri),
      },
      principal,
      scope,
      scope.kind === 'aggregate' ? toolViewFor(principal, lastSettings) : undefined,
    );

  const fastDeps = {
    registry,
    calls,
    serverInfo: HUB_SERVER_INFO,
    listPageSize: deps.config.listPageSize,
    listViewOf,
  };
  const endpoint = new McpEndpoint({
    host: deps.config.host,
    hubAuth: deps.config.hubAuth,
    allowedOrigins: deps.config.allowedOrigins,
    allowedHosts: deps.config.allowedHosts,
    maxBodySize: deps.config.maxBodySize,
    gate: async () => {
      lastSettings = await deps.settings.current();
      return lastSettings['mcp.hubEnabled'] ? undefined : new GatehouseError('hub.disabled');
    },
    scopeVisible: async (scope, principal) => {
      // Read for every scope: the server built next declares what the current snapshot offers (MCP Apps).
      const snapshot = await registry.snapshot();
      if (scope.kind === 'aggregate') return true;
      // A toolset is there for a caller who sees one of its servers (what it sees in it is still per server:
      // exposure, policy); to anyone else it answers as a name that does not exist, as a server outside its groups does.
      if (scope.kind === 'toolset') return snapshot.toolset(scope.toolset, principal.groups) !== undefined;
      return snapshot.server(scope.serverId, principal.groups) !== undefined;
    },
    buildServer,
    listens,
    // SEP-2243: a 2026-07-28 call's `Mcp-Param-*` headers against the tool's `x-mcp-header` arguments.
    precheck: (request, principal, scope) => paramHeaderRejection({ registry, listViewOf }, request, principal, scope),
    // Opening a session spends one call of the token's rate limit (it holds no concurrency slot).
    admitSession: async (principal) => {
      const settings = await deps.settings.current();
      const release = await deps.limiter?.acquire(principal, settings['hub.rateLimit']);
      release?.();
      return { maxPerToken: principal.maxSessions ?? settings['hub.maxSessionsPerToken'] };
    },
    onSessionEvicted: () => deps.onSessionEvicted?.(),
    // The upstream is told when no other agent session listens to that URI here any more.
    onUnsubscribedElsewhere: (server, uri) => void subscriptions.remove(server, uri).catch(() => {}),
    ...(deps.sharedSessions !== false && { sessionStore: { store: deps.store, surface: 'hub' } }),
    ...(deps.sseKeepAliveMs !== undefined && { sseKeepAliveMs: deps.sseKeepAliveMs }),
    ...(deps.config.hubFastPath
      ? {
          fastPath: (request, principal, scope, session) => {
            const fast = fastRequestOf(request.headers, request.body, session);
            if (!fast) return undefined;
            deps.onFastRequest?.();
            return { id: fast.id, serve: (signal) => serveFastRequest(fastDeps, principal, scope, fast, signal) };
          },
        }
      : {}),
  });

  /** One round of an approved call on its upstream (the first, or a later one carrying the agent's answers). */
  const runApproved = async (
    approval: ApprovalView,
    continuation: Continuation | undefined,
    inputCapabilities: Record<string, unknown> | undefined,
    signal: AbortSignal,
  ) => {
    const snapshot = await registry.snapshot();
    const server = approval.serverId ? snapshot.servers.get(approval.serverId) : undefined;
    if (!server) throw new GatehouseError('mcp.not_found', `Server "${approval.serverId}" is gone.`);
    return runUpstream(
      { poolFor: deps.poolFor, stdio: deps.stdio },
      snapshot,
      server,
      approval.tool,
      approval.arguments,
      {
        signal,
        continuation,
        inputCapabilities,
        // A per-user OAuth server uses the requester's own grant when the approved call runs.
        principal: await requesterOf(deps.store, approval),
      },
    );
  };
  const recheck = async (approval: ApprovalView): Promise<RecheckOutcome> => {
    const bound = await checkHubBinding(deps.store.db, approval);
    if (!bound.ok) return bound;
    // The sandbox again, on the file system as it is now: a link inside a workspace root may have
    // been pointed elsewhere while the call waited for its approval.
    const server = approval.serverId ? (await registry.snapshot()).servers.get(approval.serverId) : undefined;
    try {
      if (server) assertPathsInside(server.detail, approval.arguments);
    } catch (error) {
      const escaped = findGatehouseError(error);
      if (escaped?.code !== 'policy.path_escape') throw error;
      return { ok: false, reason: `${escaped.message} (checked again before it ran)` };
    }
    return bound;
  };
  const executor: ApprovalExecutor = {
    recheck,
    execute: async (approval, signal) =>
      storedOutcome(
        await runAuditedRound(deps.audit, approval, approval.requester, () =>
          runApproved(approval, undefined, storedCapabilities(approval), signal),
        ),
      ),
  };
  const approvedRounds = new ApprovedRounds({
    approvals: deps.approvals,
    stateCodec: deps.stateCodec,
    recheck,
    run: runApproved,
    audit: deps.audit,
    roundDeadlineMs: deps.config.callTimeoutMs,
  });
  deps.approvals.registerExecutor('hub', executor);

  const unsubscribe = deps.events.subscribe((event) => {
    if (LIST_EVENTS.has(event.type) || changesToolViews(event)) endpoint.notifyListChanged();
    // A server's exposure narrowed, or it was disabled or removed: who may no longer see it hears no more of it
    // (checked on a new snapshot only when someone listens there).
    const changedServer = event.data.id;
    if (
      event.type === 'server.changed' &&
      typeof changedServer === 'string' &&
      subscriptions.listensTo(changedServer)
    ) {
      registry.snapshot().then(
        (snapshot) => revokeUnreachable(subscriptions, snapshot, changedServer),
        () => undefined,
      );
    }
    // Search mode in use: the catalog's new index starts building now, not on the next search.
    if (LIST_EVENTS.has(event.type) && searchIndexes.inUse) {
      registry.snapshot().then(
        (snapshot) => searchIndexes.refresh(snapshot),
        () => undefined,
      );
    }
  });

  return {
    endpoint,
    registry,
    register(app) {
      endpoint.route(app, '/mcp', () => ({ kind: 'aggregate' }));
      endpoint.route(app, '/mcp/s/:server', (request) => ({
        kind: 'single',
        serverId: (request.params as { server: string }).server,
      }));
      endpoint.route(app, '/mcp/t/:toolset', (request) => ({
        kind: 'toolset',
        toolset: (request.params as { toolset: string }).toolset,
      }));
    },
    async close() {
      unsubscribe();
      await endpoint.close();
      calls.close();
      await subscriptions.close();
      await recent.close();
    },
  };
}

/** The requester of an approval as far as upstream OAuth needs it: its token and its user (if any). */
async function requesterOf(store: Store, approval: ApprovalView): Promise<Principal> {
  const row = await store.db
    .selectFrom('approvals')
    .select(['requester_user_id'])
    .where('id', '=', approval.id)
    .executeTakeFirst();
  const userId = row?.requester_user_id ?? null;
  return {
    id: approval.requester.id,
    name: approval.requester.name,
    role: 'agent',
    groups: [],
    ...(userId ? { user: { id: userId, name: '', role: 'member', groups: [] } } : {}),
  };
}
