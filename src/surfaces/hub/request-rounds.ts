/**
 * `prompts/get` and `resources/read` in rounds (2026-07-28 multi-round-trip), relayed as tool calls are
 * (`calls.ts`): the upstream is told the input capabilities the agent declared, an upstream that asks for
 * input answers `input_required`, and the agent gets those requests with the hub's own signed state (bound
 * to the token, the server, the method and its params, the upstream's state inside). A later round carries
 * the agent's answers and that state back; a state minted for anything else is refused.
 */
import {
  CLIENT_CAPABILITIES_META_KEY,
  type InputRequiredResult,
  ProtocolError,
  ProtocolErrorCode,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { interactiveOutcome } from '../../upstream/operations.js';
import { withExtensions } from '../../upstream/types.js';
import { continuationOf, inputRequiredResult, verifiedState } from './calls.js';
import { assertAnswerable } from './input-requests.js';
import { type HubStateCodec, stateBinding, stateMatches } from './request-state.js';

/** What a round sends the upstream: the request's params, with the continuation and capabilities of this round. */
export type RoundParams = (modern: boolean) => Record<string, unknown>;

export async function requestInRounds(
  codec: HubStateCodec,
  who: { clientId: string; serverId: string },
  /** The request as the upstream gets it (its params as the upstream knows them: names and URIs unwrapped). */
  request: { method: 'prompts/get' | 'resources/read'; params: Record<string, unknown> },
  ctx: ServerContext,
  inputs: Record<string, unknown> | undefined,
  /** Sends the request upstream (allowing an `input_required` answer); `modern`: `_meta` may carry capabilities. */
  send: (params: RoundParams) => Promise<Record<string, unknown>>,
  /** Extensions the agent declared that pass on (MCP Apps), declared beside `inputs` to a 2026-07-28 upstream. */
  extensions?: Record<string, unknown>,
): Promise<Record<string, unknown> | InputRequiredResult> {
  const binding = stateBinding(who.clientId, who.serverId, request.method, request.params);
  const state = verifiedState(ctx);
  if (state && !stateMatches(state, binding)) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'The requestState was not minted for this request.');
  }
  const continuation = continuationOf(ctx.mcpReq.inputResponses, state);
  const result = await send((modern) => ({
    ...request.params,
    ...(continuation?.inputResponses ? { inputResponses: continuation.inputResponses } : {}),
    ...(continuation?.requestState !== undefined ? { requestState: continuation.requestState } : {}),
    ...(modern && (inputs || extensions)
      ? { _meta: { [CLIENT_CAPABILITIES_META_KEY]: withExtensions(inputs, extensions) } }
      : {}),
  }));
  if (!isInputRequired(result)) return result;
  const outcome = interactiveOutcome(result);
  if (!('inputRequired' in outcome)) return result;
  const { inputRequests, requestState } = outcome.inputRequired;
  assertAnswerable(inputRequests, inputs);
  const minted = await codec.mint({ ...binding, ...(requestState !== undefined ? { u: requestState } : {}) });
  return inputRequiredResult(inputRequests, minted);
}

export const isInputRequired = (result: Record<string, unknown>) => result.resultType === 'input_required';
