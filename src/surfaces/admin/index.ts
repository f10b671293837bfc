/**
 * `/mcp/admin`: every declared REST route as an MCP tool, within the platform
 * scopes an administrator grants agents (read tools need `read` on their
 * route's scope, write and gated tools need `write`), switched on and off by
 * `mcp.adminEnabled` — all read per request, so a change applies to the very
 * next call. Gated tools wait in the hub's approval queue (surface `admin`).
 */
import type { CallToolResult, ServerContext, Tool } from '@modelcontextprotocol/server';
import { Server } from '@modelcontextprotocol/server';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../../api/auth.js';
import type { SurfaceGrants } from '../../api/grants.js';
import type { TokenPrincipal } from '../../api/token-auth.js';
import type { ApprovalExecutor, ApprovalQueue } from '../../approvals/queue.js';
import type { CallOutcome } from '../../audit/calls.js';
import type { Config } from '../../config.js';
import { findGatehouseError, GatehouseError } from '../../errors.js';
import type { Settings } from '../../settings/keys.js';
import type { SettingsService } from '../../settings/service.js';
import { VERSION } from '../../version.js';
import { McpEndpoint } from '../endpoint.js';
import type { CallRecord } from '../hub/calls.js';
import { APPROVAL_STATUS_TOOL, approvalStatusTool } from '../hub/server.js';
import { errorResult, jsonToolResult, pendingApprovalResult, unknownTool } from '../results.js';
import { invokeTool, resolvePath } from './invoke.js';
import { type AdminCatalog, type AdminTool, buildAdminCatalog } from './tools.js';

export type AccessLevel = 'off' | 'read' | 'write';

/** The caller's access to a scope; `platform` needs only the surface on. */
export function accessTo(settings: Settings, scope: string): AccessLevel {
  if (scope === 'platform') return 'read';
  const key = `mcp.scope.${scope}` as keyof Settings;
  const level = settings[key];
  return level === 'read' || level === 'write' ? level : 'off';
}

export function mayUse(tool: AdminTool, settings: Settings): boolean {
  const level = accessTo(settings, tool.scope);
  return tool.tier === 'autonomousRead' ? level !== 'off' : level === 'write';
}

export interface AdminSurfaceDeps {
  config: Pick<Config, 'host' | 'hubAuth' | 'allowedOrigins' | 'allowedHosts' | 'maxBodySize'>;
  app: FastifyInstance;
  grants: SurfaceGrants;
  settings: SettingsService;
  approvals: ApprovalQueue;
  /** Resolves once the call's audit row is committed (never rejects): awaited before the answer leaves. */
  audit(record: Omit<CallRecord, 'surface'> & { surface: 'admin' }): Promise<void>;
}

export interface AdminSurface {
  /** Built once the app is ready (the route table is complete). */
  catalog(): AdminCatalog;
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

  const run = async (
    principal: TokenPrincipal,
    name: string,
    rawArgs: unknown,
    settings: Settings,
  ): Promise<CallToolResult> => {
    const started = performance.now();
    const tool = catalog().tools.get(name);
    const audit = (outcome: CallOutcome, verdict: CallRecord['verdict'], approvalId?: string) =>
      deps.audit({
        client: principal,
        surface: 'admin',
        serverId: null,
        tool: name,
        verdict,
        outcome,
        latencyMs: Math.round(performance.now() - started),
        requestBytes: Buffer.byteLength(JSON.stringify(rawArgs ?? {}) ?? ''),
        responseBytes: 0,
        arguments: rawArgs,
        ...(approvalId ? { approvalId } : {}),
      });
    if (!tool || !mayUse(tool, settings)) {
      await audit('unknown_tool', 'unknown_tool');
      throw unknownTool(name);
    }
    const verdict = tool.tier === 'gated' ? 'gated' : 'allow';
    try {
      if (!rawArgs || typeof rawArgs !== 'object' || Array.isArray(rawArgs)) {
        throw new GatehouseError('validation_error', 'Every admin tool takes {"args": {...}}.');
      }
      const args = rawArgs as Record<string, unknown>;
      resolvePath(tool, args); // path arguments are checked before anything is queued or run
      if (tool.tier === 'gated') {
        const approval = await deps.approvals.create({
          surface: 'admin',
          requester: principal,
          serverId: null,
          tool: name,
          exposedName: name,
          arguments: args,
          pinHash: null,
          policyVersion: null,
          detail: { title: name, description: tool.definition.description ?? '' },
        });
        await audit('pending_approval', verdict, approval.id);
        return pendingApprovalResult(
          approval.id,
          `${name} needs an operator's approval. Poll ${APPROVAL_STATUS_TOOL}.`,
        );
      }
      const outcome = await invokeTool(deps.app, deps.grants, tool, principal, args, {
        level: tool.tier === 'autonomousRead' ? 'read' : 'write',
      });
      await audit(outcome.ok ? 'ok' : ((outcome.body.error as { code?: CallOutcome })?.code ?? 'tool_error'), verdict);
      return outcome.ok ? jsonToolResult(outcome.body) : { ...jsonToolResult(outcome.body), isError: true };
    } catch (error) {
      const known = findGatehouseError(error);
      if (!known) throw error;
      await audit(known.code, verdict);
      return errorResult(known);
    }
  };

  const buildServer = (principal: TokenPrincipal): Server => {
    const server = new Server(
      { name: 'gatehouse-admin', version: VERSION },
      { capabilities: { tools: { listChanged: true } } },
    );
    server.setRequestHandler('tools/list', async () => {
      const settings = await deps.settings.current();
      const tools: Tool[] = [...catalog().tools.values()].filter((t) => mayUse(t, settings)).map((t) => t.definition);
      return { tools: [...tools, approvalStatusTool] };
    });
    server.setRequestHandler('tools/call', async (request, _ctx: ServerContext) => {
      const { name } = request.params;
      const args = request.params.arguments ?? {};
      if (name === APPROVAL_STATUS_TOOL) {
        const { approval_id: id, wait_s: wait } = args as { approval_id?: unknown; wait_s?: unknown };
        if (typeof id !== 'string')
          return errorResult(new GatehouseError('tool.invalid_arguments', 'approval_id must be a string.'));
        const waitS = typeof wait === 'number' && Number.isFinite(wait) ? Math.min(Math.max(wait, 0), 30) : 0;
        try {
          return jsonToolResult({ ...(await deps.approvals.status(id, principal, waitS)) });
        } catch (error) {
          const known = findGatehouseError(error);
          if (known) return errorResult(known);
          throw error;
        }
      }
      return run(principal, name, (args as { args?: unknown }).args, await deps.settings.current());
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
    async execute(approval) {
      const tool = catalog().tools.get(approval.tool) as AdminTool;
      const outcome = await invokeTool(deps.app, deps.grants, tool, requesterOf(approval), approval.arguments, {
        level: 'write',
        approvalId: approval.id,
      });
      if (!outcome.ok) {
        const error = outcome.body.error as { code?: string; message?: string };
        throw new GatehouseError(
          'upstream_protocol_error',
          `${approval.tool} failed: ${error.code}: ${error.message}`,
          {
            reason: error.code,
          },
        );
      }
      return outcome.body;
    },
  };
  deps.approvals.registerExecutor('admin', executor);

  return { catalog, close: () => endpoint.close() };
}
