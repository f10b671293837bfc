/**
 * `gatehouse servers <command> <id>` for every REST route of one server, generated from the same route
 * declarations that generate the admin surface (`buildAdminCatalog`): a route added to the server route
 * modules becomes a command by itself. Its name is the admin tool's without `mcp_server_` and `_write`
 * (`config`, `logs`, `process`, …; `tools` is `policy`, `exposure` is `expose`), its path arguments are
 * positional, and each field of its body or query is a `--flag` typed from the route's zod schema
 * (a JSON value where the field is an object; `NAME=VALUE` pairs where it is a map; repeatable for a list;
 * `null` removes a key). `--body <json|@file>` gives the whole body. A few shortcuts (`enable`, `disable`,
 * `auth`) are the same routes with the body filled in.
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { overrideRoutes } from '../api/overrides.js';
import { pinRoutes } from '../api/pins.js';
import { processRoutes } from '../api/processes.js';
import type { RouteDeclaration } from '../api/route.js';
import { serverRoutes } from '../api/servers.js';
import { upstreamAuthRoutes } from '../api/upstream-auth.js';
import type { RouteTableEntry } from '../app.js';
import { GatehouseError } from '../errors.js';
import { type AdminTool, buildAdminCatalog } from '../surfaces/admin/tools.js';
import { anyOAuthFlag, type OAuthFlags, oauthAuthOf, withOAuthFlags } from './oauth-flags.js';
import type { RestClient } from './rest-client.js';

type JsonSchema = {
  type?: string | string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  description?: string;
};

/** How a flag's text becomes the field's value. */
type Kind = 'string' | 'number' | 'boolean' | 'list' | 'map' | 'json';

const PREFIX = 'mcp_server_';
/** Where the derived name would read badly. */
const RENAMED: Readonly<Record<string, string>> = {
  tools: 'policy',
  exposure: 'expose',
  uninstall: 'remove',
  auth_get: 'auth_status',
};

/** The command a server route becomes: `mcp_server_tools_write` → `policy`, `mcp_server_logs` → `logs`. */
export function commandNameOf(tool: string): string {
  const base = tool.slice(PREFIX.length).replace(/_write$/, '');
  return (RENAMED[base] ?? base).replaceAll('_', '-');
}

/**
 * The routes of one server (`/api/mcp/servers/:id…`) as the admin surface sees them. Only the
 * declarations are read, never a handler: the route factories are given dependencies that refuse use.
 */
export function serverRouteTools(): AdminTool[] {
  // biome-ignore lint/suspicious/noExplicitAny: inert dependencies, never called in the CLI
  const inert: any = new Proxy(
    {},
    {
      get: () => () => {
        throw new GatehouseError('internal_error', 'A route handler ran inside the CLI.');
      },
    },
  );
  const routes: RouteDeclaration[] = [
    ...serverRoutes(inert),
    ...processRoutes(inert),
    ...pinRoutes(inert),
    ...overrideRoutes(inert),
    ...upstreamAuthRoutes(inert),
  ];
  return toolsOf(routes).filter((t) => t.url.startsWith('/api/mcp/servers/:id') && t.name.startsWith(PREFIX));
}

export function toolsOf(routes: readonly RouteDeclaration[]): AdminTool[] {
  const table: RouteTableEntry[] = routes.map((r) => ({
    method: r.method,
    url: r.url,
    declaration: r,
    mcpEndpoint: false,
  }));
  return [...buildAdminCatalog(table).tools.values()];
}

function kindOf(schema: JsonSchema | undefined): Kind {
  if (!schema) return 'json';
  const variants = (schema.anyOf ?? schema.oneOf ?? [schema]).filter(
    (s) => !(s.type === 'null' || (Array.isArray(s.type) && s.type.length === 1 && s.type[0] === 'null')),
  );
  if (variants.length !== 1) return 'json';
  const only = variants[0] as JsonSchema;
  const type = Array.isArray(only.type) ? only.type.filter((t) => t !== 'null') : [only.type];
  if (type.length !== 1) return 'json';
  switch (type[0]) {
    case 'string':
      return 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array':
      return 'list';
    case 'object':
      return only.properties === undefined && typeof only.additionalProperties === 'object' ? 'map' : 'json';
    default:
      return 'json';
  }
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
/** Flags the client owns: a field with one of these names is given as `--set-<name>` (the config's `url`). */
const CLIENT_FLAGS = new Set(['url', 'token', 'timeout-ms', 'json', 'body', 'help']);
const flagOf = (field: string) => (CLIENT_FLAGS.has(kebab(field)) ? `set-${kebab(field)}` : kebab(field));
const camelOfFlag = (name: string) => name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** One flag's text as the field's value; `null` removes a key wherever the route takes null. */
function parseFlag(field: string, kind: Kind, text: string, previous: unknown): unknown {
  if (text === 'null') return null;
  const json = (): unknown => {
    try {
      return JSON.parse(text);
    } catch {
      throw new GatehouseError('validation_error', `--${flagOf(field)} takes JSON here, not "${text}".`);
    }
  };
  switch (kind) {
    case 'string':
      return text;
    case 'number': {
      const n = Number(text);
      if (text.trim() === '' || !Number.isFinite(n)) {
        throw new GatehouseError('validation_error', `--${flagOf(field)} takes a number, not "${text}".`);
      }
      return n;
    }
    case 'boolean':
      if (text === 'true' || text === 'false') return text === 'true';
      throw new GatehouseError('validation_error', `--${flagOf(field)} takes true or false, not "${text}".`);
    case 'list':
      if (text.startsWith('[')) return json();
      return [...(Array.isArray(previous) ? previous : []), text];
    case 'map': {
      if (text.startsWith('{')) return json();
      const at = text.indexOf('=');
      if (at < 1) throw new GatehouseError('validation_error', `--${flagOf(field)} takes NAME=VALUE, not "${text}".`);
      const map = previous && typeof previous === 'object' ? (previous as Record<string, unknown>) : {};
      const raw = text.slice(at + 1);
      return { ...map, [text.slice(0, at)]: raw === 'null' ? null : raw };
    }
    default:
      return /^[[{"]|^(true|false|null|-?\d)/.test(text) ? json() : text;
  }
}

function hint(kind: Kind): string {
  return {
    string: '',
    number: ' (a number)',
    boolean: ' (true|false)',
    list: ' (repeatable, or a JSON list)',
    map: ' (NAME=VALUE, repeatable)',
    json: ' (JSON)',
  }[kind];
}

async function bodyFlag(text: string): Promise<Record<string, unknown>> {
  let raw = text;
  if (text.startsWith('@')) {
    try {
      raw = await readFile(text.slice(1), 'utf8');
    } catch (error) {
      const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new GatehouseError('validation_error', `Cannot read ${text.slice(1)} (${reason}).`);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new GatehouseError('validation_error', '--body takes a JSON object (or @file holding one).');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new GatehouseError('validation_error', '--body takes a JSON object.');
  }
  return parsed as Record<string, unknown>;
}

/** The request a generated command makes: path filled from the positional arguments, the rest as body or query. */
export function requestOf(
  tool: AdminTool,
  positional: readonly string[],
  fields: Record<string, unknown>,
): { method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; path: string; body?: unknown } {
  let index = 0;
  const path = tool.url
    .split('/')
    .map((part) => (part.startsWith(':') || part === '*' ? encodeURIComponent(positional[index++] ?? '') : part))
    .join('/');
  const method = tool.method as 'GET' | 'POST' | 'PATCH' | 'DELETE';
  if (tool.argsIn === 'query') {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(fields)) query.set(k, typeof v === 'string' ? v : JSON.stringify(v));
    const qs = query.toString();
    return { method, path: qs ? `${path}?${qs}` : path };
  }
  if (tool.argsIn === 'body') return { method, path, body: fields };
  return { method, path };
}

interface Output {
  client(flags: Record<string, unknown>): RestClient;
  print(value: unknown, flags: Record<string, unknown>): void;
}

/** A shortcut: a generated route with part of its body given. */
interface Shortcut {
  name: string;
  tool: string;
  description: string;
  configure?(command: Command): Command;
  body(flags: Record<string, unknown>): Promise<Record<string, unknown>> | Record<string, unknown>;
}

export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

const SHORTCUTS: readonly Shortcut[] = [
  {
    name: 'enable',
    tool: 'mcp_server_config_write',
    description: 'Enable a server (PATCH …/config {"enabled": true}).',
    body: () => ({ enabled: true }),
  },
  {
    name: 'disable',
    tool: 'mcp_server_config_write',
    description: 'Disable a server: no calls reach it; a stdio child is stopped (PATCH …/config {"enabled": false}).',
    body: () => ({ enabled: false }),
  },
  {
    name: 'auth',
    tool: 'mcp_server_config_write',
    description:
      "Set an HTTP server's auth (PATCH …/config {auth}): `none`; `bearer` with the token from --token-env (a reference) or --token-stdin (sealed); or `oauth` with --mode shared|per-user (then connect it: auth-connect).",
    configure: (command) =>
      withOAuthFlags(
        command
          .argument('<type>', 'none | bearer | oauth')
          .option(
            '--token-env <NAME>',
            'bearer: an env reference the gateway resolves (secret prefix, e.g. MCP_SECRET_X)',
          )
          .option('--token-stdin', 'bearer: read the token from stdin (sealed on arrival; never on the command line)')
          .option('--mode <mode>', 'oauth: shared (one grant for every agent) | per-user (each person connects)'),
      ),
    async body(flags) {
      const type = flags.type;
      if (type === 'oauth') return { auth: await oauthAuthOf(flags as OAuthFlags, readStdin) };
      if (flags.mode !== undefined || anyOAuthFlag(flags as OAuthFlags)) {
        throw new GatehouseError(
          'validation_error',
          'The OAuth flags (--mode, --grant, --client-id, …) go with oauth.',
        );
      }
      if (type === 'none') return { auth: { type: 'none' } };
      if (type !== 'bearer') {
        throw new GatehouseError('validation_error', `auth takes none, bearer or oauth, not "${type}".`);
      }
      if (flags.tokenEnv !== undefined && flags.tokenStdin) {
        throw new GatehouseError('validation_error', 'Give one of --token-env and --token-stdin.');
      }
      if (flags.tokenEnv !== undefined) return { auth: { type: 'bearer', token: { env: flags.tokenEnv } } };
      if (flags.tokenStdin) {
        const token = await readStdin();
        if (!token) throw new GatehouseError('validation_error', 'No token on stdin.');
        return { auth: { type: 'bearer', token } };
      }
      throw new GatehouseError('validation_error', 'bearer needs --token-env <NAME> or --token-stdin.');
    },
  },
];

/**
 * Adds a command per server route that `taken` (the hand-written commands) does not already name, and
 * the shortcuts. `withClientFlags` adds --url/--token/--timeout-ms/--json.
 */
export function addRouteCommands(
  servers: Command,
  tools: readonly AdminTool[],
  taken: ReadonlySet<string>,
  withClientFlags: (command: Command) => Command,
  out: Output,
): string[] {
  const added: string[] = [];
  const byName = new Map(tools.map((t) => [t.name, t]));
  for (const tool of tools) {
    const name = commandNameOf(tool.name);
    if (taken.has(name)) continue;
    const own = (tool.definition.inputSchema.properties as { args: JsonSchema }).args.properties ?? {};
    const pathNames = tool.pathParams.map((p) => p.name);
    const command = servers.command(name).description(`${tool.declaration.summary} (${tool.method} ${tool.url})`);
    for (const param of pathNames) command.argument(`<${param}>`);
    const kinds = new Map<string, Kind>();
    for (const [field, schema] of Object.entries(own)) {
      if (pathNames.includes(field)) continue;
      const kind = kindOf(schema);
      kinds.set(field, kind);
      const flag = flagOf(field);
      const choices = (schema.anyOf ?? schema.oneOf ?? [schema]).flatMap((s) => s.enum ?? []);
      const description = `${schema.description ?? field}${choices.length > 0 ? ` (one of ${choices.join(', ')})` : hint(kind)}`;
      command.option(`--${flag} <value>`, description, (text: string, previous: unknown) =>
        parseFlag(field, kind, text, previous),
      );
    }
    if (tool.argsIn === 'body') command.option('--body <json>', 'the whole body as JSON, or @file (flags win)');
    withClientFlags(command).action(async (...received: unknown[]) => {
      const positional = received.slice(0, pathNames.length) as string[];
      const flags = received[pathNames.length] as Record<string, unknown>;
      const fields: Record<string, unknown> = flags.body ? await bodyFlag(flags.body as string) : {};
      for (const field of kinds.keys()) {
        const value = flags[camelOfFlag(flagOf(field))];
        if (value !== undefined) fields[field] = value;
      }
      const request = requestOf(tool, positional, fields);
      out.print(await out.client(flags).request(request.method, request.path, request.body), flags);
    });
    added.push(name);
  }
  for (const shortcut of SHORTCUTS) {
    const tool = byName.get(shortcut.tool);
    if (!tool || taken.has(shortcut.name)) continue;
    const pathNames = tool.pathParams.map((p) => p.name);
    let command = servers.command(shortcut.name).description(shortcut.description);
    for (const param of pathNames) command.argument(`<${param}>`);
    command = shortcut.configure?.(command) ?? command;
    withClientFlags(command).action(async (...received: unknown[]) => {
      const positional = received.slice(0, pathNames.length) as string[];
      const extra = received.slice(pathNames.length, -2) as string[];
      const flags = { ...(received[received.length - 2] as Record<string, unknown>), type: extra[0] };
      const request = requestOf(tool, positional, await shortcut.body(flags));
      out.print(await out.client(flags).request(request.method, request.path, request.body), flags);
    });
    added.push(shortcut.name);
  }
  return added;
}
