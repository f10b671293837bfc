/**
 * The conduit's operations plane, route for route the contract of
 * hadrontool-mcp: list and call tools on any Streamable HTTP MCP server. The
 * caller owns registry and policy; this validates shape, enforces the egress
 * guard (inside the pool's fetch), speaks MCP, and bounds what comes back.
 */
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { findGatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import { agentContext, inSpan, withContext } from '../telemetry/tracing.js';
import type { UpstreamPool, UpstreamTarget } from '../upstream/index.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MAX_HEADERS = 64;

/** Headers the MCP transport owns or that would break HTTP framing; a caller may not set them. */
const RESERVED_HEADERS = new Set([
  'host',
  'connection',
  'content-length',
  'content-type',
  'transfer-encoding',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'accept',
  'last-event-id',
  'mcp-session-id',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
]);

const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/, 'not a valid HTTP header name');
const headerValue = z
  .string()
  .max(16_384)
  .regex(/^[^\r\n\0]*$/, 'header values may not contain CR, LF or NUL');

export const upstreamHeaders = z
  .record(headerName, headerValue)
  .refine((h) => Object.keys(h).length <= MAX_HEADERS, `at most ${MAX_HEADERS} headers`)
  .superRefine((headers, ctx) => {
    const seen = new Set<string>();
    for (const name of Object.keys(headers)) {
      const lower = name.toLowerCase();
      if (RESERVED_HEADERS.has(lower)) {
        ctx.addIssue({ code: 'custom', path: [name], message: `${lower} is set by the MCP transport` });
      }
      if (seen.has(lower)) ctx.addIssue({ code: 'custom', path: [name], message: 'duplicate header name' });
      seen.add(lower);
    }
  });

export const upstreamUrl = z
  .string()
  .min(1)
  .max(2048)
  .refine((u) => URL.canParse(u), 'not an absolute URL');

/**
 * An upstream URL a server record keeps: only HTTP(S) reaches an MCP server (an ftp:// or file:// URL
 * would be stored and fail on first use). A one-off `/ops` call needs no such rule: the egress guard
 * refuses the scheme there, with its own reason (`unsupported_scheme`).
 */
export const recordUrl = upstreamUrl.refine(
  (u) => !URL.canParse(u) || /^https?:$/.test(new URL(u).protocol),
  'only http:// and https:// URLs',
);

const listToolsBody = z.strictObject({ url: upstreamUrl, headers: upstreamHeaders.optional() });
const callToolBody = z.strictObject({
  url: upstreamUrl,
  headers: upstreamHeaders.optional(),
  name: z.string().min(1).max(256),
  arguments: z.record(z.string(), z.unknown()).optional(),
});

/** Aborts the upstream work when the caller hangs up before the answer is sent. */
function callerGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

function targetOf(body: { url: string; headers?: Record<string, string> | undefined }): UpstreamTarget {
  return body.headers ? { url: body.url, headers: body.headers } : { url: body.url };
}

/** Inside `gatehouse serve` every operation is audited; the standalone conduit keeps no state. */
export interface OpsAuditor {
  record(event: {
    operation: string;
    url: string;
    tool?: string;
    principal: Principal | undefined;
    outcome: string;
    latencyMs: number;
  }): Promise<void>;
}

/** Runs an operation and reports its outcome (an error code, never a message or a header) to the auditor. */
async function audited<T>(
  auditor: OpsAuditor | undefined,
  event: { operation: string; url: string; tool?: string; principal: Principal | undefined },
  run: () => Promise<T>,
): Promise<T> {
  if (!auditor) return run();
  const started = performance.now();
  let outcome = 'ok';
  try {
    return await run();
  } catch (error) {
    outcome = findGatehouseError(error)?.code ?? 'internal_error';
    throw error;
  } finally {
    // The answer leaves once its audit row is committed (the auditor never rejects).
    await auditor.record({ ...event, outcome, latencyMs: Math.round(performance.now() - started) });
  }
}

export function opsRoutes(pool: UpstreamPool, auditor?: OpsAuditor): RouteDeclaration[] {
  const exclude = { exclude: 'the conduit serves a platform that owns its registry and policy, not agents' };
  return [
    defineRoute({
      method: 'POST',
      url: '/ops/list-tools',
      summary: 'List the tools of a Streamable HTTP MCP server.',
      scope: 'ops',
      access: ['ops'],
      mcp: exclude,
      body: listToolsBody,
      handler: ({ body, reply, principal }) =>
        audited(auditor, { operation: 'list-tools', url: body.url, principal }, () =>
          pool.listTools(targetOf(body), { signal: callerGone(reply) }),
        ),
    }),
    defineRoute({
      method: 'POST',
      url: '/ops/call-tool',
      summary: 'Call one tool on a Streamable HTTP MCP server; the result is bounded.',
      scope: 'ops',
      access: ['ops'],
      mcp: exclude,
      body: callToolBody,
      // Traced (tracing on): the caller's `traceparent` header is the parent of the call and its upstream leg.
      handler: ({ body, request, reply, principal }) =>
        withContext(agentContext(request.headers, undefined), () =>
          inSpan(
            'ops/call-tool',
            'server',
            { 'mcp.method.name': 'tools/call', 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': body.name },
            () =>
              audited(auditor, { operation: 'call-tool', url: body.url, tool: body.name, principal }, () =>
                pool.callTool(targetOf(body), body.name, body.arguments, { signal: callerGone(reply) }),
              ),
          ),
        ),
    }),
  ];
}
