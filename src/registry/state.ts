/**
 * `state`: what the runtime sees now. URL servers get a 1.5 s TCP probe that
 * obeys the egress guard's address rules, cached for 10 s; stdio servers report
 * their process state (the supervisor's, once there is one).
 */
import type { EgressGuard } from '../egress/index.js';
import type { ServerView } from './records.js';

export type UrlState = 'reachable' | 'unreachable' | 'disabled';
/** `installing`: a first start (no successful connect yet), under the install budget rather than the handshake deadline. */
export type StdioState = 'installing' | 'starting' | 'running' | 'stopping' | 'stopped' | 'crashed' | 'backoff';

const PROBE_TIMEOUT_MS = 1500;
const CACHE_MS = 10_000;

export interface StateProbeOptions {
  guardFor(privateNetwork: boolean): EgressGuard;
  /** The process state of a stdio server; `stopped` when nothing supervises it. */
  stdioState?: (id: string) => StdioState;
  /** Whether a stdio server's child runs (or would run) in the sandbox: the gateway's mode and its record's `sandbox.mode`. */
  stdioSandboxed?: (server: Pick<ServerView, 'id' | 'sandbox'>) => boolean;
}

export class StateProbe {
  private readonly cache = new Map<string, { url: string; at: number; state: Promise<UrlState> }>();

  constructor(private readonly options: StateProbeOptions) {}

  async stateOf(server: Pick<ServerView, 'id' | 'transport' | 'url' | 'enabled' | 'privateNetwork'>): Promise<string> {
    if (!server.enabled) return 'disabled';
    if (server.transport === 'stdio') return this.options.stdioState?.(server.id) ?? 'stopped';
    const url = server.url ?? '';
    const cached = this.cache.get(server.id);
    if (cached && cached.url === url && Date.now() - cached.at < CACHE_MS) return cached.state;
    const state = this.options
      .guardFor(server.privateNetwork)
      .probeTcp(url, PROBE_TIMEOUT_MS)
      .then((ok): UrlState => (ok ? 'reachable' : 'unreachable'))
      // A target the guard refuses is not reachable for Gatehouse, whatever the network says.
      .catch((): UrlState => 'unreachable');
    this.cache.set(server.id, { url, at: Date.now(), state });
    return state;
  }

  /** For a stdio server, whether it is sandboxed (the list shows "sandbox off"); undefined for the others. */
  sandboxedOf(server: Pick<ServerView, 'id' | 'transport' | 'sandbox'>): boolean | undefined {
    if (server.transport !== 'stdio') return undefined;
    return this.options.stdioSandboxed?.(server) ?? server.sandbox?.mode !== 'off';
  }

  forget(id: string): void {
    this.cache.delete(id);
  }
}
