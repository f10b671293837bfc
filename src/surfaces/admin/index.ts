/**
 * `/mcp/admin`: every declared REST route as an MCP tool, within the platform
 * scopes an administrator grants agents (read tools need `read` on their
 * route's scope, write and gated tools need `write`), switched on and off by
 * `mcp.adminEnabled` — all read per request, so a change applies to the very
 * next call. Gated tools wait in the hub's approval queue (surface `admin`).
 */
import type { ServerContext, Tool } from '@modelcontextprotocol/server';
import { Server } from '@modelcontextprotocol/server';
import type { FastifyInstance } from 'fastify';
import type { SurfaceGrants } from '../../api/grants.js';
import type { ApprovalExecutor, ApprovalQueue } from '../../approvals/queue.js';
import type { ApprovalView } from '../../approvals/types.js';
import type { CallOutcome } from '../../audit/calls.js';
import type { Config } from '../../config.js';
import { findGatehouseError, GatehouseError, isErrorCode } from '../../errors.js';
import type { Principal, TokenPrincipal } from '../../identity/index.js';
import type { Settings } from '../../settings/keys.js';
import type { Store } from '../../store/db.js';
import { VERSION } from '../../version.js';
import { McpEndpoint } from '../endpoint.js';
import { APPROVAL_STATUS_TOOL, auditedExecution, Gate, type GateAnswer, type GatePorts } from '../gate.js';
import { errorResult, jsonToolResult } from '../results.js';
import { invokeTool, resolvePath } from './invoke.js';
import { type AdminCatalog, type AdminTool, buildAdminCatalog, callTier } from './tools.js';

export type AccessLevel = 'off' | 'read' | 'write';

/** The caller's access to a scope; `platform` needs only the surface on. */
export function accessTo(settings: Settings, scope: string): AccessLevel {
  if (scope === 'platform') return 'read';
  const key = `mcp.scope.${scope}` as keyof Settings;
  const level = settings[key];
  return level === 'read' || level === 'write' ? level : 'off';
}

/** Whether a record's field holds anything a call could clear: not null, nor an empty string, list or object. */
function holdsSomething(value: unknown): boolean {
  if (value === undefined || value === null || value === '') return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'object') return Object.keys(value).length > 0;
  return true;
}

/** The tier a call is taken at; arguments that are not an object are refused later, at the route's tier. */
function tierOfCall(tool: AdminTool, rawArgs: unknown): AdminTool['tier'] {
  return rawArgs && typeof rawArgs === 'object' && !Array.isArray(rawArgs)
    ? callTier(tool, rawArgs as Record<string, unknown>)
    : tool.tier;
}

export function mayUse(tool: AdminTool, settings: Settings): boolean {
  const level = accessTo(settings, tool.scope);
  return tool.tier === 'autonomousRead' ? level !== 'off' : level === 'write';
}

export interface AdminSurfaceDeps extends GatePorts {
  config: Pick<Config, 'host' | 'hubAuth' | 'allowedOrigins' | 'allowedHosts' | 'maxBodySize'>;
  app: FastifyInstance;
  grants: SurfaceGrants;
  approvals: ApprovalQueue;
  /** Where 2025-era sessions are shared across replicas (PostgreSQL). */
  store?: Store;
}

export interface AdminSurface {
  /** Built once the app is ready (the route table is complete). */
  catalog(): AdminCatalog;
  endpoint: McpEndpoint;
  close(): Promise<void>;
}

function requesterOf(approval: { requester: { id: string; name: string } }): Principal {
  return { id: approval.requester.id, name: approval.requester.name, role: 'agent', groups: [] };
}

/** Mounts `/mcp/admin`; the catalog is derived from the live route table on first use. */
export function createAdminSurface(deps: AdminSurfaceDeps): AdminSurface {
  let built: AdminCatalog | undefined;
  const catalog = (): AdminCatalog => {
    built ??= buildAdminCatalog(deps.app.routeTable);
    return built;
  };

  /**
   * What an approval card shows of a call that changes a record: each field it sets, from what it is now
   * (the route's declared read, answered as the requester would see it) to what it will be — secrets masked.
   */
  const cardChanges = async (
    tool: AdminTool,
    principal: Principal,
    args: Record<string, unknown>,
  ): Promise<{ changes?: Record<string, { from: unknown; to: unknown }> }> => {
    const mcp = tool.declaration.mcp as Extract<AdminTool['declaration']['mcp'], { tool: string }>;
    if (!tool.fieldTiers) return {};
    const body = Object.fromEntries(Object.entries(args).filter(([key]) => key in (tool.fieldTiers ?? {})));
    const shown = mcp.shown ? mcp.shown(body) : body;
    const reader = mcp.current ? catalog().tools.get(mcp.current) : undefined;
    let before: Record<string, unknown> = {};
    if (reader) {
      const pathArgs = Object.fromEntries(reader.pathParams.map((p) => [p.name, args[p.name]]));
      const read = await invokeTool(deps.app, deps.grants, reader, principal, pathArgs, { level: 'read' });
      if (read.ok) before = read.body;
    }
    return {
      changes: Object.fromEntries(Object.entries(shown).map(([key, to]) => [key, { from: before[key] ?? null, to }])),
    };
  };

  /**
   * An admin call's arguments as every reader of its approval sees them, when its route declares secret
   * fields (`mcp.shown`): those masked. The queue then keeps the literal arguments sealed until the call runs.
   */
  const shownArguments = (tool: AdminTool | undefined, args: Record<string, unknown>) => {
    const mcp = tool?.declaration.mcp;
    if (!mcp || !('shown' in mcp) || !mcp.shown) return undefined;
    return { ...args, ...mcp.shown(args) };
  };

  /**
   * The tier a call is taken at: `tierOfCall`'s, or gated when its route's body replaces the record (`replaces`)
   * and leaves out a gated field in which the record holds something — the call would clear it. Read only for a
   * caller who may use the tool; a record that cannot be read gates the call (the safe side).
   */
  const tierNow = async (tool: AdminTool, principal: Principal, rawArgs: unknown): Promise<AdminTool['tier']> => {
    const tier = tierOfCall(tool, rawArgs);
    const mcp = tool.declaration.mcp;
    if (tier === 'gated' || !mcp || !('tool' in mcp) || !mcp.replaces || !tool.fieldTiers) return tier;
    if (!rawArgs || typeof rawArgs !== 'object' || Array.isArray(rawArgs)) return tier;
    const args = rawArgs as Record<string, unknown>;
    const cleared = Object.entries(tool.fieldTiers)
      .filter(([field, fieldTier]) => fieldTier === 'gated' && !Object.hasOwn(args, field))
      .map(([field]) => field);
    if (cleared.length === 0) return tier;
    const reader = mcp.current ? catalog().tools.get(mcp.current) : undefined;
    if (!reader) return 'gated';
    const pathArgs = Object.fromEntries(reader.pathParams.map((p) => [p.name, args[p.name]]));
    const read = await invokeTool(deps.app, deps.grants, reader, principal, pathArgs, { level: 'read' }).catch(
      () => undefined,
    );
    if (!read) return 'gated';
    if (!read.ok) {
      // No record (or path arguments the call's own check refuses next): nothing to clear.
      const code = (read.body.error as { code?: string } | undefined)?.code;
      return code === 'not_found' || code === 'validation_error' ? tier : 'gated';
    }
    return cleared.some((field) => holdsSomething(read.body[field])) ? 'gated' : tier;
  };

  const shown = (approval: ApprovalView) =>
    shownArguments(catalog().tools.get(approval.tool), approval.arguments) ?? approval.arguments;

  // Every known refusal is a result the agent reads, in hal0's error envelope.
  const gate = new Gate(deps, { surface: 'admin', refusal: errorResult, wrappedArgs: true });

  const run = async (principal: TokenPrincipal, name: string, rawArgs: unknown): Promise<GateAnswer> => {
    const tool = catalog().tools.get(name);
    const args = rawArgs as Record<string, unknown>;
    const tier =
      tool && mayUse(tool, await deps.settings.current()) ? await tierNow(tool, principal, rawArgs) : undefined;
    return gate.call({
      principal,
      name,
      arguments: rawArgs,
      auditedArguments: rawArgs && typeof rawArgs === 'object' ? shownArguments(tool, args) : undefined,
      resolve: (settings) =>
        tool && mayUse(tool, settings)
          ? { verdict: (tier ?? tierOfCall(tool, rawArgs)) === 'gated' ? 'gated' : 'allow', serverId: null, tool: name }
          : { verdict: 'unknown_tool', serverId: null },
      check: () => {
        if (!rawArgs || typeof rawArgs !== 'object' || Array.isArray(rawArgs)) {
          throw new GatehouseError('validation_error', 'Every admin tool takes {"args": {...}}.');
        }
        resolvePath(tool as AdminTool, args); // path arguments are checked before anything is queued or run
      },
      approval: async () => ({
        arguments: args,
        shownArguments: shownArguments(tool, args),
        pinHash: null,
        policyVersion: null,
        detail: {
          title: name,
          description: tool?.definition.description ?? '',
          ...(await cardChanges(tool as AdminTool, principal, args)),
        },
      }),
      run: async () => {
        const outcome = await invokeTool(deps.app, deps.grants, tool as AdminTool, principal, args, {
          level: tool?.tier === 'autonomousRead' ? 'read' : 'write',
        });
        if (outcome.ok) return { answer: jsonToolResult(outcome.body), outcome: 'ok' };
        const code = (outcome.body.error as { code?: CallOutcome } | undefined)?.code ?? 'tool_error';
        return { answer: { ...jsonToolResult(outcome.body), isError: true }, outcome: code };
      },
    });
  };

  const buildServer = (principal: TokenPrincipal): Server => {
    const server = new Server(
      { name: 'gatehouse-admin', version: VERSION },
      { capabilities: { tools: { listChanged: true } } },
    );
    server.setRequestHandler('tools/list', async () => {
      const settings = await deps.settings.current();
      const tools: Tool[] = [...catalog().tools.values()].filter((t) => mayUse(t, settings)).map((t) => t.definition);
      return { tools: [...tools, gate.statusTool] };
    });
    server.setRequestHandler('tools/call', async (request, _ctx: ServerContext) => {
      const { name } = request.params;
      const args = request.params.arguments ?? {};
      if (name === APPROVAL_STATUS_TOOL) return gate.approvalStatus(principal, args);
      return run(principal, name, (args as { args?: unknown }).args);
    });
    return server;
  };

  const endpoint = new McpEndpoint({
    host: deps.config.host,
    hubAuth: 'token', // the admin surface always needs a token, whatever the hub does
    allowedOrigins: deps.config.allowedOrigins,
    allowedHosts: deps.config.allowedHosts,
    maxBodySize: deps.config.maxBodySize,
    gate: async () =>
      (await deps.settings.current())['mcp.adminEnabled']
        ? undefined
        : new GatehouseError('not_found', 'No such MCP endpoint.'),
    buildServer: (principal) => buildServer(principal),
    ...(deps.store ? { sessionStore: { store: deps.store, surface: 'admin' } } : {}),
  });
  endpoint.route(deps.app, '/mcp/admin', () => ({ kind: 'aggregate' }));

  const executor: ApprovalExecutor = {
    async recheck(approval) {
      const tool = catalog().tools.get(approval.tool);
      if (!tool) return { ok: false, reason: `The admin tool ${approval.tool} no longer exists.` };
      if (!mayUse(tool, await deps.settings.current())) {
        return { ok: false, reason: `Agents no longer have write access to ${tool.scope}.` };
      }
      try {
        resolvePath(tool, approval.arguments);
      } catch (error) {
        return { ok: false, reason: findGatehouseError(error)?.message ?? 'Its path arguments are no longer valid.' };
      }
      return { ok: true };
    },
    execute: (approval) =>
      // Its call event carries the trace id of the call that waited, like the route's own audit rows.
      // The row keeps what the card showed (secrets masked), not the literal arguments it runs with.
      auditedExecution(deps.audit, 'admin', { ...approval, arguments: shown(approval) }, async () => {
        const tool = catalog().tools.get(approval.tool) as AdminTool;
        const outcome = await invokeTool(deps.app, deps.grants, tool, requesterOf(approval), approval.arguments, {
          level: 'write',
          approvalId: approval.id,
        });
        if (!outcome.ok) {
          // The route's own code is a catalogue code: the failed approval carries it, not a generic one.
          const error = outcome.body.error as { code?: string; message?: string };
          const code = isErrorCode(error.code) ? error.code : 'upstream_protocol_error';
          throw new GatehouseError(code, `${approval.tool} failed: ${error.message ?? error.code}`, {
            reason: error.code,
          });
        }
        return outcome.body;
      }),
  };
  deps.approvals.registerExecutor('admin', executor);

  return { catalog, endpoint, close: () => endpoint.close() };
}
