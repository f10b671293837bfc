/**
 * The registry: every change to a server record goes through here, so each
 * one writes its audit event, its server event and its stream event.
 */

import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { type ErrorCode, findGatehouseError, GatehouseError, isGatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import { listPins, type PinView, pinStates, reconcilePins } from '../policy/pin-store.js';
import type { PinnableItem } from '../policy/pins.js';
import { assertToolPolicy, classifyTool, type ToolPolicy } from '../policy/tool-policy.js';
import { type ToolVerdict, toolVerdict } from '../policy/verdicts.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import type { ServerTable } from '../store/schema.js';
import { missingConfiguration } from './configuration.js';
import type { HandshakeResult, Handshaker } from './handshake.js';
import { hasUrlCredentials } from './manifest.js';
import {
  type ConfigPatch,
  type Connection,
  type DiscoveredTool,
  type NewServer,
  type ServerDetail,
  type ServerStore,
  type ServerView,
  toDetail,
  toView,
} from './records.js';
import type { StateProbe } from './state.js';

/** Why a background refresh ran: the upstream said a list changed, or its watch reconnected. */
export type RefreshTrigger = 'list_changed' | 'reconnected';

export interface TestResult {
  ok: boolean;
  latencyMs: number;
  discoveredTools: DiscoveredTool[];
  discoveredToolsCount: number;
  verdicts: Record<string, ToolVerdict>;
  error: { code: string; message: string } | null;
  /** What may not work though the handshake did (e.g. `stdio.workspace_root_unwritable`); `servers test` only. */
  warnings?: TestWarning[];
}

/** A typed warning of `servers test`. */
export interface TestWarning {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
}

export interface ServerEvent {
  id: number;
  kind: string;
  message: string;
  data: unknown;
  at: string;
}

/** The verdict of each tool, by the same rule the hub applies (`toolVerdict`): what an operator previews is what agents get. */
export function verdictsFor(
  policy: ToolPolicy,
  tools: readonly { name: string }[],
  pins: Map<string, PinView>,
): Record<string, ToolVerdict> {
  const verdicts: Record<string, ToolVerdict> = {};
  for (const tool of tools) verdicts[tool.name] = toolVerdict(classifyTool(policy, tool.name), pins.get(tool.name));
  return verdicts;
}

export class Registry {
  /** Told of every tool a handshake quarantines for its schema (the gateway counts them on /metrics). */
  onSchemaRefused: ((reason: 'schema_too_large' | 'unsafe_schema') => void) | undefined;
  /** What `servers test` warns of besides the handshake (a stdio server's unwritable workspace roots). */
  testWarnings: ((row: ServerTable) => TestWarning[]) | undefined;

  constructor(
    private readonly store: Store,
    readonly records: ServerStore,
    private readonly audit: AuditLog,
    private readonly events: EventHub,
    private readonly handshaker: Handshaker,
    private readonly probe: StateProbe,
    /** Refuses a stdio command outside `stdio.allowedCommands` (`stdio.command_not_allowed`). */
    private readonly checkCommand: (command: string) => Promise<void> = async () => {},
  ) {}

  /** OAuth servers' bearer tokens (src/upstream-auth), set at assembly: a handshake carries the grant. */
  authorizer: ((row: ServerTable, principal: Principal | undefined) => Promise<string | undefined>) | undefined;

  /** The connection facts of a handshake: the record's, plus its OAuth grant (shared, or the tester's own). */
  private async handshakeConnection(row: ServerTable, actor: Principal | undefined): Promise<Connection> {
    const connection = this.records.connectionOf(row);
    if (connection.transport === 'stdio' || !this.authorizer) return connection;
    let token: string | undefined;
    try {
      token = await this.authorizer(row, actor);
    } catch (error) {
      // The record's status says OAuth is the problem: auth_required (no grant to use) or auth_failed.
      const found = findGatehouseError(error);
      const code = found?.code;
      // A fixed message, never the refusal's own: it lands in `lastError`, the server's events and the
      // status stream, which everyone who reads the record sees, and must never carry anyone's link.
      if (code === 'auth.user_required') {
        const message = `"${row.id}" connects each user's own account; this handshake ran for no user.`;
        throw new GatehouseError('auth_required', message, { reason: code });
      }
      if (code === 'auth.connect_required') {
        const why = found?.details?.reason === 'needs_reconnect' ? 'needs_reconnect' : 'not_connected';
        throw new GatehouseError('auth_required', `connect your account to "${row.id}" first (${why}).`, {
          reason: code,
        });
      }
      throw error;
    }
    if (token === undefined) return connection;
    return { ...connection, headers: { ...connection.headers, authorization: `Bearer ${token}` } };
  }

  async install(input: NewServer, actor: Principal | undefined): Promise<ServerDetail> {
    refuseUrlCredentials(input.url);
    assertSandboxChange(input.options?.sandbox, actor);
    if (input.transport === 'stdio' && input.command) await this.checkCommand(input.command);
    const installed = await this.records.insert(input);
    await this.changed('server.install', installed.id, actor, {
      transport: installed.transport,
      sourceKind: installed.sourceKind,
    });
    return installed;
  }

  async uninstall(id: string, actor: Principal | undefined): Promise<void> {
    await this.records.remove(id);
    await this.store.db.deleteFrom('server_events').where('server_id', '=', id).execute();
    this.probe.forget(id);
    await this.audit.recordAdmin({ action: 'server.uninstall', actor, serverId: id });
    await this.events.publish('server.changed', { id, change: 'uninstalled' });
  }

  async list(page: { limit: number; offset: number }): Promise<{ servers: ServerView[]; total: number }> {
    const { servers, total } = await this.records.list(page);
    const withState = await Promise.all(
      servers.map(async (s) => ({ ...s, state: await this.probe.stateOf(s), ...this.sandboxFlag(s) })),
    );
    return { servers: withState, total };
  }

  /** `sandboxed` on a stdio server's view (the dashboard's "sandbox off" badge). */
  private sandboxFlag(server: ServerView): { sandboxed?: boolean } {
    const sandboxed = this.probe.sandboxedOf(server);
    return sandboxed === undefined ? {} : { sandboxed };
  }

  async detail(id: string): Promise<ServerDetail & { state: string; pins: PinView[] }> {
    const server = await this.records.get(id);
    return {
      ...server,
      state: await this.probe.stateOf(server),
      ...this.sandboxFlag(server),
      pins: await listPins(this.store.db, id),
    };
  }

  async configure(id: string, patch: ConfigPatch, actor: Principal | undefined): Promise<ServerDetail> {
    if (patch.privateNetwork !== undefined && actor?.role !== 'admin') {
      throw new GatehouseError('forbidden', 'Only an admin may change privateNetwork.');
    }
    refuseUrlCredentials(patch.url);
    assertSandboxChange(patch.options?.sandbox, actor);
    if (patch.command !== undefined) {
      const row = await this.records.getRow(id);
      if (row.transport === 'stdio') await this.checkCommand(patch.command);
    }
    const updated = await this.records.patchConfig(id, patch);
    this.probe.forget(id);
    // Names of the changed fields and keys only: values may be secrets.
    const fields = Object.fromEntries(
      Object.entries(patch).map(([field, value]) => [
        field,
        value && typeof value === 'object' && !Array.isArray(value) ? Object.keys(value) : true,
      ]),
    );
    await this.changed('server.configure', id, actor, { fields });
    return updated;
  }

  async setToolPolicy(id: string, policy: ToolPolicy, actor: Principal | undefined): Promise<ServerDetail> {
    assertToolPolicy(policy);
    const updated = await this.records.setToolPolicy(id, policy);
    await this.changed('server.tools', id, actor, { policy });
    return updated;
  }

  async setExposure(id: string, groups: string[], actor: Principal | undefined): Promise<ServerDetail> {
    const updated = await this.records.setExposure(id, groups);
    await this.changed('server.exposure', id, actor, { groups });
    return updated;
  }

  /** The handshake an operator asks for: connect, list tools/prompts/resources, store the status, reconcile the pins. */
  async test(id: string, actor: Principal | undefined): Promise<TestResult> {
    const row = await this.records.getRow(id);
    // Not started at all: without its variables or arguments it could only fail (or half-work).
    const missing = missingConfiguration(toView(row));
    if (missing) throw new GatehouseError('needs_configuration', `${id}: ${missing}`);
    const result = await this.handshake(row, { actor, action: 'server.test' });
    if (!result) throw new GatehouseError('internal_error', 'The handshake ended without a result.');
    let warnings: TestWarning[] = [];
    try {
      warnings = this.testWarnings?.(row) ?? [];
    } catch {
      // A warning that cannot be worked out is not a failed test.
    }
    return { ...result, warnings };
  }

  /**
   * The same handshake, run in the background because the upstream said a list changed (or its
   * watch reconnected and may have missed that): lists stored, changed tools quarantined, agents
   * told. Only for a server whose first handshake pinned its tools — trust on first use stays an
   * operator's act — and, for a stdio server, only over its running process (never a process of its
   * own). A refresh that finds everything as it was leaves no trace but the record's test time, so
   * a chatty upstream cannot flood the audit trail or the agents. Aborting `signal` abandons it
   * without touching the record.
   */
  async refresh(id: string, trigger: RefreshTrigger, signal?: AbortSignal): Promise<TestResult | undefined> {
    const row = await this.records.getRow(id);
    if (row.pinned_at === null || row.enabled !== 1) return undefined;
    return this.handshake(row, { actor: undefined, action: 'server.refresh', trigger, ...(signal && { signal }) });
  }

  private async handshake(
    row: ServerTable,
    why: {
      actor: Principal | undefined;
      action: 'server.test' | 'server.refresh';
      trigger?: RefreshTrigger;
      signal?: AbortSignal;
    },
  ): Promise<TestResult | undefined> {
    const { actor, action, signal } = why;
    const trigger = why.trigger === undefined ? {} : { trigger: why.trigger };
    const id = row.id;
    const started = performance.now();
    let outcome: HandshakeResult | undefined | GatehouseError;
    try {
      outcome = await this.handshaker.handshake(row, await this.handshakeConnection(row, actor), {
        runningOnly: action === 'server.refresh',
        ...(signal && { signal }),
      });
    } catch (error) {
      outcome = isGatehouseError(error)
        ? error
        : new GatehouseError('internal_error', 'The handshake failed unexpectedly.');
    }
    if (outcome === undefined || signal?.aborted) return undefined;
    const latencyMs = Math.round(performance.now() - started);
    const policy = toDetail(row).toolPolicy;

    if (outcome instanceof GatehouseError) {
      const lastError = `${outcome.code}: ${outcome.message}`;
      await this.records.update(id, (r) => {
        r.status = 'failed';
        r.last_error = lastError;
        r.last_tested_at = nowIso();
        r.latency_ms = latencyMs;
      });
      await this.serverEvent(id, 'handshake', `Handshake failed: ${lastError}`, { ok: false, code: outcome.code });
      await this.audit.recordAdmin({
        action,
        actor,
        serverId: id,
        data: { ok: false, code: outcome.code, ...trigger },
      });
      await this.events.publish('server.status', { id, status: 'failed', lastError });
      const known = parseJson<DiscoveredTool[]>(row.discovered_tools, []);
      return {
        ok: false,
        latencyMs,
        discoveredTools: known,
        discoveredToolsCount: known.length,
        verdicts: verdictsFor(policy, known, await pinStates(this.store.db, id)),
        error: { code: outcome.code, message: outcome.message },
      };
    }

    const result = outcome;
    // A name the upstream lists twice is served once: its pins judge every copy (`reconcilePins`).
    const tools = firstOfEachName(result.tools);
    const prompts = firstOfEachName(result.prompts);
    let pinChanges: Awaited<ReturnType<typeof reconcilePins>> = [];
    await this.records.update(
      id,
      (r) => {
        r.status = 'connected';
        r.last_error = null;
        r.last_tested_at = nowIso();
        r.latency_ms = latencyMs;
        r.protocol_era = result.era;
        r.discover = result.discover === undefined ? null : JSON.stringify(result.discover);
        r.discovered_tools = JSON.stringify(tools);
        r.discovered_prompts = JSON.stringify(prompts);
        r.discovered_resources = JSON.stringify(result.resources);
      },
      async (trx, r: ServerTable) => {
        const pinning = { firstHandshake: r.pinned_at === null, trustNewTools: r.trust_new_tools === 1 };
        pinChanges = [
          ...(await reconcilePins(trx, id, result.tools, pinning)),
          // Prompts are pinned like tools: a changed or new one waits for review, unlisted and unserved.
          ...(await reconcilePins(trx, id, promptItems(result.prompts), { ...pinning, kind: 'prompt' })),
          // MCP Apps UI resources: first sight pins one (what it may do is bounded by the tool naming it, whose
          // `_meta.ui` is pinned); a changed one is quarantined with its diff and not served until approved.
          ...(await reconcilePins(trx, id, result.uiResources ?? [], {
            firstHandshake: true,
            trustNewTools: false,
            kind: 'resource',
          })),
        ];
        if (r.pinned_at === null)
          await trx.updateTable('servers').set({ pinned_at: nowIso() }).where('id', '=', id).execute();
      },
    );
    const answer = async (): Promise<TestResult> => ({
      ok: true,
      latencyMs,
      discoveredTools: tools,
      discoveredToolsCount: tools.length,
      verdicts: verdictsFor(policy, tools, await pinStates(this.store.db, id)),
      error: null,
    });
    const sameLists =
      row.status === 'connected' &&
      row.protocol_era === result.era &&
      row.discovered_tools === JSON.stringify(tools) &&
      row.discovered_prompts === JSON.stringify(prompts) &&
      row.discovered_resources === JSON.stringify(result.resources);
    if (action === 'server.refresh' && sameLists && pinChanges.length === 0) {
      // Nothing changed: the test time above is the only trace (no events, no audit row, no agent told).
      return answer();
    }
    const quarantined = pinChanges.filter((c) => c.change === 'quarantined');
    const opening = why.trigger === undefined ? 'Connected' : `Lists refreshed (${why.trigger})`;
    await this.serverEvent(id, 'handshake', `${opening}: ${tools.length} tools in ${latencyMs} ms.`, {
      ok: true,
      tools: tools.length,
      quarantined: quarantined.map((q) => q.tool),
      ...trigger,
    });
    await this.audit.recordAdmin({
      action,
      actor,
      serverId: id,
      data: { ok: true, tools: tools.length, ...trigger },
    });
    await this.events.publish('server.status', { id, status: 'connected', discoveredToolsCount: tools.length });
    for (const q of quarantined) {
      // Its own audit event, as an approval has: who was using the tool needs to find when it was pulled.
      await this.audit.recordAdmin({
        action: `${q.kind ?? 'tool'}.quarantine`,
        actor: undefined,
        serverId: id,
        tool: q.tool,
        data: { reason: q.reason, handshake: action, ...(q.kind ? { kind: q.kind } : {}), ...trigger },
      });
      await this.events.publish('tool.quarantined', {
        server: id,
        tool: q.tool,
        reason: q.reason,
        ...(q.kind ? { kind: q.kind } : {}),
      });
      if (q.reason === 'schema_too_large' || q.reason === 'unsafe_schema') this.onSchemaRefused?.(q.reason);
    }
    return answer();
  }

  async logs(id: string, limit: number): Promise<ServerEvent[]> {
    await this.records.getRow(id);
    const rows = await this.store.db
      .selectFrom('server_events')
      .selectAll()
      .where('server_id', '=', id)
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      id: Number(r.id),
      kind: r.kind,
      message: r.message,
      data: parseJson(r.data, null),
      at: r.at,
    }));
  }

  async serverEvent(id: string, kind: string, message: string, data?: Record<string, unknown>): Promise<void> {
    await this.store.db
      .insertInto('server_events')
      .values({ server_id: id, kind, message, data: data ? JSON.stringify(data) : null, at: nowIso() })
      .execute();
    await this.events.publish('server.event', { id, kind, message });
  }

  private async changed(
    action: string,
    id: string,
    actor: Principal | undefined,
    data: Record<string, unknown>,
  ): Promise<void> {
    await this.audit.recordAdmin({ action, actor, serverId: id, data });
    await this.serverEvent(id, 'config', `${action} by ${actor?.name ?? 'system'}`, { action });
    await this.events.publish('server.changed', { id, change: action });
  }
}

/** The prompts of a handshake that can be pinned: objects with a string name (anything else is never served). */
function promptItems(prompts: readonly unknown[]): PinnableItem[] {
  return prompts.filter(
    (p): p is PinnableItem => p !== null && typeof p === 'object' && typeof (p as { name?: unknown }).name === 'string',
  );
}

/** A stdio server's sandbox (off, its network, extra read-only paths) is changed by an admin only. */
function assertSandboxChange(sandbox: unknown, actor: Principal | undefined): void {
  if (sandbox === undefined || actor?.role === 'admin') return;
  throw new GatehouseError('forbidden', "Only an admin may set or change a stdio server's sandbox.");
}

/**
 * A server's URL is stored, shown and exported as it is; headers and auth are sealed. So credentials in the
 * URL (`https://user:secret@host/mcp`) are refused on every way in (REST, config file, import), as a
 * manifest's URL already was.
 */
function refuseUrlCredentials(url: string | null | undefined): void {
  if (!url || !hasUrlCredentials(url)) return;
  const message =
    'Credentials in the URL are refused; give them as a header or bearer auth instead (those are sealed).';
  throw new GatehouseError('validation_error', message, {
    issues: [{ path: 'url', message }],
    reason: 'credentials_in_url',
  });
}

/** The first item of each name, in order: what the hub serves of a list that repeats a name. */
function firstOfEachName<T>(items: readonly T[]): T[] {
  const seen = new Set<unknown>();
  return items.filter((item) => {
    const name = (item as { name?: unknown } | null)?.name;
    if (seen.has(name)) return false;
    seen.add(name);
    return true;
  });
}
