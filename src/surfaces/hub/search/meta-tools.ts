/**
 * Search mode's meta-tools on `/mcp`: `gatehouse__search_tools` (BM25 over the tools the agent may
 * use, fused with embeddings when they are on, paged with the one stable cursor format and bounded in bytes), `gatehouse__describe_tool` (a
 * tool's full definition, as pinned) and `gatehouse__call_tool` (a call through the very same gate as
 * a direct one; `server.ts` runs it). Results state each tool's verdict, so a model knows a call will
 * wait for an approval.
 */
import { createHash } from 'node:crypto';
import type { CallToolResult, Tool } from '@modelcontextprotocol/server';
import { ProtocolError } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { GatehouseError } from '../../../errors.js';
import { encodeCursor, pageOf } from '../../cursor.js';
import { errorResult, jsonToolResult } from '../../results.js';
import { resolveTool } from '../calls.js';
import { GATEHOUSE_PREFIX } from '../names.js';
import { advertised, type HubTool, isListed, type Snapshot } from '../view.js';
import type { SearchIndexes } from './indexes.js';
import { argumentNames, type ToolHit } from './tool-index.js';

export const SEARCH_TOOL = `${GATEHOUSE_PREFIX}search_tools`;
export const DESCRIBE_TOOL = `${GATEHOUSE_PREFIX}describe_tool`;
export const CALL_TOOL = `${GATEHOUSE_PREFIX}call_tool`;
/** The mark a call through `gatehouse__call_tool` carries on its approval card and audit row. */
export const VIA_CALL_TOOL = 'call_tool';

/** Most matches one query ranks (pages walk through them). */
const MAX_MATCHES = 200;
/** A page's results stop before their JSON passes this many bytes (one result always goes). */
export const MAX_PAGE_BYTES = 16_384;
/** A result's description is cut here; `gatehouse__describe_tool` gives it whole. */
const DESCRIPTION_CHARS = 300;

export const searchToolsTool: Tool = {
  name: SEARCH_TOOL,
  title: 'Search tools',
  description:
    'Find the tools you may use by what they do: words of their names, descriptions or argument names. ' +
    'Each result names the tool (pass it to gatehouse__describe_tool and gatehouse__call_tool), its server, ' +
    'its arguments and its verdict: "allow" runs at once, "gated" waits for an operator’s approval.',
  inputSchema: {
    type: 'object',
    properties: {
      query: { type: 'string', minLength: 1, maxLength: 500, description: 'What the tool should do.' },
      server: { type: 'string', maxLength: 32, description: 'Only tools of this server id.' },
      limit: { type: 'integer', minimum: 1, maximum: 50, description: 'Results per page (default 10).' },
      cursor: { type: 'string', description: 'nextCursor of the previous page of the same search.' },
    },
    required: ['query'],
    additionalProperties: false,
  },
  annotations: { readOnlyHint: true, openWorldHint: false },
};

export const describeToolTool: Tool = {
  name: DESCRIBE_TOOL,
  title: 'Describe a tool',
  description:
    'The full definition of a tool found with gatehouse__search_tools (its input schema included), with its verdict.',
  inputSchema: {
    type: 'object',
    properties: { name: { type: 'string', minLength: 1, maxLength: 256, description: 'The tool, <server>__<tool>.' } },
    required: ['name'],
    additionalProperties: false,
  },
  annotations: { readOnlyHint: true, openWorldHint: false },
};

export const callToolTool: Tool = {
  name: CALL_TOOL,
  title: 'Call a tool',
  description:
    'Call a tool found with gatehouse__search_tools: its name and its arguments (as its input schema says). ' +
    'A gated tool answers {"status":"pending_approval","approval_id",...}: poll gatehouse__approval_status.',
  inputSchema: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 256, description: 'The tool, <server>__<tool>.' },
      arguments: { type: 'object', description: 'The tool’s arguments.' },
    },
    required: ['name'],
    additionalProperties: false,
  },
};

/** The meta-tools, in the order search mode lists them. */
export const META_TOOLS: readonly Tool[] = [searchToolsTool, describeToolTool, callToolTool];

const searchArgs = z.strictObject({
  query: z.string().trim().min(1).max(500),
  server: z.string().min(1).max(32).optional(),
  limit: z.number().int().min(1).max(50).optional(),
  cursor: z.string().min(1).max(4096).optional(),
});
const describeArgs = z.strictObject({ name: z.string().min(1).max(256) });
export const callArgs = z.strictObject({
  name: z.string().min(1).max(256),
  arguments: z.record(z.string(), z.unknown()).optional(),
});

/** The meta-tool's arguments, or the refusal the agent reads. */
export function parseArgs<T>(schema: z.ZodType<T>, raw: unknown, tool: string): T | CallToolResult {
  const parsed = schema.safeParse(raw ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message }));
  return errorResult(
    new GatehouseError('tool.invalid_arguments', `Invalid arguments for ${tool}.`, { issues: issues.slice(0, 10) }),
  );
}

export function isRefusal(value: unknown): value is CallToolResult {
  return typeof value === 'object' && value !== null && 'isError' in value;
}

/** Servers named on a result whose tool other servers carry identically (the count says how many in all). */
const COPY_SERVERS = 10;

/** A result line: what a model needs to choose, nothing it needs only to call (describe gives that). */
function resultOf(hit: ToolHit<HubTool>) {
  const { tool, copies = [] } = hit;
  const { title, description } = tool.definition;
  return {
    name: tool.exposed,
    server: tool.serverId,
    ...(title ? { title } : {}),
    ...(description
      ? {
          description:
            description.length > DESCRIPTION_CHARS ? `${description.slice(0, DESCRIPTION_CHARS)}…` : description,
        }
      : {}),
    arguments: argumentNames(tool),
    verdict: tool.verdict as 'allow' | 'gated',
    ...(copies.length > 0
      ? { copies: copies.length, copyServers: copies.slice(0, COPY_SERVERS).map((copy) => copy.serverId) }
      : {}),
  };
}

/**
 * A hit's cursor key: an inverted, fixed-width score, then the name, so key order is rank order and a
 * cursor means "after this score and name" on every replica, even if the catalog moved between pages.
 */
function rankKey(hit: ToolHit<HubTool>): string {
  const inverted = Math.max(0, 1e9 - hit.score)
    .toFixed(6)
    .padStart(20, '0');
  return `${inverted}\u0000${hit.tool.exposed}`;
}

/**
 * `gatehouse__search_tools` for an agent of these groups. Identical tools on several servers make one
 * result (the best-ranked copy, naming the others), so copies never crowd the first page.
 */
export async function searchTools(
  indexes: SearchIndexes,
  snapshot: Snapshot,
  groups: readonly string[],
  raw: unknown,
): Promise<CallToolResult> {
  const args = parseArgs(searchArgs, raw, SEARCH_TOOL);
  if (isRefusal(args)) return args;
  const visibleServers = new Set(
    snapshot
      .visibleTo(groups)
      .map((server) => server.row.id)
      .filter((id) => args.server === undefined || id === args.server),
  );
  const indexed = await indexes.for(snapshot);
  // An index of an older snapshot (the new one is building): each hit is read again in this snapshot.
  const now = (tool: HubTool) =>
    indexed.snapshot === snapshot ? tool : snapshot.servers.get(tool.serverId)?.toolsByName.get(tool.name);
  const visible = (tool: HubTool) => {
    const current = now(tool);
    if (!current || !isListed(current) || !visibleServers.has(current.serverId)) return false;
    return current === tool ? true : current;
  };
  // With embeddings on and answering: BM25 fused with cosine similarity; otherwise BM25 alone.
  const semantic = await indexes.semantic(indexed, args.query);
  const hits = indexed.index.query(args.query, visible, MAX_MATCHES, true, semantic);
  // A cursor belongs to one search: its kind carries a digest of the query and the server filter.
  const kind = `search:${createHash('sha256')
    .update(`${args.query}\u0000${args.server ?? ''}`)
    .digest('hex')
    .slice(0, 16)}`;
  let page: { items: ToolHit<HubTool>[]; nextCursor?: string };
  try {
    page = pageOf(kind, hits, rankKey, args.cursor, args.limit ?? 10);
  } catch (error) {
    if (!(error instanceof ProtocolError)) throw error;
    return errorResult(
      new GatehouseError('tool.invalid_arguments', 'This cursor belongs to another search (or is not one).'),
    );
  }
  const tools: ReturnType<typeof resultOf>[] = [];
  let bytes = 0;
  let nextCursor = page.nextCursor;
  for (const [i, hit] of page.items.entries()) {
    const line = resultOf(hit);
    const size = Buffer.byteLength(JSON.stringify(line));
    if (tools.length > 0 && bytes + size > MAX_PAGE_BYTES) {
      // The rest of this page comes on the next one.
      nextCursor = encodeCursor(kind, rankKey(page.items[i - 1] as ToolHit<HubTool>));
      break;
    }
    tools.push(line);
    bytes += size;
  }
  return jsonToolResult({
    tools,
    count: tools.length,
    total: hits.length,
    ...(nextCursor !== undefined ? { nextCursor } : {}),
  });
}

/** `gatehouse__describe_tool`: the tool as it is pinned (and as a direct list would advertise it), with its verdict. */
export function describeTool(snapshot: Snapshot, groups: readonly string[], raw: unknown): CallToolResult {
  const args = parseArgs(describeArgs, raw, DESCRIBE_TOOL);
  if (isRefusal(args)) return args;
  const resolution = resolveTool(snapshot, groups, { kind: 'aggregate' }, args.name);
  if ('missing' in resolution || !isListed(resolution.tool)) {
    return errorResult(
      new GatehouseError('search.unknown_tool', `No tool ${args.name} is visible to you; search for one.`),
    );
  }
  const { tool } = resolution;
  return jsonToolResult({
    tool: advertised(tool, tool.exposed, true),
    server: tool.serverId,
    verdict: tool.verdict,
    ...(tool.pin?.pinHash ? { pinHash: tool.pin.pinHash } : {}),
  });
}
