/**
 * Spawns a stdio MCP server and connects an SDK `Client` to it over the spawner's transport.
 *
 * Era: with no remembered verdict the client negotiates (`versionNegotiation: {mode: 'auto'}`),
 * which on this custom transport probes IN PLACE — one `server/discover` on the same pipe, no
 * sibling process. A legacy server answers it with an error (-32601/-32602: legacy, `initialize`
 * follows on the same pipe) or stays silent (the probe times out: legacy on stdio). Servers built
 * on SDKs that exit on any request before `initialize` end the child instead: the SDK then fails the
 * connect ("closed during the server/discover probe"), and this module starts a fresh child and
 * connects it with `prior: {kind: 'legacy'}`. The verdict is returned for the caller to remember;
 * with a remembered verdict there is no probe at all (modern: zero round trips; legacy: straight
 * to `initialize`). A remembered verdict the server contradicts at connect is dropped and the
 * connect negotiated afresh on a new child.
 *
 * On any failure the child is stopped (its group reaped) before the typed error is thrown. The spec's
 * `onStderrLine`/`onNoiseLine` hear every child spawned here; `onExit` only the one handed back.
 */
import { Client, type Implementation, type PriorDiscovery, SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import { findGatehouseError, GatehouseError } from '../../errors.js';
import { relayToSoleCall } from '../asks.js';
import { LEGACY_CLIENT_CAPABILITIES } from '../client-capabilities.js';
import { Deadline } from '../deadline.js';
import { isEraMismatch, toUpstreamError } from '../map-error.js';
import { type StdioChild, type StdioSpec, spawnStdio } from './spawn.js';

const CLIENT_INFO: Implementation = { name: 'gatehouse', version: '0.1.0' };
/** Default ceiling of the in-place probe: a silent server is legacy after this long. */
const DEFAULT_PROBE_TIMEOUT_MS = 10_000;
/** Grace for a child whose connect failed: it never served anything worth waiting for. */
const FAILED_CONNECT_GRACE_MS = 1000;

export interface ConnectStdioOptions {
  /** The remembered era verdict for this record; without one the client probes. */
  era?: PriorDiscovery;
  /** Deadline of the whole connect: spawning, probing, `initialize`, and a retry on a fresh child. */
  timeoutMs: number;
  /**
   * How long the `server/discover` probe waits before calling a silent server legacy; default
   * `min(timeoutMs, 10 s)`. A slow starter misjudged legacy still connects (modern SDK servers
   * answer `initialize` too; a modern-only one is re-negotiated on a fresh child).
   */
  probeTimeoutMs?: number;
  /** The caller's cancellation. */
  signal?: AbortSignal;
  clientInfo?: Implementation;
  /** Out-of-band errors of the connected client (protocol garbage, late replies). */
  onError?: (error: Error) => void;
}

export interface StdioConnection {
  client: Client;
  child: StdioChild;
  /** The verdict to remember for this record. */
  era: PriorDiscovery;
  /** How many children were spawned to get here (1 normally; 2 after a retry). */
  attempts: number;
}

interface Attempt {
  prior: PriorDiscovery | undefined;
}

export async function connectStdio(spec: StdioSpec, options: ConnectStdioOptions): Promise<StdioConnection> {
  const deadline = new Deadline(options.timeoutMs, options.signal);
  const tried: Attempt[] = [];
  try {
    let prior = options.era;
    for (;;) {
      if (deadline.expired) throw deadline.error();
      tried.push({ prior });
      // `onExit` is for the child handed back: a child discarded here is part of a failed connect.
      let adopted = false;
      const onExit = spec.onExit;
      const attemptSpec: StdioSpec = onExit ? { ...spec, onExit: (info) => adopted && onExit(info) } : spec;
      // Not raced against the deadline: a spawn settles at once, and a child must never be left unowned.
      const child = await spawnStdio(attemptSpec);
      try {
        const client = await connectClient(child, prior, deadline, options);
        adopted = true;
        return { client, child, era: verdictOf(client), attempts: tried.length };
      } catch (error) {
        await child.stop(FAILED_CONNECT_GRACE_MS);
        const next = tried.length < 3 && !deadline.expired ? retryWith(prior, error, child) : undefined;
        if (next === undefined) {
          if (deadline.expired) throw deadline.error(error);
          throw stdioError(error, child);
        }
        prior = next.prior;
      }
    }
  } finally {
    deadline.dispose();
  }
}

async function connectClient(
  child: StdioChild,
  prior: PriorDiscovery | undefined,
  deadline: Deadline,
  options: ConnectStdioOptions,
): Promise<Client> {
  const probeTimeoutMs = Math.min(options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS, options.timeoutMs);
  // A 2025-era server may ask the calling agent (`asks.ts`): declared unless the server is known to be
  // 2026-07-28, whose asks ride its results (and whose tools/call envelopes carry the agent's own capabilities).
  const declareAsks = prior?.kind !== 'modern';
  const client = new Client(options.clientInfo ?? CLIENT_INFO, {
    versionNegotiation: {
      mode: 'auto',
      probe: { timeoutMs: Math.max(1, Math.min(probeTimeoutMs, deadline.remaining())) },
    },
    // Gatehouse has no user to ask: an upstream's request for input is a typed error, not a hang.
    inputRequired: { autoFulfill: false },
    // What a 2025-era session declares: the asks Gatehouse relays, and MCP Apps (`client-capabilities.ts`).
    ...(declareAsks ? { capabilities: LEGACY_CLIENT_CAPABILITIES } : {}),
  });
  // One pipe carries every call's messages: asks and log messages go to the sole call in flight.
  relayToSoleCall(client, declareAsks);
  if (options.onError) client.onerror = options.onError;
  await deadline.race(
    client.connect(child.transport, {
      timeout: deadline.remaining(),
      signal: deadline.signal,
      ...(prior && { prior }),
    }),
  );
  return client;
}

/** The verdict a connected client proves. */
function verdictOf(client: Client): PriorDiscovery {
  const discover = client.getDiscoverResult();
  return client.getProtocolEra() === 'modern' && discover ? { kind: 'modern', discover } : { kind: 'legacy' };
}

/**
 * Whether a failed connect deserves one more child, and with which verdict:
 * - negotiating, and the child died under the probe: a legacy server that exits on pre-`initialize`
 *   requests → a fresh child, `prior: legacy` (no probe this time);
 * - a remembered verdict the server refused (an era mismatch) → a fresh child, negotiating.
 */
function retryWith(prior: PriorDiscovery | undefined, error: unknown, child: StdioChild): Attempt | undefined {
  if (findGatehouseError(error)) return undefined;
  if (prior === undefined) {
    const negotiationFailed = error instanceof SdkError && error.code === SdkErrorCode.EraNegotiationFailed;
    const diedUnderProbe = child.exitInfo !== undefined && child.exitInfo.reason === 'exited';
    return negotiationFailed && diedUnderProbe ? { prior: { kind: 'legacy' } } : undefined;
  }
  return isStdioEraMismatch(error) ? { prior: undefined } : undefined;
}

/**
 * Whether a failure on a connection made from a remembered verdict says the server changed era, so
 * the verdict should be forgotten and the next connect negotiated. Besides the HTTP shapes
 * (`isEraMismatch`: -32022, -32600, a negotiation without overlap), a 2025-era stdio server given a
 * remembered modern verdict answers the first request without the `resultType` a 2026 result must
 * carry (SDK `InvalidResult`, violation `missing-resultType`), or refuses it as uninitialized.
 */
export function isStdioEraMismatch(error: unknown): boolean {
  if (isEraMismatch(error)) return true;
  if (error instanceof SdkError && error.code === SdkErrorCode.InvalidResult) {
    return (error.data as { violation?: unknown } | undefined)?.violation === 'missing-resultType';
  }
  return false;
}

/** SDK failures that mean "the channel to the child is gone" (the SDK also throws a plain `Error('Not connected')`). */
function isChannelGone(error: unknown): boolean {
  if (error instanceof SdkError) {
    return [
      SdkErrorCode.ConnectionClosed,
      SdkErrorCode.NotConnected,
      SdkErrorCode.SendFailed,
      SdkErrorCode.EraNegotiationFailed,
    ].includes(error.code);
  }
  return error instanceof Error && error.message === 'Not connected';
}

/**
 * The typed error for a failure on a stdio connection: when the child ended (it exited, a bound
 * ended it, or it was stopped), calls that failed because the channel closed get the child's own
 * reason; everything else is mapped as for HTTP upstreams.
 */
export function stdioError(error: unknown, child?: StdioChild): GatehouseError {
  const found = findGatehouseError(error);
  if (found) return found;
  if (child && !child.running && isChannelGone(error)) {
    const failure = child.failure;
    if (failure) return new GatehouseError(failure.code, failure.message, failure.details, { cause: error });
    return new GatehouseError(
      'upstream_unreachable',
      `The stdio server "${child.label}" was stopped.`,
      { reason: 'child_stopped' },
      { cause: error },
    );
  }
  return toUpstreamError(error);
}
