/**
 * `POST /api/mcp/import`: registers the servers of an MCP client's config (its `mcpServers`/`servers`
 * object, read by `gatehouse import`, or the whole file's text as pasted in the dashboard's Import screen).
 * Every entry is planned first (`planImport`): registered, a duplicate of an installed server, or refused
 * with the reason. `dryRun` answers the plan only. Literal env and header values are sealed by the registry
 * as they arrive; the answer names them, never shows them.
 *
 * `POST /api/mcp/import/rewrite`: the client's file rewritten to reach those servers through the hub (the
 * imported entries removed, the hub's entry merged in by `gatehouse connect`'s writers), answered as TEXT
 * for the dashboard to show and copy. The gateway writes no client file, by design: the client's file is
 * usually on the user's machine, not the gateway's host, and a REST route that writes files on the gateway's
 * host would let any admin or operator token (or an agent through the admin surface) change what the gateway
 * user's MCP clients launch — a command line in Claude Desktop's config is code run at its next start. Only
 * the CLI (`gatehouse import --rewrite`, run by the user on the machine that holds the file) writes, with a
 * backup that is restored if the write fails. The answer is the caller's own text with the imported entries
 * (whose values Gatehouse has sealed) taken out; it is excluded from the admin surface. For the same reason
 * the REST API offers no detection of client files on the gateway's host: the dashboard takes a paste.
 */
import { z } from 'zod';
import { CLIENT_IDS, CLIENTS } from '../cli/connect/clients.js';
import { GatehouseError } from '../errors.js';
import { serversOf } from '../importing/clients.js';
import { type ImportItem, planImport } from '../importing/plan.js';
import { rewriteConfig } from '../importing/rewrite.js';
import { reachesSelf } from '../importing/self.js';
import type { Registry } from '../registry/service.js';
import type { SettingsService } from '../settings/service.js';
import { shownEnvValue } from '../upstream/stdio/env.js';
import { entryName, wiringInput } from './connect.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;

/** A client config file's text, as pasted (JSON with comments is fine). */
const configText = z.string().min(1).max(1_000_000);
const PASTED = 'the pasted config';

const importBody = z
  .strictObject({
    /** The client's server list as it is in its file (entries are read leniently and checked one by one). */
    servers: z
      .record(z.string().min(1).max(200), z.unknown())
      .refine((s) => Object.keys(s).length <= 200, {
        message: 'at most 200 entries',
      })
      .optional(),
    /** Or the whole file's text: its `mcpServers` (VS Code: `servers`) object is read, as `gatehouse import` does. */
    config: configText.optional(),
    /** Plan only: register nothing. */
    dryRun: z.boolean().default(false),
  })
  .refine((b) => (b.servers === undefined) !== (b.config === undefined), {
    message: 'give either servers or config',
    path: ['servers'],
  });

const rewriteBody = z.strictObject({
  /** Whose file it is: the shape of the hub's entry (Windsurf has no writer: its entry is added by hand). */
  client: z.enum(CLIENT_IDS),
  /** The file's text as the client has it. */
  config: configText,
  /** The entries the hub now serves (registered by the import, or installed already): removed from the file. */
  moved: z.array(z.string().min(1).max(200)).max(200),
  /** The hub's entry name. */
  name: entryName.default('gatehouse'),
});

export interface ImportRouteDeps {
  registry: Registry;
  settings: SettingsService;
  /** This gateway as its clients reach it (`GATEHOUSE_PUBLIC_URL`, or where it listens). */
  baseUrl(): string;
  /** Where this gateway listens: an entry pointing there is Gatehouse itself. */
  listening(): { host: string; port: number };
}

/**
 * A client entry's secret-bearing fields (env and header values) masked, everything else as given; an env
 * variable that decides what code runs (`loadsCode`) is shown, its URLs' credentials masked, as on an install's card.
 */
function maskEntry(entry: unknown): unknown {
  if (!entry || typeof entry !== 'object' || Array.isArray(entry)) return entry;
  const masked: Record<string, unknown> = { ...(entry as Record<string, unknown>) };
  for (const field of ['env', 'headers']) {
    const values = masked[field];
    if (values && typeof values === 'object' && !Array.isArray(values)) {
      masked[field] = Object.fromEntries(
        Object.entries(values).map(([name, value]) => [
          name,
          (field === 'env' ? shownEnvValue(name, value) : undefined) ?? { set: true },
        ]),
      );
    }
  }
  return masked;
}

/**
 * An import as its approval card shows it (an agent's `mcp_server_import` waits for an operator): each
 * entry's command, args and URL as given, its env and header values masked; the pasted file itself is not
 * shown, its entries are. The literal arguments stay sealed until the approved call runs.
 */
function showImportBody(body: Record<string, unknown>): Record<string, unknown> {
  const { config, servers, ...rest } = body;
  let entries = servers as Record<string, unknown> | undefined;
  if (typeof config === 'string') {
    try {
      entries = serversOf(config, PASTED);
    } catch {
      entries = undefined; // refused when it runs, with the reason
    }
  }
  return {
    ...rest,
    ...(entries && typeof entries === 'object'
      ? { servers: Object.fromEntries(Object.entries(entries).map(([name, entry]) => [name, maskEntry(entry)])) }
      : {}),
    ...(typeof config === 'string' ? { config: `(a pasted file of ${config.length} characters, not shown)` } : {}),
  };
}

/** An item as answered: the record to install stays inside. */
const shown = ({ server: _server, ...item }: ImportItem) => item;

export function importRoutes({ registry, settings, baseUrl, listening }: ImportRouteDeps): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'POST',
      url: '/api/mcp/import',
      summary:
        "Register the servers of an MCP client's config (mcpServers/servers, or the file's text as config): literal env and header values sealed, stdio commands held to stdio.allowedCommands, duplicates skipped; dryRun plans only.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_import', tier: 'gated', shown: showImportBody },
      body: importBody,
      async handler({ body, principal }) {
        const installed = (await registry.records.all()).map((s) => ({
          id: s.id,
          url: s.url,
          command: s.command,
          args: s.args,
        }));
        const allowed = (await settings.current())['stdio.allowedCommands'];
        const entries = body.servers ?? serversOf(body.config as string, PASTED);
        const own = { publicUrl: baseUrl(), ...listening() };
        const items = planImport(entries, installed, allowed, (url) => reachesSelf(url, own));
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
    defineRoute({
      method: 'POST',
      url: '/api/mcp/import/rewrite',
      summary:
        "An imported client's config rewritten to reach its servers through the hub (imported entries removed, the hub's entry merged in), answered as text to copy; the gateway writes no file.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { exclude: "a dashboard aid that echoes the caller's own file; an agent has no client file to rewrite" },
      body: rewriteBody,
      handler({ body }) {
        const spec = CLIENTS[body.client];
        const input = wiringInput(baseUrl(), body.client, body.name);
        // Parsed first so a file without a server list is said in words (as the import says it).
        serversOf(body.config, PASTED);
        const rewrite = rewriteConfig(body.config, PASTED, body.client, body.moved, input);
        return {
          client: body.client,
          label: spec.label,
          usualPath: spec.usualPath,
          hubUrl: input.hubUrl,
          text: rewrite.text,
          changes: rewrite.changes,
          note: spec.tokenNote(input, undefined, false),
        };
      },
    }),
  ];
}
