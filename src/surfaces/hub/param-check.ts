/**
 * SEP-2243 on the agent side: a 2026-07-28 `tools/call` whose tool marks arguments with `x-mcp-header`
 * must carry matching `Mcp-Param-*` headers. The hub checks them against the tool as this agent sees it
 * listed, before either path (SDK or fast) serves the call, and answers a missing, undecodable or
 * disagreeing header as the SDK's server does: HTTP 400, JSON-RPC `-32020` HeaderMismatch.
 *
 * Only a request whose standard headers (`Mcp-Method`, `Mcp-Name`) already agree with its body is
 * checked here; the SDK answers the others first, as its validation ladder orders them.
 */
import type { FastifyRequest } from 'fastify';
import type { TokenPrincipal } from '../../identity/index.js';
import { checkParamHeaders, mismatchResponse, scanParamHeaders } from '../../upstream/param-headers.js';
import { isPlainObject, MODERN_PROTOCOL_VERSION } from '../../wire.js';
import type { EndpointScope } from '../endpoint.js';
import { resolveTool } from './calls.js';
import { callScopeOf, type ListView } from './server.js';
import { advertised, type HubRegistry } from './view.js';

export interface ParamCheckDeps {
  registry: HubRegistry;
  listViewOf(principal: TokenPrincipal, scope: EndpointScope): Promise<ListView>;
}

export async function paramHeaderRejection(
  deps: ParamCheckDeps,
  request: FastifyRequest,
  principal: TokenPrincipal,
  scope: EndpointScope,
): Promise<{ status: number; body: unknown } | undefined> {
  const { body, headers } = request;
  if (!isPlainObject(body) || body.method !== 'tools/call' || !isPlainObject(body.params)) return undefined;
  if (headers['mcp-protocol-version'] !== MODERN_PROTOCOL_VERSION || headers['mcp-session-id'] !== undefined)
    return undefined;
  const { name, arguments: args } = body.params;
  const nameHeader = headers['mcp-name'];
  if (typeof name !== 'string' || headers['mcp-method'] !== 'tools/call' || typeof nameHeader !== 'string')
    return undefined;
  if (nameHeader.trim() !== name) return undefined;
  const snapshot = await deps.registry.snapshot();
  // The common case, no tool of the catalog declares a header: nothing more to look at.
  if (!snapshot.declaresParamHeaders) return undefined;
  const callScope = scope.kind === 'aggregate' ? callScopeOf(scope, await deps.listViewOf(principal, scope)) : scope;
  const resolution = resolveTool(snapshot, principal.groups, callScope, name);
  if ('missing' in resolution) return undefined;
  const { tool } = resolution;
  // Most tools declare no header: the scan is cached per schema, so this costs a map lookup.
  if ((scanParamHeaders(tool.definition.inputSchema).declarations?.length ?? 0) === 0) return undefined;
  // The schema the agent mirrored from: the tool as listed to it (an override may have changed it).
  const { inputSchema } = advertised(tool, name, scope.kind === 'aggregate');
  const mismatch = checkParamHeaders(inputSchema, args, (header) => {
    const value = headers[header];
    return Array.isArray(value) ? value.join(', ') : value;
  });
  return mismatch ? { status: 400, body: mismatchResponse(body.id, mismatch) } : undefined;
}
