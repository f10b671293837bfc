/**
 * Orientation routes under `/api/platform/` (HEAT's orientation tools): what
 * Gatehouse is, whether it is healthy, how much it holds, who the caller is,
 * and what the caller may do on the admin surface. Scope `platform`: on the
 * admin surface they need only the surface switched on.
 */
import { sql } from 'kysely';
import type { Settings } from '../settings/keys.js';
import type { SettingsService } from '../settings/service.js';
import type { Store } from '../store/db.js';
import { VERSION } from '../version.js';
import { defineRoute, type RouteDeclaration } from './route.js';

export interface PlatformDeps {
  store: Store;
  settings: SettingsService;
  opsEnabled: boolean;
  /** Access per scope and the admin tools it yields, for the caller's settings (from the admin surface). */
  capabilities(settings: Settings): { scopes: Record<string, string>; tools: string[] };
}

const READERS = ['admin', 'operator'] as const;

export const EXTERNAL_ENDPOINTS = [
  { path: '/mcp', purpose: 'the agent hub (Streamable HTTP, agent token)' },
  { path: '/mcp/admin', purpose: 'this admin surface' },
  { path: '/api/mcp/stream', purpose: 'live events (SSE; admin or operator token)' },
  { path: '/metrics', purpose: 'Prometheus metrics (admin token)' },
  { path: '/healthz', purpose: 'liveness' },
];

async function health(
  store: Store,
): Promise<{ status: 'ok' | 'degraded'; store: { kind: string; ok: boolean; latencyMs: number } }> {
  const started = performance.now();
  const ok = await sql`select 1`.execute(store.db).then(
    () => true,
    () => false,
  );
  return {
    status: ok ? 'ok' : 'degraded',
    store: { kind: store.kind, ok, latencyMs: Math.round(performance.now() - started) },
  };
}

async function counts(store: Store) {
  const count = async (table: 'servers' | 'tokens' | 'approvals', where?: [string, string]) => {
    let query = store.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n'));
    // biome-ignore lint/suspicious/noExplicitAny: a column name of one of three known tables
    if (where) query = query.where(where[0] as any, '=', where[1]);
    return Number((await query.executeTakeFirstOrThrow()).n);
  };
  return {
    servers: await count('servers'),
    serversConnected: await count('servers', ['status', 'connected']),
    approvalsPending: await count('approvals', ['status', 'pending']),
  };
}

export function platformRoutes(deps: PlatformDeps): RouteDeclaration[] {
  const surfaces = async () => {
    const settings = await deps.settings.current();
    return { hub: settings['mcp.hubEnabled'], admin: settings['mcp.adminEnabled'], ops: deps.opsEnabled };
  };
  const route = (path: string, tool: string, summary: string, handler: RouteDeclaration['handler']) =>
    defineRoute({
      method: 'GET',
      url: `/api/platform/${path}`,
      summary,
      scope: 'platform',
      access: READERS,
      mcp: { tool, tier: 'autonomousRead' },
      handler,
    });
  return [
    route(
      'status',
      'platform_status',
      'Start here: version, health, counts, enabled surfaces, and useful REST endpoints.',
      async () => ({
        name: 'gatehouse',
        version: VERSION,
        health: await health(deps.store),
        counts: await counts(deps.store),
        surfaces: await surfaces(),
        externalEndpoints: EXTERNAL_ENDPOINTS,
        next: 'agent_mcp_capabilities tells you which tools your scopes allow.',
      }),
    ),
    route('version', 'platform_version', 'Gatehouse name and version.', () => ({
      name: 'gatehouse',
      version: VERSION,
    })),
    route('health', 'platform_health', 'Health of the store behind Gatehouse.', () => health(deps.store)),
    route('summary', 'platform_summary', 'Counts: servers (and how many connected), pending approvals.', async () => ({
      counts: await counts(deps.store),
      surfaces: await surfaces(),
    })),
    route(
      'auth-context',
      'platform_auth_context',
      'Who the caller is: token id, name, role, groups, and scopes.',
      async ({ principal, request }) => ({
        id: principal?.id,
        name: principal?.name,
        role: principal?.role,
        groups: principal?.groups,
        via: request.surfaceGrant ? 'admin-surface' : 'rest',
        scopes: deps.capabilities(await deps.settings.current()).scopes,
      }),
    ),
    route(
      'capabilities',
      'agent_mcp_capabilities',
      'Effective access per scope and the admin tools it yields.',
      async () => deps.capabilities(await deps.settings.current()),
    ),
  ];
}
