/**
 * Runs an admin tool: its route in-process (Fastify `inject`) as the calling
 * agent, under a single-use surface grant for the route's scope. Path
 * arguments are checked and encoded first; list answers take `fields` and `q`;
 * a bare-list answer is wrapped; an error answer becomes the error envelope.
 */
import type { FastifyInstance } from 'fastify';
import { GRANT_HEADER, type SurfaceGrants } from '../../api/grants.js';
import { GatehouseError } from '../../errors.js';
import type { Principal } from '../../identity/index.js';
import { encodePathArg } from './path-args.js';
import { type AdminTool, LIST_WRAP_KEYS } from './tools.js';

export type AdminArgs = Record<string, unknown>;

/** The URL path with every path argument checked and percent-encoded; throws mcp.invalid_arg / mcp.missing_arg. */
export function resolvePath(tool: AdminTool, args: AdminArgs): string {
  let url = tool.url;
  for (const param of tool.pathParams) {
    const encoded = encodePathArg(param.name, args[param.name], param.isPath);
    url = param.routeName === '*' ? url.replace('*', encoded) : url.replace(`:${param.routeName}`, encoded);
  }
  return url;
}

function queryString(values: AdminArgs): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined || value === null) continue;
    params.set(
      key,
      Array.isArray(value) ? value.join(',') : typeof value === 'object' ? JSON.stringify(value) : String(value),
    );
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

function itemsKey(body: Record<string, unknown>): string | undefined {
  return Object.keys(body).find((key) => Array.isArray(body[key]));
}

/** `fields` (id always stays) and `q` (substring over each item) on a list answer. */
function shapeList(
  body: Record<string, unknown>,
  fields: string | undefined,
  q: string | undefined,
): Record<string, unknown> {
  const key = itemsKey(body);
  if (!key) return body;
  let items = body[key] as unknown[];
  if (q) {
    const needle = q.toLowerCase();
    items = items.filter((item) => JSON.stringify(item).toLowerCase().includes(needle));
  }
  if (fields) {
    const keep = new Set([
      'id',
      ...fields
        .split(',')
        .map((f) => f.trim())
        .filter(Boolean),
    ]);
    items = items.map((item) =>
      item && typeof item === 'object' ? Object.fromEntries(Object.entries(item).filter(([k]) => keep.has(k))) : item,
    );
  }
  return { ...body, [key]: items, count: items.length, ...(q ? { total: items.length } : {}) };
}

export interface InvokeOutcome {
  ok: boolean;
  body: Record<string, unknown>;
}

export async function invokeTool(
  app: FastifyInstance,
  grants: SurfaceGrants,
  tool: AdminTool,
  principal: Principal,
  args: AdminArgs,
  options: { level: 'read' | 'write'; approvalId?: string },
): Promise<InvokeOutcome> {
  const path = resolvePath(tool, args);
  const rest: AdminArgs = {};
  for (const [key, value] of Object.entries(args)) if (!tool.pathParams.some((p) => p.name === key)) rest[key] = value;
  const { fields, q, ...forwarded } = rest as AdminArgs & { fields?: unknown; q?: unknown };
  if (tool.isList && q !== undefined) {
    // Filtering happens here, after the route: fetch the widest page so the filter sees it.
    forwarded.limit = 500;
    forwarded.offset = 0;
  }
  const nonce = grants.issue({
    principal,
    scope: tool.scope,
    level: options.level,
    ...(options.approvalId ? { approvalId: options.approvalId } : {}),
  });
  const payload = tool.argsIn === 'body' ? (tool.bodyWrapped ? forwarded.body : forwarded) : undefined;
  const response = await app.inject({
    method: tool.method as 'GET',
    url: path + (tool.argsIn === 'query' ? queryString(forwarded) : ''),
    headers: { [GRANT_HEADER]: nonce, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(payload !== undefined ? { payload: JSON.stringify(payload) } : {}),
  });
  let body: unknown;
  try {
    body = response.body ? JSON.parse(response.body) : {};
  } catch {
    throw new GatehouseError('internal_error', `${tool.name} answered something that is not JSON.`);
  }
  if (response.statusCode >= 400) {
    const error = (body as { error?: Record<string, unknown> }).error ?? { code: 'internal_error', message: 'failed' };
    return { ok: false, body: { status: 'error', error } };
  }
  if (Array.isArray(body)) {
    const key = LIST_WRAP_KEYS[tool.name] ?? 'items';
    body = { [key]: body, count: body.length };
  }
  const shaped = tool.isList
    ? shapeList(
        body as Record<string, unknown>,
        typeof fields === 'string' ? fields : undefined,
        typeof q === 'string' ? q : undefined,
      )
    : (body as Record<string, unknown>);
  return { ok: true, body: shaped };
}
