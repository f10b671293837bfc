/** The install catalog and the resolver: what could be installed, and what a `{url}` would install, before installing. */
import { z } from 'zod';
import type { EgressGuard } from '../egress/index.js';
import { type Catalog, type CatalogEntry, catalogNameSchema, categorySchema } from '../registry/catalog.js';
import { resolveInstallUrl, SPEC_MAX_LENGTH } from '../registry/manifest.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const listQuery = pageQuery.extend({
  q: z.string().trim().min(1).max(200).optional(),
  category: categorySchema.optional(),
});
// Catalog names contain `/`, so the route ends in a wildcard and the name is validated here.
const entryParams = z.strictObject({ '*': catalogNameSchema });
const resolveQuery = z.strictObject({ url: z.string().min(1).max(SPEC_MAX_LENGTH) });

export interface CatalogRouteDeps {
  catalog: Catalog;
  guard: Pick<EgressGuard, 'fetch'>;
  /** The ids and names of installed servers, so each entry says whether it is installed (and as which id). */
  installed?: () => Promise<ReadonlyArray<{ id: string; name: string }>>;
}

export function catalogRoutes(deps: CatalogRouteDeps): RouteDeclaration[] {
  const { catalog, guard } = deps;
  /** An entry is installed when a server has its name (a preset install keeps it) or the id it installs as. */
  const marked = async (items: readonly CatalogEntry[]) => {
    const servers = (await deps.installed?.()) ?? [];
    return items.map((entry) => {
      const id = catalog.toManifest(entry).id;
      const match = servers.find((s) => s.name.toLowerCase() === entry.name.toLowerCase() || s.id === id);
      return { ...entry, installed: match !== undefined, ...(match ? { installedAs: match.id } : {}) };
    });
  };
  return [
    defineRoute({
      method: 'GET',
      url: '/api/mcp/catalog',
      summary: 'List the catalog of well-known MCP servers, filtered by text (q) and category.',
      scope: 'servers',
      access: ['admin', 'operator'],
      mcp: { tool: 'mcp_catalog', tier: 'autonomousRead' },
      query: listQuery,
      async handler({ query }) {
        const { items, total } = catalog.list(query);
        return { ...listAnswer('items', await marked(items), total), categories: catalog.categories() };
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/catalog/*',
      summary: 'One catalog entry by its registry-style name (io.github.owner/server).',
      scope: 'servers',
      access: ['admin', 'operator'],
      mcp: { tool: 'mcp_catalog_get', tier: 'autonomousRead' },
      wildcard: 'name',
      params: entryParams,
      async handler({ params }) {
        const [entry] = await marked([catalog.preset(params['*'])]);
        return entry;
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/resolve',
      summary: 'Resolve an install spec or URL into the manifest an install would use, without installing it.',
      scope: 'servers',
      access: ['admin', 'operator'],
      mcp: { tool: 'mcp_resolve', tier: 'autonomousRead' },
      query: resolveQuery,
      handler({ query }) {
        return resolveInstallUrl(query.url, guard);
      },
    }),
  ];
}
