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

/** The route's page size while `q` reads a list through, and how many rows it reads at most. */
const Q_PAGE = 500;
const Q_MAX_ROWS = 10_000;

/** `fields` (id always stays) on a list answer; with `q`, the items were filtered and paged already. */
function shapeList(body: Record<string, unknown>, fields: string | undefined): Record<string, unknown> {
  const key = itemsKey(body);
  if (!key) return body;
  let items = body[key] as unknown[];
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
  return { ...body, [key]: items, count: items.length };
}

const pageArg = (value: unknown, fallback: number): number => {
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : Number.NaN;
  return Number.isInteger(n) && n >= 0 ? n : fallback;
};

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
  // What the tool's schema does not declare is refused, not dropped: a caller must not think it was applied.
  const undeclared = [
    ...(tool.argsIn === 'none' ? Object.keys(forwarded) : []),
    ...(tool.isList ? [] : ['fields', 'q'].filter((key) => Object.hasOwn(rest, key))),
  ];
  if (undeclared.length > 0) {
    const message = `${tool.name} takes no argument ${undeclared.map((key) => `"${key}"`).join(', ')}.`;
    const issues = undeclared.map((key) => ({ path: key, message: 'not an argument of this tool' }));
    return { ok: false, body: { status: 'error', error: { code: 'validation_error', message, issues } } };
  }
  const call = async (query: AdminArgs): Promise<InvokeOutcome> => {
    const nonce = grants.issue({
      principal,
      scope: tool.scope,
      level: options.level,
      ...(options.approvalId ? { approvalId: options.approvalId } : {}),
    });
    const payload = tool.argsIn === 'body' ? (tool.bodyWrapped ? query.body : query) : undefined;
    const response = await app.inject({
      method: tool.method as 'GET',
      url: path + (tool.argsIn === 'query' ? queryString(query) : ''),
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
      const error = (body as { error?: Record<string, unknown> }).error ?? {
        code: 'internal_error',
        message: 'failed',
      };
      return { ok: false, body: { status: 'error', error } };
    }
    if (Array.isArray(body)) {
      const key = LIST_WRAP_KEYS[tool.name] ?? 'items';
      body = { [key]: body, count: body.length };
    }
    return { ok: true, body: body as Record<string, unknown> };
  };

  let outcome: InvokeOutcome;
  if (tool.isList && typeof q === 'string' && q !== '') {
    outcome = await filteredList(call, forwarded, q);
  } else {
    outcome = await call(forwarded);
  }
  if (!outcome.ok) return outcome;
  const shaped = tool.isList ? shapeList(outcome.body, typeof fields === 'string' ? fields : undefined) : outcome.body;
  return { ok: true, body: shaped };
}

/**
 * `q` on a list: the route is read through page by page (at most `Q_MAX_ROWS` rows), every item whose
 * JSON contains `q` (case-insensitive) is kept, then the caller's `limit`/`offset` apply; `total` is the
 * number of matches. When the route held more rows than were read, `truncated` says so.
 */
async function filteredList(
  call: (query: AdminArgs) => Promise<InvokeOutcome>,
  forwarded: AdminArgs,
  q: string,
): Promise<InvokeOutcome> {
  const limit = Math.min(pageArg(forwarded.limit, 100), 500);
  const offset = pageArg(forwarded.offset, 0);
  const needle = q.toLowerCase();
  const matches: unknown[] = [];
  let first: Record<string, unknown> | undefined;
  let key: string | undefined;
  let truncated = false;
  for (let read = 0; ; ) {
    const page = await call({ ...forwarded, limit: Q_PAGE, offset: read });
    if (!page.ok) return page;
    first ??= page.body;
    key ??= itemsKey(page.body);
    const items = key ? ((page.body[key] as unknown[] | undefined) ?? []) : [];
    for (const item of items) if (JSON.stringify(item).toLowerCase().includes(needle)) matches.push(item);
    read += items.length;
    const total = typeof page.body.total === 'number' ? page.body.total : undefined;
    if (items.length < Q_PAGE || (total !== undefined && read >= total)) break;
    if (read >= Q_MAX_ROWS) {
      truncated = true;
      break;
    }
  }
  if (!first || !key) return { ok: true, body: first ?? {} };
  const items = matches.slice(offset, offset + limit);
  return {
    ok: true,
    body: { ...first, [key]: items, count: items.length, total: matches.length, ...(truncated && { truncated }) },
  };
}
