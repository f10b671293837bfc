/**
 * Per-tool overrides over REST (issue 22): a display name, a replaced or appended description, arguments
 * hidden behind fixed values, annotations. Checked against the tool's pinned definition when set;
 * recorded beside the pin (`src/overrides/store.ts`) with the server's policy version bumped, so
 * approvals made under the old override end `out_of_scope` instead of running with other values.
 */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { findGatehouseError, GatehouseError } from '../errors.js';
import { overrideSchema, type ToolOverride } from '../overrides/model.js';
import { deleteOverride, getOverride, listOverrides, type OverrideRecord, putOverride } from '../overrides/store.js';
import type { ArgumentValidator } from '../policy/arguments.js';
import { serverIdSchema } from '../registry/ids.js';
import type { Registry } from '../registry/service.js';
import type { Store } from '../store/db.js';
import type { HubRegistry, HubTool, Snapshot } from '../surfaces/hub/view.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;

const idParams = z.strictObject({ id: serverIdSchema });
const toolParams = z.strictObject({ id: serverIdSchema, tool: z.string().min(1).max(256) });

export interface OverrideRouteDeps {
  store: Store;
  audit: AuditLog;
  events: EventHub;
  registry: Registry;
  hub: HubRegistry;
  validator: ArgumentValidator;
}

/** An override with its state now: in force, or quarantined (a fixed argument the tool lost), and its names. */
export function overrideView(record: OverrideRecord, snapshot: Snapshot) {
  const tool = snapshot.servers.get(record.serverId)?.toolsByName.get(record.tool);
  const applied = tool?.override;
  return {
    ...record,
    // The fields at the top too, as the PUT takes them: an approval card's diff reads them from here.
    ...record.override,
    state: tool ? (applied?.state ?? 'active') : 'tool_missing',
    ...(applied?.reason ? { reason: applied.reason } : {}),
    ...(applied?.missing ? { missingArguments: applied.missing } : {}),
    aggregatedName: tool?.autoName ?? null,
    exposedName: tool?.exposed ?? null,
  };
}

/** The tool's pinned input schema: an override is checked against what was approved, never a pending definition. */
function pinnedSchema(tool: HubTool): unknown {
  const definition = tool.pin?.definition;
  if (!definition) {
    throw new GatehouseError(
      'conflict',
      `Tool "${tool.name}" has no pinned definition yet (it waits for review); approve it before overriding it.`,
      { server: tool.serverId, tool: tool.name },
    );
  }
  return definition.inputSchema ?? { type: 'object' };
}

function invalid(message: string, path: string, details: Record<string, unknown> = {}): GatehouseError {
  return new GatehouseError('override.invalid', message, { ...details, issues: [{ path, message }] });
}

/** Checks an override against the tool's pinned schema and the aggregate's names. */
export function checkOverride(override: ToolOverride, tool: HubTool, snapshot: Snapshot, validator: ArgumentValidator) {
  const schema = pinnedSchema(tool) as { properties?: Record<string, unknown>; required?: unknown };
  const fixed = override.fixedArguments ?? {};
  const properties = schema.properties ?? {};
  for (const name of Object.keys(fixed)) {
    if (!Object.hasOwn(properties, name)) {
      throw invalid(`The pinned schema of ${tool.name} has no argument "${name}".`, `body.fixedArguments.${name}`);
    }
  }
  if (Object.keys(fixed).length > 0) {
    try {
      // The fixed values alone against the pinned schema (what the agent still gives is not required here).
      validator.validate(`override:${tool.pin?.pinHash}`, { ...schema, required: [] }, fixed);
    } catch (error) {
      const known = findGatehouseError(error);
      if (known?.code !== 'tool.invalid_arguments') throw error;
      throw new GatehouseError('override.invalid', `A fixed value does not fit the pinned schema: ${known.message}`, {
        ...known.details,
      });
    }
  }
  const { displayName } = override;
  if (displayName !== undefined && displayName !== tool.autoName) {
    for (const server of snapshot.servers.values()) {
      for (const other of server.tools.values()) {
        if (other === tool) continue;
        const takes =
          other.autoName === displayName ||
          other.exposed === displayName ||
          other.override?.record.override.displayName === displayName;
        if (takes) {
          throw new GatehouseError(
            'override.name_taken',
            `"${displayName}" is already the name of ${other.autoName}.`,
            {
              displayName,
              takenBy: { server: other.serverId, tool: other.name },
            },
          );
        }
      }
    }
  }
}

export function overrideRoutes({
  store,
  audit,
  events,
  registry,
  hub,
  validator,
}: OverrideRouteDeps): RouteDeclaration[] {
  const toolOf = async (serverId: string, name: string): Promise<{ tool: HubTool; snapshot: Snapshot }> => {
    await registry.records.getRow(serverId); // 404 mcp.not_found
    const snapshot = await hub.snapshot();
    const tool = snapshot.servers.get(serverId)?.toolsByName.get(name);
    if (!tool) {
      throw new GatehouseError('not_found', `Server "${serverId}" has no tool "${name}".`, {
        server: serverId,
        tool: name,
      });
    }
    return { tool, snapshot };
  };
  /** Writes (or drops) the override and bumps the policy version in one transaction, then tells everyone. */
  const write = async (
    serverId: string,
    tool: string,
    action: 'override.set' | 'override.delete',
    fn: (trx: Parameters<typeof putOverride>[0]) => Promise<void>,
    actor: Parameters<AuditLog['recordAdmin']>[0]['actor'],
    data: Record<string, unknown>,
  ) => {
    await registry.records.update(
      serverId,
      (row) => {
        row.policy_version += 1;
      },
      fn,
    );
    await audit.recordAdmin({ action, actor, serverId, tool, data });
    await registry.serverEvent(serverId, 'config', `${action} on ${tool} by ${actor?.name ?? 'system'}`, {
      action,
      tool,
    });
    await events.publish('server.changed', { id: serverId, change: action, tool });
  };
  return [
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers/:id/overrides',
      summary:
        "A server's tool overrides (display name, description, fixed arguments, annotations), each with its state (active, quarantined when a fixed argument is gone, tool_missing).",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_override_list', tier: 'autonomousRead' },
      params: idParams,
      query: pageQuery,
      async handler({ params, query }) {
        await registry.records.getRow(params.id);
        const all = await listOverrides(store.db, params.id);
        const snapshot = await hub.snapshot();
        const page = all.slice(query.offset, query.offset + query.limit);
        return listAnswer(
          'overrides',
          page.map((r) => overrideView(r, snapshot)),
          all.length,
        );
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers/:id/overrides/:tool',
      summary: "One tool's override and its state.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_override_get', tier: 'autonomousRead' },
      params: toolParams,
      async handler({ params }) {
        await registry.records.getRow(params.id);
        const record = await getOverride(store.db, params.id, params.tool);
        if (!record) {
          throw new GatehouseError('not_found', `Tool "${params.tool}" of "${params.id}" has no override.`, {
            server: params.id,
            tool: params.tool,
          });
        }
        return overrideView(record, await hub.snapshot());
      },
    }),
    defineRoute({
      method: 'PUT',
      url: '/api/mcp/servers/:id/overrides/:tool',
      summary:
        "Set a tool's override (replacing any): displayName (its aggregated name, unique, ≤ 64), description with descriptionMode replace|append, fixedArguments (hidden from agents, injected on every call, checked against the pinned schema), annotations.",
      scope: 'servers',
      access: MANAGERS,
      mcp: {
        tool: 'mcp_server_override_set',
        tier: 'autonomousWrite',
        // What is sent upstream changes with a fixed argument: that field gates the whole request.
        fields: {
          displayName: 'autonomousWrite',
          description: 'autonomousWrite',
          descriptionMode: 'autonomousWrite',
          annotations: 'autonomousWrite',
          fixedArguments: 'gated',
        },
        current: 'mcp_server_override_get',
        // Leaving fixedArguments out of a PUT removes the ones set: as gated as the DELETE that removes them.
        replaces: true,
      },
      params: toolParams,
      body: overrideSchema,
      async handler({ params, body, principal }) {
        if (!principal) throw new GatehouseError('unauthorized');
        const { tool, snapshot } = await toolOf(params.id, params.tool);
        checkOverride(body, tool, snapshot, validator);
        await write(
          params.id,
          params.tool,
          'override.set',
          (trx) => putOverride(trx, params.id, params.tool, body, tool.pin?.pinHash ?? null, principal.id),
          principal,
          {
            ...(body.displayName !== undefined ? { displayName: body.displayName } : {}),
            fixedArguments: Object.keys(body.fixedArguments ?? {}),
            description: body.description !== undefined ? (body.descriptionMode ?? 'replace') : null,
            annotations: Object.keys(body.annotations ?? {}),
          },
        );
        const record = await getOverride(store.db, params.id, params.tool);
        if (!record) throw new GatehouseError('internal_error');
        return overrideView(record, await hub.snapshot());
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/mcp/servers/:id/overrides/:tool',
      summary:
        "Remove a tool's override: its aggregated name, description and schema are the upstream's again (a fixed argument becomes the agent's to give).",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_override_delete', tier: 'gated', current: 'mcp_server_override_get' },
      params: toolParams,
      async handler({ params, principal }) {
        await registry.records.getRow(params.id);
        let deleted = false;
        await write(
          params.id,
          params.tool,
          'override.delete',
          async (trx) => {
            deleted = await deleteOverride(trx, params.id, params.tool);
            if (!deleted) {
              throw new GatehouseError('not_found', `Tool "${params.tool}" of "${params.id}" has no override.`, {
                server: params.id,
                tool: params.tool,
              });
            }
          },
          principal,
          {},
        );
        return { deleted: params.tool };
      },
    }),
  ];
}
