/**
 * What an upstream may ask an agent for. An upstream's `input_required` result may only carry the
 * embedded request kinds the 2026-07-28 revision defines, each covered by the input capabilities the
 * agent declared (and Gatehouse passed on for this call): the same rules the SDK's server applies
 * before such a result leaves it, applied here first so a misbehaving upstream gets one typed answer
 * on every path — an `upstream_protocol_error` result — instead of a protocol error the agent cannot act on.
 */
import { ProtocolError, type ServerContext } from '@modelcontextprotocol/server';
import { GatehouseError } from '../../errors.js';
import type { AskRelay } from '../../upstream/asks.js';
import { isPlainObject, type Json } from '../../wire.js';

/** The capability (and sub-capability) an embedded request needs, as the spec defines them. */
function requirementOf(request: Json): { capability: string; member?: string } | undefined {
  const params = isPlainObject(request.params) ? request.params : {};
  switch (request.method) {
    case 'elicitation/create':
      return { capability: 'elicitation', member: params.mode === 'url' ? 'url' : 'form' };
    case 'sampling/createMessage':
      return params.tools !== undefined || params.toolChoice !== undefined
        ? { capability: 'sampling', member: 'tools' }
        : { capability: 'sampling' };
    case 'roots/list':
      return { capability: 'roots' };
    default:
      return undefined;
  }
}

function covered(requirement: { capability: string; member?: string }, declared: Json | undefined): boolean {
  const value = declared?.[requirement.capability];
  if (!isPlainObject(value)) return false;
  if (requirement.member === undefined || value[requirement.member] !== undefined) return true;
  // A bare `elicitation: {}` (no mode named) means form elicitation, as in the 2025 revisions.
  return requirement.capability === 'elicitation' && requirement.member === 'form' && value.url === undefined;
}

/** Throws `upstream_protocol_error` unless every input request is a known kind the agent can answer. */
export function assertAnswerable(inputRequests: Json, declared: Json | undefined): void {
  // Keys and contents are the upstream's words: they stay out of the messages.
  for (const request of Object.values(inputRequests)) {
    const requirement = isPlainObject(request) ? requirementOf(request) : undefined;
    if (!requirement) {
      throw new GatehouseError(
        'upstream_protocol_error',
        'The upstream asked for input of a kind MCP does not define.',
        {
          reason: 'invalid_input_request',
        },
      );
    }
    if (!covered(requirement, declared)) {
      throw new GatehouseError(
        'upstream_protocol_error',
        `The upstream asked for input the agent did not declare it can give (${requirement.capability}).`,
        { reason: 'input_not_declared' },
      );
    }
  }
}

/** Whether an agent that declared `declared` can answer `ask` (a 2025-era upstream's server→client request). */
export function canAnswer(ask: { method: string; params?: unknown }, declared: Json | undefined): boolean {
  const requirement = requirementOf({ ...ask });
  return requirement !== undefined && covered(requirement, declared);
}

/**
 * The relay of a 2025-era upstream's asks during one call (`upstream/asks.ts`) to the 2025-era agent
 * that made it: each ask the agent declared it can answer goes to it as a server→client request
 * related to its call (on that call's stream), under the call's deadline; any other is refused to the
 * upstream, as a client without the capability refuses it.
 */
export function askAgent(ctx: ServerContext, declared: Json | undefined): AskRelay {
  return async (ask, limits) => {
    if (!canAnswer(ask, declared)) {
      throw new ProtocolError(-32601, `The agent did not declare it can answer ${ask.method}.`);
    }
    const request = { method: ask.method, ...(ask.params ? { params: ask.params } : {}) };
    const options = { signal: limits.signal, timeout: limits.timeoutMs };
    return (await ctx.mcpReq.send(request as { method: 'roots/list' }, options)) as Record<string, unknown>;
  };
}
