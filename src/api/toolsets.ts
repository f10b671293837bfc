/**
 * Toolsets over REST (issue 22): named, curated sets of tools from several servers, each served at
 * `/mcp/t/{name}`. Answers show every entry's state now (available, quarantined, missing, …), so a
 * toolset naming a tool that disappeared or waits for review says so instead of failing.
 */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { GatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import type { Store } from '../store/db.js';
import type { HubRegistry, Snapshot } from '../surfaces/hub/view.js';
import { type Toolset, toolsetNameSchema, toolsetToolsSchema } from '../toolsets/model.js';
import { ToolsetStore } from '../toolsets/store.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;

const nameParams = z.strictObject({ name: toolsetNameSchema });
const descriptionSchema = z.string().max(2000).nullable().optional();
const createBody = z.strictObject({
  name: toolsetNameSchema,
  description: descriptionSchema,
  tools: toolsetToolsSchema,
});
const replaceBody = z.strictObject({ description: descriptionSchema, tools: toolsetToolsSchema });

export interface ToolsetRouteDeps {
  store: Store;
  audit: AuditLog;
  events: EventHub;
  hub: HubRegistry;
}

/** A toolset with each entry's state, and where agents reach it. */
export function toolsetView(toolset: Toolset, snapshot: Snapshot) {
  const tools = snapshot.toolsetEntries(toolset);
  return {
    ...toolset,
    path: `/mcp/t/${toolset.name}`,
    tools,
    available: tools.filter((t) => t.state === 'available').length,
  };
}

export function toolsetRoutes({ store, audit, events, hub }: ToolsetRouteDeps): RouteDeclaration[] {
  const toolsets = new ToolsetStore(store);
  const changed = async (action: string, name: string, actor: Principal | undefined, data: Record<string, unknown>) => {
    await audit.recordAdmin({ action, actor, data: { toolset: name, ...data } });
    // `server.changed` is what connected agents' list_changed follows (no `id`: no server's record changed).
    await events.publish('server.changed', { toolset: name, change: action });
  };
  const viewOf = async (toolset: Toolset) => toolsetView(toolset, await hub.snapshot());
  return [
    defineRoute({
      method: 'GET',
      url: '/api/toolsets',
      summary:
        'Toolsets: named sets of tools from several servers, each served at /mcp/t/{name}, with each entry’s state.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'toolset_list', tier: 'autonomousRead' },
      query: pageQuery,
      async handler({ query }) {
        const { toolsets: page, total } = await toolsets.list(query);
        const snapshot = await hub.snapshot();
        return listAnswer(
          'toolsets',
          page.map((t) => toolsetView(t, snapshot)),
          total,
        );
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/toolsets/:name',
      summary:
        'One toolset: its tools, each with its state now (available, quarantined with its reason, blocked, excluded, missing, server_missing, server_disabled).',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'toolset_get', tier: 'autonomousRead' },
      params: nameParams,
      async handler({ params }) {
        return viewOf(await toolsets.get(params.name));
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/toolsets',
      summary:
        'Create a toolset from tools of several servers ({server, tool} by upstream name). Policy stays per server: a toolset lets no one past a verdict.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'toolset_create', tier: 'autonomousWrite' },
      body: createBody,
      status: 201,
      async handler({ body, principal }) {
        if (!principal) throw new GatehouseError('unauthorized');
        const created = await toolsets.create(body.name, body, principal.id);
        await changed('toolset.create', body.name, principal, { tools: body.tools.length });
        return viewOf(created);
      },
    }),
    defineRoute({
      method: 'PUT',
      url: '/api/toolsets/:name',
      summary: "Replace a toolset's tools (and description).",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'toolset_update', tier: 'autonomousWrite', current: 'toolset_get' },
      params: nameParams,
      body: replaceBody,
      async handler({ params, body, principal }) {
        if (!principal) throw new GatehouseError('unauthorized');
        const updated = await toolsets.replace(params.name, body, principal.id);
        await changed('toolset.update', params.name, principal, { tools: body.tools.length });
        return viewOf(updated);
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/toolsets/:name',
      summary: 'Delete a toolset: /mcp/t/{name} answers 404 from then on.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'toolset_delete', tier: 'gated', current: 'toolset_get' },
      params: nameParams,
      async handler({ params, principal }) {
        await toolsets.delete(params.name);
        await changed('toolset.delete', params.name, principal, {});
        return { deleted: params.name };
      },
    }),
  ];
}
