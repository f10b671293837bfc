/**
 * The hub's view of the registry: every enabled server's tools, prompts and
 * resources from its last handshake, with their verdicts and pins, named for
 * the aggregate. Rebuilt only when the store's `servers` version moves (any
 * record, policy, pin or handshake change), so listing and resolving a call
 * cost no store round trip.
 */
import {
  type Implementation,
  type Prompt,
  type Resource,
  SERVER_INFO_META_KEY,
  type Tool,
} from '@modelcontextprotocol/server';
import type { Principal } from '../../identity/index.js';
import { missingArguments, type OverrideReason, overriddenTool, type ToolOverride } from '../../overrides/model.js';
import { OVERRIDE_KIND, type OverrideRecord, toOverrideRecord } from '../../overrides/store.js';
import type { PinView } from '../../policy/pin-store.js';
import { toPinView } from '../../policy/pin-store.js';
import { uiResourceOf } from '../../policy/pins.js';
import { classifyTool } from '../../policy/tool-policy.js';
import { isUsable, type ToolVerdict, toolVerdict } from '../../policy/verdicts.js';
import type { Connection, DiscoveredTool, ServerDetail, ServerStore } from '../../registry/records.js';
import { toDetail, upstreamTargetOf } from '../../registry/records.js';
import type { Store } from '../../store/db.js';
import type { ServerTable } from '../../store/schema.js';
import type { EntryState, Toolset } from '../../toolsets/model.js';
import { toToolset } from '../../toolsets/store.js';
import { scanParamHeaders } from '../../upstream/param-headers.js';
import type { UpstreamTarget } from '../../upstream/types.js';
import { exposeNames, grantDisplayNames, UI_EXTENSION, wrapUiMeta } from './names.js';

export interface HubTool {
  exposed: string;
  serverId: string;
  /** The upstream's own name. */
  name: string;
  definition: DiscoveredTool;
  verdict: ToolVerdict;
  pin: PinView | undefined;
  /** Its `<server>__<tool>` name (what `exposed` is unless an override's display name replaces it). */
  autoName: string;
  /** The operator's override, when one is set (`override.state` says whether it is in force). */
  override?: AppliedOverride | undefined;
}

/** An override as the snapshot applies it. */
export interface AppliedOverride {
  record: OverrideRecord;
  /** `quarantined` when an upstream change removed a fixed argument: the tool is then quarantined too. */
  state: 'active' | 'quarantined';
  /** Why not (wholly) in force: a fixed argument removed, or a display name another tool's name took. */
  reason?: OverrideReason | undefined;
  /** The fixed arguments the tool's schema no longer declares. */
  missing?: string[] | undefined;
}

/** The override an agent's call goes through (active only: a quarantined one quarantines its tool). */
export function activeOverride(tool: HubTool): ToolOverride | undefined {
  return tool.override?.state === 'active' ? tool.override.record.override : undefined;
}

export interface HubPrompt {
  exposed: string;
  serverId: string;
  name: string;
  prompt: Prompt;
  /** Its pin in force: a per-user server's prompt is listed from the caller's account only as pinned. */
  pin: PinView;
}

export interface HubServer {
  row: ServerTable;
  detail: ServerDetail;
  exposure: ReadonlySet<string>;
  tools: ReadonlyMap<string, HubTool>;
  /** By upstream name, for the unprefixed `/mcp/s/{server}` surface. */
  toolsByName: ReadonlyMap<string, HubTool>;
  prompts: ReadonlyMap<string, HubPrompt>;
  /** As its last handshake listed them; none for a per-user server (the hub lists those live, `per-user-lists.ts`). */
  resources: readonly Resource[];
  /**
   * OAuth `per-user`: each person reaches the upstream with their own account, so what a handshake discovered
   * under one account (its resources, prompts, instructions) is never served to others.
   */
  perUser: boolean;
  /** What the upstream said of itself at its last handshake (`/mcp/s/{server}` passes it on). */
  identity: UpstreamIdentity;
  /** Its UI resources' pins (`ui://` URI → pin), checked on every read through the hub (`ui-pins.ts`). */
  uiPins: ReadonlyMap<string, PinView>;
  /**
   * Whether it offers MCP Apps (`io.modelcontextprotocol/ui`): it declared the extension, or it has a `ui://`
   * resource or a tool naming one. The hub then declares the extension to agents that see this server.
   */
  offersUi: boolean;
}

export interface UpstreamIdentity {
  serverInfo?: Implementation | undefined;
  instructions?: string | undefined;
  /** The extensions its capabilities declared (`capabilities.extensions`), when it said. */
  extensions?: Record<string, unknown> | undefined;
}

/** The upstream's `serverInfo` and `instructions` from its stored discover result (or `initialize` answer). */
function identityOf(discover: string | null): UpstreamIdentity {
  if (!discover) return {};
  try {
    const parsed = JSON.parse(discover) as {
      serverInfo?: unknown;
      instructions?: unknown;
      capabilities?: { extensions?: unknown };
      _meta?: Record<string, unknown>;
    } | null;
    const extensions = parsed?.capabilities?.extensions;
    // A 2026-07-28 discover result names the server in its `_meta`; a 2025 `initialize` in `serverInfo`.
    const info = (parsed?.serverInfo ?? parsed?._meta?.[SERVER_INFO_META_KEY]) as Implementation | undefined;
    return {
      ...(info && typeof info.name === 'string' && typeof info.version === 'string' ? { serverInfo: info } : {}),
      ...(typeof parsed?.instructions === 'string' ? { instructions: parsed.instructions } : {}),
      ...(extensions && typeof extensions === 'object' && !Array.isArray(extensions)
        ? { extensions: extensions as Record<string, unknown> }
        : {}),
    };
  } catch {
    return {};
  }
}

/** Whether an agent sees a tool in its lists: blocked, excluded and quarantined tools are not listed. */
export function isListed(tool: HubTool): boolean {
  return isUsable(tool.verdict);
}

/**
 * How a tool is advertised: as the upstream gave it (`icons`, `execution` and `_meta` included), under
 * its exposed name; a gated tool drops its outputSchema, so `pending_approval` stays a valid result.
 */
export function advertised(tool: HubTool, name: string, inAggregate = false): Tool {
  const plain = advertisedPlain(tool, name, inAggregate);
  const override = activeOverride(tool);
  return override ? overriddenTool(plain, override) : plain;
}

/** `inAggregate`: the tool's `ui://` UI resource is named as the aggregate wraps it (`wrapUiMeta`). */
function advertisedPlain(tool: HubTool, name: string, inAggregate: boolean): Tool {
  const { title, description, inputSchema, outputSchema, annotations, icons, execution, _meta } =
    tool.definition as DiscoveredTool & Tool;
  return {
    name,
    ...(title !== undefined ? { title } : {}),
    ...(description !== undefined ? { description } : {}),
    inputSchema: (inputSchema ?? { type: 'object' }) as Tool['inputSchema'],
    ...(outputSchema !== undefined && tool.verdict !== 'gated'
      ? { outputSchema: outputSchema as Tool['outputSchema'] }
      : {}),
    ...(annotations !== undefined ? { annotations: annotations as Tool['annotations'] } : {}),
    ...(icons !== undefined ? { icons } : {}),
    ...(execution !== undefined ? { execution } : {}),
    ...(_meta !== undefined ? { _meta: inAggregate ? wrapUiMeta(tool.serverId, _meta) : _meta } : {}),
  };
}

/** Where an HTTP server's calls go: the pool's target, and which pool (private networks allowed or not). */
export interface HttpUpstream {
  readonly target: UpstreamTarget;
  readonly privateNetwork: boolean;
}

/** A toolset entry as it stands in a snapshot. */
export interface ToolsetEntryView {
  server: string;
  tool: string;
  state: EntryState;
  /** The name agents call it by (with its override's display name), when the tool exists. */
  exposed?: string | undefined;
  verdict?: ToolVerdict | undefined;
  /** A quarantined tool's reason (`new`, `changed`, …, or `override` when its override is quarantined). */
  reason?: string | undefined;
}

/**
 * The bearer token of an OAuth server for a caller (src/upstream-auth): undefined for a server that
 * does not use OAuth; throws the typed refusal (auth_required, auth.user_required, …) otherwise.
 */
/**
 * How a grant is asked for: `connectLink` (default true) lets a missing grant's refusal start the person's
 * connect flow and carry its link, for their agent's own call; a list (many servers at once, the answer a
 * list, not a refusal) asks with false, so it starts no flow.
 */
export interface GrantOptions {
  connectLink?: boolean;
}

export type UpstreamAuthorizer = ((
  row: ServerTable,
  principal: Principal | undefined,
  options?: GrantOptions,
) => Promise<string | undefined>) & {
  /** The upstream answered 401 to the token it was given: forget it, so the next call reads the grant again. */
  rejected?: (row: ServerTable, principal: Principal | undefined, token: string) => void;
  /**
   * The upstream answered 403 insufficient_scope to it: the grant waits for consent to the wider scope.
   * Answers the error the call reports (a per-user caller's own link asking for that scope).
   */
  insufficientScope?: (row: ServerTable, principal: Principal | undefined, scope: string) => Promise<Error>;
};

export class Snapshot {
  private readonly listCache = new Map<string, Tool[]>();
  private readonly uiOffered = new Map<string, boolean>();
  private paramHeaders: boolean | undefined;
  /** Display names of overrides in force (a name outside `<server>__` shapes), for the aggregate's lookups. */
  readonly renamed = new Map<string, HubTool>();
  readonly toolsets = new Map<string, Toolset>();
  /** Per server id; null for a stdio server. */
  private readonly upstreams = new Map<string, HttpUpstream | null>();
  /** Per server id: the last target built with a grant's token, reused while the token is the same. */
  private readonly authorized = new Map<string, { token: string; upstream: HttpUpstream }>();

  constructor(
    readonly servers: ReadonlyMap<string, HubServer>,
    private readonly connections: (row: ServerTable) => Connection,
    private readonly authorizer?: UpstreamAuthorizer,
  ) {}

  /**
   * The upstream of a call by `principal`: `upstreamOf`, plus the caller's (or the shared) OAuth grant
   * as `Authorization: Bearer` for a server that uses OAuth. The token goes only to this server's URL.
   */
  async upstreamFor(
    server: HubServer,
    principal: Principal | undefined,
    options?: GrantOptions,
  ): Promise<HttpUpstream | undefined> {
    const upstream = this.upstreamOf(server);
    // Only a record with `auth: oauth` has a grant to send: the others skip the authorizer (it parses the record).
    if (!upstream || !this.authorizer || server.detail.auth.type !== 'oauth') return upstream;
    const token = await this.authorizer(server.row, principal, options);
    if (token === undefined) return upstream;
    const key = `${server.row.id}\n${principal?.user?.id ?? ''}`;
    const known = this.authorized.get(key);
    if (known?.token === token) return known.upstream;
    const authorized: HttpUpstream = {
      target: { ...upstream.target, headers: { ...upstream.target.headers, authorization: `Bearer ${token}` } },
      privateNetwork: upstream.privateNetwork,
    };
    this.authorized.set(key, { token, upstream: authorized });
    return authorized;
  }

  /** Whether `upstream` carries an OAuth grant's token (an `upstreamFor` answer beyond the record's own). */
  carriesGrant(server: HubServer, upstream: HttpUpstream): boolean {
    return upstream !== this.upstreamOf(server);
  }

  /**
   * The upstream refused the grant's token that `upstream` carried (HTTP 401): dropped here, and handed to the
   * OAuth client, which marks that very token stale.
   */
  tokenRejected(server: HubServer, principal: Principal | undefined, upstream: HttpUpstream): void {
    this.authorized.delete(`${server.row.id}\n${principal?.user?.id ?? ''}`);
    const sent = upstream.target.headers?.authorization;
    if (typeof sent === 'string' && sent.startsWith('Bearer ')) {
      this.authorizer?.rejected?.(server.row, principal, sent.slice('Bearer '.length));
    }
  }

  /** The upstream wants a wider scope than the grant's token holds (HTTP 403 insufficient_scope). */
  async scopeInsufficient(
    server: HubServer,
    principal: Principal | undefined,
    scope: string,
  ): Promise<Error | undefined> {
    this.authorized.delete(`${server.row.id}\n${principal?.user?.id ?? ''}`);
    return this.authorizer?.insufficientScope?.(server.row, principal, scope);
  }

  /** Enabled servers whose exposure shares a group with the caller. */
  visibleTo(groups: readonly string[]): HubServer[] {
    return [...this.servers.values()].filter((s) => s.detail.enabled && groups.some((g) => s.exposure.has(g)));
  }

  server(id: string, groups: readonly string[]): HubServer | undefined {
    const server = this.servers.get(id);
    return server?.detail.enabled && groups.some((g) => server.exposure.has(g)) ? server : undefined;
  }

  /**
   * A toolset as a caller with these groups may address it (`/mcp/t/{name}`): one with an entry on a server
   * `server(id, groups)` answers, the rule of `/mcp/s/{id}` lifted to the set. A toolset none of whose
   * servers the caller sees is undefined, exactly like a name that does not exist, so names do not leak.
   */
  toolset(name: string, groups: readonly string[]): Toolset | undefined {
    const toolset = this.toolsets.get(name);
    return toolset?.tools.some((entry) => this.server(entry.server, groups) !== undefined) ? toolset : undefined;
  }

  /** Whether any tool marks arguments with `x-mcp-header` (SEP-2243): if none, no call's headers need checking. */
  get declaresParamHeaders(): boolean {
    this.paramHeaders ??= [...this.servers.values()].some((server) =>
      [...server.tools.values()].some(
        (tool) => (scanParamHeaders(tool.definition.inputSchema).declarations?.length ?? 0) > 0,
      ),
    );
    return this.paramHeaders;
  }

  /** Whether any server a set of groups sees offers MCP Apps (cached for the life of this snapshot). */
  offersUi(groups: readonly string[]): boolean {
    const key = [...groups].sort().join(',');
    let offers = this.uiOffered.get(key);
    if (offers === undefined) {
      offers = this.visibleTo(groups).some((server) => server.offersUi);
      this.uiOffered.set(key, offers);
    }
    return offers;
  }

  /** The aggregate tools/list for a set of groups, cached for the life of this snapshot. */
  aggregateTools(groups: readonly string[]): Tool[] {
    const key = [...groups].sort().join(',');
    let tools = this.listCache.get(key);
    if (!tools) {
      tools = [];
      for (const server of this.visibleTo(groups)) {
        for (const tool of server.tools.values()) if (isListed(tool)) tools.push(advertised(tool, tool.exposed, true));
      }
      this.listCache.set(key, tools);
    }
    return tools;
  }

  /** A toolset's listed tools for a set of groups, in the toolset's order, cached for the life of this snapshot. */
  toolsetTools(name: string, groups: readonly string[]): Tool[] {
    const key = `t:${name}|${[...groups].sort().join(',')}`;
    let tools = this.listCache.get(key);
    if (!tools) {
      tools = [];
      for (const entry of this.toolsets.get(name)?.tools ?? []) {
        const tool = this.server(entry.server, groups)?.toolsByName.get(entry.tool);
        if (tool && isListed(tool)) tools.push(advertised(tool, tool.exposed));
      }
      this.listCache.set(key, tools);
    }
    return tools;
  }

  /** Whether a toolset names this tool. */
  inToolset(name: string, tool: HubTool): boolean {
    return (this.toolsets.get(name)?.tools ?? []).some((e) => e.server === tool.serverId && e.tool === tool.name);
  }

  /** What each entry of a toolset is now (for REST and the dashboard): a missing or quarantined tool says so. */
  toolsetEntries(toolset: Toolset): ToolsetEntryView[] {
    return toolset.tools.map((entry) => {
      const server = this.servers.get(entry.server);
      if (!server) return { ...entry, state: 'server_missing' };
      if (!server.detail.enabled) return { ...entry, state: 'server_disabled' };
      const tool = server.toolsByName.get(entry.tool);
      if (!tool) return { ...entry, state: 'missing' };
      const state: EntryState = isUsable(tool.verdict) ? 'available' : (tool.verdict as EntryState);
      const reason = tool.verdict === 'quarantined' ? quarantineReason(tool) : undefined;
      return { ...entry, state, exposed: tool.exposed, verdict: tool.verdict, ...(reason ? { reason } : {}) };
    });
  }

  /**
   * The HTTP upstream a server's calls go to (its secrets opened), or undefined for a stdio server.
   * Opened once per snapshot and server, and always the same target object, so the pool's work per
   * target (validation, pool key) is done once too; a registry change makes a new snapshot. Never log it.
   */
  upstreamOf(server: HubServer): HttpUpstream | undefined {
    let upstream = this.upstreams.get(server.row.id);
    if (upstream === undefined) {
      const connection = this.connections(server.row);
      upstream =
        connection.transport === 'stdio'
          ? null
          : {
              target: upstreamTargetOf(connection, server.row.id),
              privateNetwork: connection.privateNetwork,
            };
      this.upstreams.set(server.row.id, upstream);
    }
    return upstream ?? undefined;
  }
}

export class HubRegistry {
  private cached: { version: string; snapshot: Promise<Snapshot> } | undefined;
  private built: Snapshot | undefined;

  constructor(
    private readonly store: Store,
    private readonly records: ServerStore,
    private readonly toolNameMax: number,
    private readonly authorizer?: UpstreamAuthorizer,
  ) {}

  /** The current snapshot; rebuilt only when the servers version moved. */
  snapshot(): Promise<Snapshot> {
    const version = this.store.version('servers');
    if (this.cached?.version !== version) {
      const snapshot = this.build();
      this.cached = { version, snapshot };
      // A failed build must not stick: the next call tries again.
      snapshot.catch(() => {
        if (this.cached?.snapshot === snapshot) this.cached = undefined;
      });
    }
    return this.cached.snapshot;
  }

  /** The last snapshot built, without waiting (what a request that just awaited `snapshot()` saw). */
  latest(): Snapshot | undefined {
    return this.built;
  }

  private async build(): Promise<Snapshot> {
    const [rows, pinRows, toolsetRows] = await Promise.all([
      this.store.db.selectFrom('servers').selectAll().execute(),
      this.store.db.selectFrom('tool_pins').selectAll().execute(),
      this.store.db.selectFrom('toolsets').selectAll().orderBy('name').execute(),
    ]);
    const overrides = new Map<string, OverrideRecord>();
    const pinsByServer = new Map<string, Map<string, PinView>>();
    const uiPinsByServer = new Map<string, Map<string, PinView>>();
    /** Prompts whose pin is in force (`pinned`), per server: only they are listed and served. */
    const pinnedPrompts = new Map<string, Map<string, PinView>>();
    for (const row of pinRows) {
      if (row.kind === 'prompt') {
        if (row.state !== 'pinned') continue;
        let pins = pinnedPrompts.get(row.server_id);
        if (!pins) {
          pins = new Map();
          pinnedPrompts.set(row.server_id, pins);
        }
        pins.set(row.tool_name, toPinView(row));
        continue;
      }
      if (row.kind === 'resource') {
        let pins = uiPinsByServer.get(row.server_id);
        if (!pins) {
          pins = new Map();
          uiPinsByServer.set(row.server_id, pins);
        }
        pins.set(row.tool_name, toPinView(row));
        continue;
      }
      if (row.kind === OVERRIDE_KIND) {
        overrides.set(`${row.server_id}/${row.tool_name}`, toOverrideRecord(row));
        continue;
      }
      if (row.kind !== 'tool') continue;
      let pins = pinsByServer.get(row.server_id);
      if (!pins) {
        pins = new Map();
        pinsByServer.set(row.server_id, pins);
      }
      pins.set(row.tool_name, toPinView(row));
    }
    const servers = new Map<string, HubServer>();
    for (const row of rows) {
      const detail = toDetail(row);
      const pins = pinsByServer.get(row.id) ?? new Map<string, PinView>();
      const names = exposeNames(
        row.id,
        detail.discoveredTools.map((t) => t.name),
        this.toolNameMax,
      );
      const tools = new Map<string, HubTool>();
      const toolsByName = new Map<string, HubTool>();
      for (const definition of detail.discoveredTools) {
        const exposed = names.get(definition.name);
        if (exposed === undefined) continue; // a collision no re-hashing resolved: left out, never shadowed
        const pin = pins.get(definition.name);
        let verdict = toolVerdict(classifyTool(detail.toolPolicy, definition.name), pin);
        const override = appliedOverride(overrides.get(`${row.id}/${definition.name}`), definition, pin);
        // An override whose fixed argument the tool lost quarantines the tool: never call it without the value.
        if (override?.state === 'quarantined' && isUsable(verdict)) verdict = 'quarantined';
        const tool: HubTool = {
          exposed,
          serverId: row.id,
          name: definition.name,
          definition,
          verdict,
          pin,
          autoName: exposed,
          ...(override ? { override } : {}),
        };
        tools.set(tool.exposed, tool);
        toolsByName.set(tool.name, tool);
      }
      // A prompt without a pin in force (new, changed, never pinned) is quarantined: neither listed nor served.
      const approvedPrompts = pinnedPrompts.get(row.id);
      const promptList = (detail.discoveredPrompts as Prompt[]).filter((p) => approvedPrompts?.has(p.name));
      const promptNames = exposeNames(
        row.id,
        promptList.map((p) => p.name),
        this.toolNameMax,
      );
      const prompts = new Map<string, HubPrompt>();
      for (const prompt of promptList) {
        const exposed = promptNames.get(prompt.name);
        if (exposed === undefined) continue;
        const pin = approvedPrompts?.get(prompt.name) as PinView;
        prompts.set(exposed, { exposed, serverId: row.id, name: prompt.name, prompt, pin });
      }
      const perUser = detail.auth.type === 'oauth' && detail.auth.mode === 'per-user';
      const discovered = identityOf(row.discover);
      // A per-user server's instructions are those of the account its handshake ran with: not passed on.
      const { instructions: _instructions, ...shared } = discovered;
      const identity = perUser ? shared : discovered;
      servers.set(row.id, {
        row,
        detail,
        exposure: new Set(detail.exposure),
        tools,
        toolsByName,
        prompts,
        resources: perUser ? [] : (detail.discoveredResources as Resource[]),
        perUser,
        identity,
        uiPins: uiPinsByServer.get(row.id) ?? new Map(),
        offersUi: offersUi(identity, detail),
      });
    }
    const snapshot = new Snapshot(servers, (row) => this.records.connectionOf(row), this.authorizer);
    applyDisplayNames(snapshot);
    for (const toolsetRow of toolsetRows) snapshot.toolsets.set(toolsetRow.name, toToolset(toolsetRow));
    this.built = snapshot;
    return snapshot;
  }
}

/** Whether an upstream offers MCP Apps: the extension declared, a `ui://` resource listed, or a tool naming one. */
function offersUi(identity: UpstreamIdentity, detail: ServerDetail): boolean {
  if (identity.extensions?.[UI_EXTENSION] !== undefined) return true;
  if (
    (detail.discoveredResources as { uri?: unknown }[]).some(
      (r) => typeof r?.uri === 'string' && r.uri.startsWith('ui://'),
    )
  )
    return true;
  return detail.discoveredTools.some((tool) => uiResourceOf(tool as { _meta?: unknown }) !== undefined);
}

/** A quarantined tool's reason: its pin's, or `override` when its override lost a fixed argument. */
export function quarantineReason(tool: HubTool): string | undefined {
  if (tool.pin?.state === 'quarantined') return tool.pin.reason ?? 'new';
  if (tool.override?.state === 'quarantined') return 'override';
  return tool.pin?.reason ?? undefined;
}

/**
 * An override checked against the tool as it stands: every fixed argument must still be declared by the
 * pinned schema (and by the definition the handshake last saw); one that is gone quarantines the override.
 */
function appliedOverride(
  record: OverrideRecord | undefined,
  definition: DiscoveredTool,
  pin: PinView | undefined,
): AppliedOverride | undefined {
  if (!record) return undefined;
  const missing = new Set(missingArguments(record.override, definition.inputSchema));
  if (pin?.definition)
    for (const name of missingArguments(record.override, pin.definition.inputSchema)) missing.add(name);
  return missing.size > 0
    ? { record, state: 'quarantined', reason: 'argument_removed', missing: [...missing].sort() }
    : { record, state: 'active' };
}

/**
 * Display names join the collision check (an override's name is used whether it is in force or quarantined): one that equals another tool's aggregated name or another
 * override's display name is not used (both parties keep their `<server>__<tool>` names, never one
 * shadowing another), and the override says `name_conflict`. Deterministic for a given registry.
 */
function applyDisplayNames(snapshot: Snapshot): void {
  const autoNames = new Set<string>();
  const wanted = new Map<HubTool, string>();
  for (const server of snapshot.servers.values()) {
    for (const tool of server.tools.values()) {
      autoNames.add(tool.autoName);
      // A quarantined override keeps its name: agents calling it read why it waits, not "not found".
      const displayName = tool.override?.record.override.displayName;
      if (displayName !== undefined && displayName !== tool.autoName) wanted.set(tool, displayName);
    }
  }
  const granted = grantDisplayNames(autoNames, wanted);
  for (const tool of wanted.keys()) {
    const displayName = granted.get(tool);
    if (displayName === undefined) {
      if (tool.override) tool.override = { ...tool.override, reason: 'name_conflict' };
      continue;
    }
    const server = snapshot.servers.get(tool.serverId) as HubServer;
    const byExposed = server.tools as Map<string, HubTool>;
    byExposed.delete(tool.autoName);
    tool.exposed = displayName;
    byExposed.set(displayName, tool);
    snapshot.renamed.set(displayName, tool);
  }
}
