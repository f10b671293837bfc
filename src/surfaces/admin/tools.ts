/**
 * The admin surface's tools, derived from the live route table: every REST
 * route declares a tool name and tier (or its exclusion), and this module turns
 * each declared route into a tool whose call signature is `{"args": {...}}` —
 * path arguments (required strings) merged with the route's own query or body
 * schema, converted from its zod schema so it cannot drift from what the route
 * accepts. Two routes claiming one name, or a route that is neither a tool nor
 * excluded, is an error at start.
 */
import type { Tool } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { RouteDeclaration, Scope, Tier } from '../../api/route.js';
import type { RouteTableEntry } from '../../app.js';
import { GatehouseError } from '../../errors.js';

export interface PathParam {
  name: string;
  /** In the route: `:name` or `*`. */
  routeName: string;
  /** May hold `/` between segments. */
  isPath: boolean;
}

export interface AdminTool {
  name: string;
  /** The route's tier; a call may be taken higher by its body fields (`callTier`). */
  tier: Tier;
  /** The tier of each body field, when the route declares them. */
  fieldTiers: Readonly<Record<string, Tier>> | undefined;
  scope: Scope;
  method: string;
  url: string;
  pathParams: PathParam[];
  /** Where the remaining arguments go. */
  argsIn: 'query' | 'body' | 'none';
  /** A list route: takes `fields` and `q` on top of its own `limit`/`offset`. */
  isList: boolean;
  /** Body schema is not an object: its value travels as `args.body`. */
  bodyWrapped: boolean;
  declaration: RouteDeclaration;
  definition: Tool;
}

/** Bare-list REST answers are wrapped as `{"<key>": [...], "count": n}` (hal0's `_LIST_TOOL_WRAP_KEY`). */
export const LIST_WRAP_KEYS: Readonly<Record<string, string>> = {};

type JsonSchema = { type?: string; properties?: Record<string, unknown>; required?: string[]; [k: string]: unknown };

function jsonSchemaOf(schema: z.ZodType | undefined): JsonSchema | undefined {
  if (!schema) return undefined;
  try {
    const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
      io: 'input',
      unrepresentable: 'any',
    }) as JsonSchema;
    return rest;
  } catch {
    return { type: 'object' };
  }
}

function pathParamsOf(route: RouteDeclaration): PathParam[] {
  const params: PathParam[] = [];
  for (const part of route.url.split('/')) {
    if (part.startsWith(':')) params.push({ name: part.slice(1), routeName: part.slice(1), isPath: false });
    else if (part === '*') params.push({ name: route.wildcard ?? 'path', routeName: '*', isPath: true });
  }
  return params;
}

const TIER_RANK: Record<Tier, number> = { autonomousRead: 0, autonomousWrite: 1, gated: 2 };

/** The tier one call is taken at: the route's, or higher for the body fields it carries (one gated field gates it whole). */
export function callTier(tool: AdminTool, args: Record<string, unknown>): Tier {
  let tier = tool.tier;
  if (!tool.fieldTiers) return tier;
  for (const key of Object.keys(args)) {
    const field = tool.fieldTiers[key];
    if (field && TIER_RANK[field] > TIER_RANK[tier]) tier = field;
  }
  return tier;
}

/** The body fields of a route, when its body is an object. */
function bodyFieldsOf(route: RouteDeclaration): string[] | undefined {
  const schema = route.body as { shape?: Record<string, unknown> } | undefined;
  return schema?.shape ? Object.keys(schema.shape) : undefined;
}

/** Why a route's per-field tiers do not cover its body exactly (a field without a tier, or a tier for no field). */
function fieldTierProblems(route: RouteDeclaration, name: string, fields: Readonly<Record<string, Tier>>): string[] {
  const body = bodyFieldsOf(route);
  if (!body) return [`${name} declares field tiers but its body has no fields`];
  const declared = Object.keys(fields);
  // A PUT replaces its record: leaving a gated field out clears it, which only `replaces` takes into account.
  const replaces = route.mcp && 'tool' in route.mcp && route.mcp.replaces === true;
  const unguardedPut =
    route.method === 'PUT' && !replaces && Object.values(fields).includes('gated')
      ? [`${name}: a PUT with gated fields must declare replaces (leaving one out clears it)`]
      : [];
  return [
    ...body.filter((f) => !declared.includes(f)).map((f) => `${name}: body field ${f} has no tier`),
    ...declared.filter((f) => !body.includes(f)).map((f) => `${name}: tier declared for ${f}, which its body lacks`),
    ...unguardedPut,
  ];
}

function toolOf(route: RouteDeclaration, name: string, tier: Tier, method: string): AdminTool {
  const fieldTiers = 'tool' in route.mcp ? route.mcp.fields : undefined;
  const pathParams = pathParamsOf(route);
  const argsIn =
    method === 'GET' || method === 'DELETE' ? (route.query ? 'query' : 'none') : route.body ? 'body' : 'none';
  const own = jsonSchemaOf(argsIn === 'query' ? route.query : argsIn === 'body' ? route.body : undefined);
  const bodyWrapped = own !== undefined && own.type !== 'object';
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const param of pathParams) {
    properties[param.name] = {
      type: ['string', 'integer'],
      description: param.isPath
        ? 'Path argument: segments separated by "/" (no empty, "." or ".." segment).'
        : 'Path argument: one URL segment (no "/", ".", "..", control or invisible characters).',
    };
    required.push(param.name);
  }
  if (bodyWrapped) {
    properties.body = own;
    required.push('body');
  } else if (own?.properties) {
    Object.assign(properties, own.properties);
    for (const key of own.required ?? []) if (!required.includes(key)) required.push(key);
  }
  const isList =
    argsIn === 'query' && own?.properties !== undefined && 'limit' in own.properties && 'offset' in own.properties;
  if (isList) {
    properties.fields = {
      type: 'string',
      description: 'Comma-separated keys to return for each item (id always stays).',
    };
    properties.q = { type: 'string', description: 'Case-insensitive substring filter over each item.' };
  }
  const argsSchema = {
    type: 'object',
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
  const definition: Tool = {
    name,
    description: `${route.summary} (${method} ${route.url}; tier ${tier}${gatedFieldsNote(fieldTiers, tier)})`,
    inputSchema: {
      type: 'object',
      properties: { args: argsSchema },
      required: ['args'],
      additionalProperties: false,
    } as Tool['inputSchema'],
    annotations: { readOnlyHint: tier === 'autonomousRead', destructiveHint: tier === 'gated' },
  };
  return {
    name,
    tier,
    fieldTiers,
    scope: route.scope,
    method,
    url: route.url,
    pathParams,
    argsIn,
    isList,
    bodyWrapped,
    declaration: route,
    definition,
  };
}

function gatedFieldsNote(fields: Readonly<Record<string, Tier>> | undefined, tier: Tier): string {
  const gated = Object.entries(fields ?? {})
    .filter(([, t]) => t === 'gated')
    .map(([f]) => f);
  return tier !== 'gated' && gated.length > 0 ? `; gated when it sets ${gated.join(', ')}` : '';
}

export interface AdminCatalog {
  tools: Map<string, AdminTool>;
  /** Tool name → `METHOD url` (hal0's TOOL_NAME_ALIASES). */
  aliases: Record<string, string>;
  tiers: Record<Tier, string[]>;
  excluded: { route: string; reason: string }[];
}

/** Builds the tool catalog from the route table; throws on a duplicate name or an undeclared route. */
export function buildAdminCatalog(table: readonly RouteTableEntry[]): AdminCatalog {
  const tools = new Map<string, AdminTool>();
  const excluded: { route: string; reason: string }[] = [];
  const problems: string[] = [];
  for (const entry of table) {
    const methods = (Array.isArray(entry.method) ? entry.method : [entry.method]).filter((m) => m !== 'HEAD');
    const label = `${methods.join(',')} ${entry.url}`;
    // Fastify's automatic HEAD twin of a GET route is the same route.
    if (entry.mcpEndpoint || methods.length === 0) continue;
    const route = entry.declaration;
    if (!route) {
      problems.push(`${label} declares neither an admin-surface tool nor an exclusion`);
      continue;
    }
    if ('exclude' in route.mcp) {
      excluded.push({ route: label, reason: route.mcp.exclude });
      continue;
    }
    if (tools.has(route.mcp.tool)) {
      problems.push(`${route.mcp.tool} is claimed by two routes`);
      continue;
    }
    if (route.mcp.fields) problems.push(...fieldTierProblems(route, route.mcp.tool, route.mcp.fields));
    tools.set(route.mcp.tool, toolOf(route, route.mcp.tool, route.mcp.tier, methods[0] as string));
  }
  if (problems.length > 0) throw new GatehouseError('internal_error', `Admin surface: ${problems.join('; ')}.`);
  const tiers: Record<Tier, string[]> = { autonomousRead: [], autonomousWrite: [], gated: [] };
  const aliases: Record<string, string> = {};
  for (const tool of [...tools.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    tiers[tool.tier].push(tool.name);
    aliases[tool.name] = `${tool.method} ${tool.url}`;
  }
  return { tools, aliases, tiers, excluded };
}
