/**
 * `POST /api/mcp/import`: registers the servers of an MCP client's config (its `mcpServers`/`servers`
 * object, read by `gatehouse import` or the dashboard). Every entry is planned first (`planImport`):
 * registered, a duplicate of an installed server, or refused with the reason. `dryRun` answers the plan
 * only. Literal env and header values are sealed by the registry as they arrive; the answer names them,
 * never shows them.
 */
import { z } from 'zod';
import { GatehouseError } from '../errors.js';
import { type ImportItem, planImport } from '../importing/plan.js';
import type { Registry } from '../registry/service.js';
import type { SettingsService } from '../settings/service.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;

const importBody = z.strictObject({
  /** The client's server list as it is in its file (entries are read leniently and checked one by one). */
  servers: z.record(z.string().min(1).max(200), z.unknown()).refine((s) => Object.keys(s).length <= 200, {
    message: 'at most 200 entries',
  }),
  /** Plan only: register nothing. */
  dryRun: z.boolean().default(false),
});

export interface ImportRouteDeps {
  registry: Registry;
  settings: SettingsService;
}

/** An item as answered: the record to install stays inside. */
const shown = ({ server: _server, ...item }: ImportItem) => item;

export function importRoutes({ registry, settings }: ImportRouteDeps): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'POST',
      url: '/api/mcp/import',
      summary:
        "Register the servers of an MCP client's config (mcpServers/servers): literal env and header values sealed, stdio commands held to stdio.allowedCommands, duplicates skipped; dryRun plans only.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_import', tier: 'gated' },
      body: importBody,
      async handler({ body, principal }) {
        const installed = (await registry.records.all()).map((s) => ({
          id: s.id,
          url: s.url,
          command: s.command,
          args: s.args,
        }));
        const allowed = (await settings.current())['stdio.allowedCommands'];
        const items = planImport(body.servers, installed, allowed);
        let registered = 0;
        if (!body.dryRun) {
          for (const item of items) {
            if (item.action !== 'register' || !item.server) continue;
            try {
              await registry.install(item.server, principal);
              registered += 1;
            } catch (error) {
              // Refused at install (the list changed meanwhile, the id was taken): said per entry.
              item.action = 'refused';
              item.reason = error instanceof GatehouseError ? `${error.code}: ${error.message}` : 'install failed';
            }
          }
        }
        return { dryRun: body.dryRun, items: items.map(shown), registered };
      },
    }),
  ];
}
