/**
 * The two operations the conduit needs, on an already connected client, both bounded.
 */
import { CLIENT_CAPABILITIES_META_KEY, type Client, LOG_LEVEL_META_KEY, type Tool } from '@modelcontextprotocol/client';
import { GatehouseError } from '../errors.js';
import { outgoingCarrier } from '../telemetry/tracing.js';
import { type BoundedCallResult, boundCallResult, boundStrings, boundTool } from './bounds.js';
import { catalogParams } from './client-capabilities.js';
import type { Deadline } from './deadline.js';
import { TASKS_EXTENSION, taskOutcome } from './direct-result.js';
import { DRAIN_LIMITS, drainPages, type ListPage } from './drain.js';
import { rpcCodeOf } from './map-error.js';
import { paramHeadersFor, scanParamHeaders } from './param-headers.js';
import { withTaskAnswers } from './task-results.js';
import {
  type CallOptions,
  type InteractiveCallOptions,
  type InteractiveCallResult,
  type ListToolsResult,
  withExtensions,
} from './types.js';

export const LIST_LIMITS = Object.freeze({ maxTools: DRAIN_LIMITS.maxItems, maxPages: DRAIN_LIMITS.maxPages });

const METHOD_NOT_FOUND = -32601;

const requestOptions = (deadline: Deadline) => ({ signal: deadline.signal, timeout: deadline.remaining() });

/**
 * Drains `tools/list` page by page with explicit cursors (`drainPages`; the SDK's auto-aggregate would hide the
 * bounds): stops at 1000 tools, 50 pages or the serialized ceiling and says `truncated`; a cursor seen before
 * is a protocol error, so a looping upstream cannot keep us here. `catalog`: the hub's own listing (a
 * handshake), which declares MCP Apps to a 2026-07-28 upstream (`catalogParams`).
 */
export async function listAllTools(
  client: Client,
  deadline: Deadline,
  { catalog = false }: { catalog?: boolean } = {},
): Promise<ListToolsResult> {
  // SEP-2243: on 2026-07-28 a client must leave out a tool whose `x-mcp-header` marks break the rules (it could
  // never be called with the right headers); the SDK client does it on its own list, this list is Gatehouse's.
  const modern = client.getProtocolEra() === 'modern';
  const bound = (raw: unknown) => {
    const tool = raw as Tool;
    if (modern && !scanParamHeaders(tool.inputSchema).valid) return undefined;
    const bounded = boundTool(tool);
    return { item: bounded.tool, truncated: bounded.truncated };
  };
  const page = async (cursor: string | undefined): Promise<ListPage> => {
    const params = cursor === undefined ? {} : { cursor };
    try {
      const { tools, nextCursor } = await client.request(
        { method: 'tools/list', params: catalog ? catalogParams(client, params) : params },
        requestOptions(deadline),
      );
      return { items: tools, nextCursor };
    } catch (error) {
      // A server without tools may say so by not knowing the method.
      if (cursor === undefined && rpcCodeOf(error) === METHOD_NOT_FOUND) return { items: [] };
      throw error;
    }
  };
  const { items: tools, truncated } = await drainPages<Tool>(page, {
    limits: { maxItems: LIST_LIMITS.maxTools, maxPages: LIST_LIMITS.maxPages },
    bound,
    repeatedCursor: 'throw',
  });
  return truncated ? { tools, truncated: true } : { tools };
}

/**
 * The `Mcp-Param-*` headers of a call on a 2026-07-28 connection, from the tool's schema as Gatehouse
 * listed it (the SDK client mirrors only from a list it made itself on that very client).
 */
function modernParamHeaders(
  client: Client,
  inputSchema: unknown,
  args: Record<string, unknown> | undefined,
): { headers?: Record<string, string> } {
  if (inputSchema === undefined || client.getProtocolEra() !== 'modern') return {};
  const headers = paramHeadersFor(inputSchema, args);
  return Object.keys(headers).length > 0 ? { headers } : {};
}

/** Calls one tool and bounds its result; `isError: true` is a normal result. */
export async function callBoundedTool(
  client: Client,
  deadline: Deadline,
  name: string,
  args: Record<string, unknown> | undefined,
  onProgress: CallOptions['onProgress'],
  inputSchema?: unknown,
): Promise<BoundedCallResult> {
  const params: Record<string, unknown> = args === undefined ? { name } : { name, arguments: args };
  const carrier = outgoingCarrier();
  if (carrier) params._meta = carrier;
  const result = await client.callTool(params as { name: string }, {
    ...requestOptions(deadline),
    ...modernParamHeaders(client, inputSchema, args),
    ...(onProgress && {
      onprogress: (progress) => {
        // Progress messages are upstream strings too.
        onProgress(typeof progress.message === 'string' ? boundStrings(progress).value : progress);
      },
    }),
  });
  return boundCallResult(result);
}

/** The most upstream `requestState` Gatehouse carries between rounds (it rides inside the hub's own signed state). */
export const MAX_UPSTREAM_REQUEST_STATE = 64 * 1024;

/**
 * Calls one tool on the 2026-07-28 multi-round-trip path: `continuation` carries the agent's
 * `inputResponses` and the upstream's last `requestState`, and an upstream that needs input
 * (elicitation, sampling, roots) answers `inputRequired` instead of a result — bounded like any
 * upstream value, for the caller to hand to its own agent. On a 2025-era connection there is no
 * such vocabulary and this is a plain call.
 */
export async function callInteractiveTool(
  client: Client,
  deadline: Deadline,
  name: string,
  args: Record<string, unknown> | undefined,
  options: Pick<
    InteractiveCallOptions,
    'onProgress' | 'continuation' | 'inputCapabilities' | 'extensions' | 'inputSchema' | 'onLog' | 'logLevel' | 'tasks'
  >,
): Promise<InteractiveCallResult> {
  const { continuation, onProgress, inputCapabilities, extensions } = options;
  const params: Record<string, unknown> = args === undefined ? { name } : { name, arguments: args };
  if (continuation?.inputResponses) params.inputResponses = continuation.inputResponses;
  if (continuation?.requestState !== undefined) params.requestState = continuation.requestState;
  const modern = client.getProtocolEra() === 'modern';
  // The Tasks extension is a 2026-07-28 one, declared per request: a 2025 session's capabilities are its own.
  const tasks = modern && options.tasks === true;
  if (modern) {
    params._meta = {
      // The per-request envelope declares what the agent can answer, and no more (the client merges the rest
      // of it; its own keys lose to these), with the extensions it declared that pass on (and Tasks, as the
      // direct path declares it: the agent can poll a task through the hub).
      [CLIENT_CAPABILITIES_META_KEY]: withExtensions(
        inputCapabilities,
        tasks ? { ...extensions, [TASKS_EXTENSION]: {} } : extensions,
      ),
      // Without it a 2026-07-28 upstream sends no log messages at all; with it, those the agent asked for.
      ...(options.onLog && options.logLevel !== undefined ? { [LOG_LEVEL_META_KEY]: options.logLevel } : {}),
    };
  }
  // The trace context in `_meta` too (tracing on): MCP's own carrier, read by servers on any transport.
  const carrier = outgoingCarrier();
  if (carrier) params._meta = { ...(params._meta as Record<string, unknown> | undefined), ...carrier };
  const call = async () =>
    (await client.callTool(params as { name: string }, {
      ...requestOptions(deadline),
      ...modernParamHeaders(client, options.inputSchema, args),
      allowInputRequired: true,
      ...(onProgress && {
        onprogress: (progress) =>
          onProgress(typeof progress.message === 'string' ? boundStrings(progress).value : progress),
      }),
    })) as Record<string, unknown>;
  if (!tasks) return interactiveOutcome(await call());
  // The SDK client refuses a task answer: the transport keeps it for this call (`task-results.ts`).
  const { value, task } = await withTaskAnswers(call);
  return task ? taskOutcome(task) : interactiveOutcome(value);
}

/** A `tools/call` result (already shaped as one) bounded, or the upstream's input request, checked and bounded. */
export function interactiveOutcome(result: Record<string, unknown>): InteractiveCallResult {
  if (result.resultType !== 'input_required') return boundCallResult(result);
  const requestState = result.requestState;
  if (requestState !== undefined && typeof requestState !== 'string') {
    throw new GatehouseError('upstream_protocol_error', 'The upstream sent a requestState that is not a string.', {
      reason: 'invalid_request_state',
    });
  }
  if (requestState !== undefined && requestState.length > MAX_UPSTREAM_REQUEST_STATE) {
    throw new GatehouseError('upstream_protocol_error', 'The upstream sent a requestState over 64 KB.', {
      reason: 'request_state_too_large',
    });
  }
  const requests = result.inputRequests;
  if (requests !== undefined && (requests === null || typeof requests !== 'object' || Array.isArray(requests))) {
    throw new GatehouseError('upstream_protocol_error', 'The upstream sent inputRequests that are not an object.', {
      reason: 'invalid_input_requests',
    });
  }
  return {
    inputRequired: {
      inputRequests: boundStrings((requests ?? {}) as Record<string, unknown>).value,
      ...(requestState !== undefined ? { requestState } : {}),
    },
  };
}
