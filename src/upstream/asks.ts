/**
 * Asks from a 2025-era upstream during a call: `sampling/createMessage`, `elicitation/create` and
 * `roots/list` sent to Gatehouse as server→client requests while the upstream works on a tool call.
 * Gatehouse has no user of its own, so each ask is relayed to the agent whose call it is (`AskRelay`,
 * given per call by the hub) and its answer sent back; an ask outside any relaying call is refused.
 *
 * To be asked at all, Gatehouse declares these client capabilities to 2025-era upstreams (only to
 * those: on 2026-07-28 the capabilities travel per request, the agent's own). Whether the agent can
 * answer a given ask is the relay's decision, per call.
 *
 * Both call paths relay: the direct one (`direct-legacy.ts`) reads the ask off the call's answer
 * stream; the SDK client's handlers find the relay of the call they run under through an async scope.
 */
import { type Client, type ClientCapabilities, ProtocolError } from '@modelcontextprotocol/client';
import { ScopedStorage } from '../async-scope.js';
import { boundStrings } from './bounds.js';
import type { Deadline } from './deadline.js';
import { logRelay } from './direct-call.js';
import type { Json } from './direct-wire.js';
import type { UpstreamLogMessage } from './types.js';

/** The methods a 2025-era upstream may ask the client during a call. */
export const ASK_METHODS = ['sampling/createMessage', 'elicitation/create', 'roots/list'] as const;
export type AskMethod = (typeof ASK_METHODS)[number];

export const isAskMethod = (method: unknown): method is AskMethod => ASK_METHODS.includes(method as AskMethod);

/** Declared at `initialize` to 2025-era upstreams, so they may ask; each ask is then checked against the agent. */
export const ASK_CAPABILITIES: ClientCapabilities = {
  sampling: {},
  elicitation: { form: {}, url: {} },
  roots: {},
};

/** One ask, as the upstream sent it (its params bounded like any upstream value by the relay). */
export interface Ask {
  method: AskMethod;
  params?: Record<string, unknown> | undefined;
}

/**
 * Relays an ask to the calling agent and resolves with its answer (the JSON-RPC result); rejects with
 * a `ProtocolError` the upstream is answered with (the agent refused, cannot answer, or went away).
 */
export type AskRelay = (ask: Ask, limits: AskLimits) => Promise<Record<string, unknown>>;

/** What bounds a relayed ask: the call's own deadline (the upstream is waiting inside that call). */
export interface AskLimits {
  signal: AbortSignal;
  /** Milliseconds left of the call's deadline. */
  timeoutMs: number;
}

/** Relays one ask, its strings bounded like any upstream value. */
export function relayAsk(relay: AskRelay, method: AskMethod, params: unknown, deadline: Deadline) {
  const bounded =
    params !== null && typeof params === 'object' ? boundStrings(params as Record<string, unknown>).value : undefined;
  return relay(
    { method, ...(bounded ? { params: bounded } : {}) },
    { signal: deadline.signal, timeoutMs: deadline.remaining() },
  );
}

const NOT_RELAYED = -32601;

/** The answer to an ask no call relays (outside a call, or a call whose agent cannot be asked). */
export const notRelayed = (method: string) =>
  new ProtocolError(
    NOT_RELAYED,
    `Gatehouse has no agent to relay ${method} to: no call on this session can be asked, or more than one.`,
  );

/**
 * The JSON-RPC error an upstream gets for an ask that failed: the agent's own protocol error (code and
 * message, bounded), or an internal error that says no more (a timeout, the agent gone).
 */
export function askError(error: unknown): { code: number; message: string } {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (Number.isSafeInteger(code) && typeof message === 'string') {
    return { code: code as number, message: message.slice(0, 1024) };
  }
  return { code: -32603, message: 'The agent could not be asked.' };
}

/**
 * A call in flight on the SDK client's path, and what it relays of what the upstream sends meanwhile: its
 * asks (`relay`, absent when the agent can be asked nothing) and its log messages (`onLog`).
 */
export interface AskingCall {
  relay?: AskRelay | undefined;
  onLog?: ((message: UpstreamLogMessage) => void) | undefined;
  deadline: Deadline;
}

const relays = new ScopedStorage<AskingCall>();

/**
 * Runs `work` (an SDK-client call) so the asks and log messages the upstream sends on its answer stream
 * reach `call` (the SDK dispatches them in the async scope of the request whose stream carried them).
 */
export function withCallRelays<T>(call: AskingCall | undefined, work: () => Promise<T>): Promise<T> {
  return call ? relays.run(call, work) : work();
}

/** `withCallRelays` for a call that relays asks only. */
export function withAskRelay<T>(relay: AskRelay | undefined, deadline: Deadline, work: () => Promise<T>): Promise<T> {
  return withCallRelays(relay ? { relay, deadline } : undefined, work);
}

/**
 * The SDK client's handlers for the asks (the client must have declared `ASK_CAPABILITIES`). An ask
 * read off a call's own answer stream goes to that call; one the upstream sent on the session's stream
 * (as the SDK's `requestSampling`/`elicitInput` do, related to no request) goes to `soleCall`, the one
 * asking call in flight on the session, and is refused when there is none or more than one.
 */
export function handleAsks(client: Client, soleCall: () => AskingCall | undefined): void {
  for (const method of ASK_METHODS) {
    client.setRequestHandler(method, async (request) => {
      const scope = relays.getStore() ?? soleCall();
      // A call whose agent can be asked nothing refuses what its own stream carries.
      if (!scope?.relay) throw notRelayed(method);
      // The SDK validates the result against the method's schema before it leaves.
      return (await relayAsk(scope.relay, method, (request as { params?: unknown }).params, scope.deadline)) as never;
    });
  }
}

/**
 * The SDK client's handler for `notifications/message`: a log message read off a call's own answer stream
 * goes to that call's `onLog` (bounded), as on the direct path. One related to no call (a 2025 session's GET
 * stream) is the session's, shared by every agent, and reaches none of them; `soleCall` (stdio, where every
 * message shares one pipe) names the one call in flight that may take it.
 */
export function handleLogs(client: Client, soleCall?: () => AskingCall | undefined): void {
  client.setNotificationHandler('notifications/message', (notification) => {
    const onLog = (relays.getStore() ?? soleCall?.())?.onLog;
    if (onLog) logRelay(onLog)?.(notification as unknown as Json);
  });
}

/** The calls in flight on each client whose channel ties no message to its call (stdio), for `relayToSoleCall`. */
const inFlight = new WeakMap<Client, Set<AskingCall>>();

/**
 * Relays for a client over one shared channel (stdio), where nothing ties an ask or a log message to the
 * call it belongs to: they go to the call in flight when there is exactly one (`asSoleCall`), and are
 * refused (asks) or dropped (logs) when there are several. `declaredAsks`: the client declared
 * `ASK_CAPABILITIES`.
 */
export function relayToSoleCall(client: Client, declaredAsks: boolean): void {
  const calls = new Set<AskingCall>();
  inFlight.set(client, calls);
  const sole = () => (calls.size === 1 ? [...calls][0] : undefined);
  if (declaredAsks) handleAsks(client, sole);
  handleLogs(client, sole);
}

/** Runs `work` as a call in flight on `client` (see `relayToSoleCall`; other clients: `work` alone). */
export async function asSoleCall<T>(client: Client, call: AskingCall, work: () => Promise<T>): Promise<T> {
  const calls = inFlight.get(client);
  if (!calls) return work();
  calls.add(call);
  try {
    return await work();
  } finally {
    calls.delete(call);
  }
}
