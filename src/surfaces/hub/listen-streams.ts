/**
 * A 2026-07-28 agent's own `subscriptions/listen` streams on the hub's endpoints, for resource updates.
 *
 * The SDK's handler owns the wire (ack first, filter, subscription id, teardown) and sources events from a
 * `ServerEventBus`; its bus broadcasts to every open stream and filters by URI string only, which on a
 * gateway would hand one agent's resources to anyone naming the same string. So the hub supplies its own bus:
 *
 * - Before the SDK serves a listen request naming `resourceSubscriptions`, each URI is resolved as
 *   `resources/subscribe` resolves it (wrapped on `/mcp`, raw on `/mcp/s/{id}`, the token's groups deciding
 *   what it may see) and subscribed upstream through the hub's `ResourceSubscriptions`, the stream being one
 *   more subscriber there. The request's filter is narrowed to the URIs that were: the ack names what is
 *   honored, and a URI the token may not see is left out exactly like one that does not exist.
 * - The SDK then calls `bus.subscribe(listener)` synchronously while it serves that request, inside the
 *   async context this module set around it: the listener is bound to the stream's subscriptions, and
 *   updates reach that listener alone, with the URI as the agent named it. An update arriving between the
 *   upstream's ack and the binding is held (one per URI) and sent right after the agent's ack.
 * - The unsubscribe the SDK calls when the stream ends (the agent closed it, the handler closes) releases
 *   them: the upstream is unsubscribed, or its stream narrowed, once nobody listens there.
 * - A URI of a server the token no longer sees (its exposure narrowed, the server disabled or removed) is
 *   dropped from the stream the same way (`ResourceSubscriptions.revoke`); the stream stays for what remains.
 *   A token given other groups ends its streams altogether (`McpEndpoint.endAccessOf`).
 *
 * List-changed events still go to every stream (they carry nothing of anyone's); a `resource_updated`
 * published on the bus is dropped, since it names no grant. Fleet: the replica holding the agent's stream
 * is the one that subscribed upstream, so updates arrive where the stream is and no cross-replica bus is
 * needed.
 */
import { setMaxListeners } from 'node:events';
import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';
import { ScopedStorage } from '../../async-scope.js';
import type { TokenPrincipal } from '../../identity/index.js';
import type { EndpointScope, ListenStreams } from '../endpoint.js';
import { resourceOwner, type SubscribeDeps, subscribeUpstream } from './subscribe-upstream.js';
import { MAX_SUBSCRIPTIONS_PER_SESSION, type Subscriber } from './subscriptions.js';
import { uriInsideWorkspace } from './workspace.js';

type Listener = (event: ServerEvent) => void;

/** Most listen streams the hub keeps open in one process (the SDK's default bound, made explicit). */
export const MAX_LISTEN_STREAMS = 1024;

/** One agent's listen stream as a subscriber of upstream resources. */
class ListenSink implements Subscriber {
  onclose?: (() => void) | undefined;
  /** Whether the SDK opened the stream this sink was prepared for (it is refused at its limit, or invalid). */
  claimed = false;
  private listener: Listener | undefined;
  private closed = false;
  /** Updates that came before the stream was bound, one per URI (bounded by the stream's subscriptions). */
  private readonly held = new Set<string>();

  async sendResourceUpdated({ uri }: { uri: string }): Promise<void> {
    if (this.closed) return;
    if (this.listener) this.listener({ kind: 'resource_updated', uri });
    else this.held.add(uri);
  }

  /** A URI it may no longer hear of: an update held for it is not sent after the ack. */
  revoked(uri: string): void {
    this.held.delete(uri);
  }

  bind(listener: Listener): void {
    this.claimed = true;
    this.listener = listener;
    // After the SDK wrote its ack (it subscribes right after), never inside its `subscribe` call.
    queueMicrotask(() => {
      for (const uri of this.held) if (!this.closed) listener({ kind: 'resource_updated', uri });
      this.held.clear();
    });
  }

  /** The stream ended (or was never opened): its subscriptions go. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.listener = undefined;
    this.held.clear();
    this.onclose?.();
  }
}

/** The resource URIs of a well-formed `subscriptions/listen` request, or undefined for anything else. */
function listenedUris(body: unknown): string[] | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const { method, params } = body as {
    method?: unknown;
    params?: { notifications?: { resourceSubscriptions?: unknown } };
  };
  if (method !== 'subscriptions/listen') return undefined;
  const uris = params?.notifications?.resourceSubscriptions;
  if (!Array.isArray(uris) || uris.length === 0 || !uris.every((u) => typeof u === 'string')) return undefined;
  return uris as string[];
}

/** The request with its filter's `resourceSubscriptions` narrowed to `honored`. */
function narrowed(body: unknown, honored: string[]): unknown {
  const request = body as { params: { notifications: Record<string, unknown> } };
  return {
    ...request,
    params: { ...request.params, notifications: { ...request.params.notifications, resourceSubscriptions: honored } },
  };
}

export class HubListenStreams implements ListenStreams, ServerEventBus {
  readonly bus: ServerEventBus = this;
  /** The sink prepared for the listen request being served (read by `subscribe`). */
  private readonly preparing = new ScopedStorage<ListenSink>();
  private readonly listeners = new Set<Listener>();

  constructor(
    private readonly deps: SubscribeDeps,
    readonly maxStreams: number,
  ) {}

  async serve(
    principal: TokenPrincipal,
    scope: EndpointScope,
    body: unknown,
    signal: AbortSignal,
    fetch: (body: unknown) => Promise<Response>,
  ): Promise<Response> {
    const uris = listenedUris(body);
    // At the limit the SDK refuses the stream: no upstream is subscribed for it first.
    if (!uris || this.listeners.size >= this.maxStreams) return fetch(body);
    const sink = new ListenSink();
    const honored = await this.prepare(principal, scope, uris, sink, signal);
    try {
      return await this.preparing.run(sink, () => fetch(narrowed(body, honored)));
    } finally {
      if (!sink.claimed) sink.close();
    }
  }

  /** Subscribes `sink` to each URI the token may see (the first ones, up to the bound); answers those it holds. */
  private async prepare(
    principal: TokenPrincipal,
    scope: EndpointScope,
    uris: string[],
    sink: ListenSink,
    signal: AbortSignal,
  ): Promise<string[]> {
    const wanted = [...new Set(uris)].slice(0, MAX_SUBSCRIPTIONS_PER_SESSION);
    const snapshot = await this.deps.registry.snapshot();
    // One abort listener per URI in flight, each on this request's own signal (bounded: not a leak).
    const scoped = AbortSignal.any([signal]);
    setMaxListeners(wanted.length + 10, scoped);
    const held = await Promise.all(
      wanted.map(async (uri) => {
        const target = resourceOwner(snapshot, scope, principal.groups, uri);
        // A `file:` URI outside the server's workspace roots is left out of the ack, as one of no server is.
        if (!target || !uriInsideWorkspace(target.owner.detail, target.uri)) return false;
        // An upstream that cannot subscribe, or cannot be reached, leaves its URI out of the ack.
        return subscribeUpstream(this.deps, snapshot, target, principal, sink, uri, scoped).catch(() => false);
      }),
    );
    return wanted.filter((_, i) => held[i]);
  }

  publish(event: ServerEvent): void {
    if (event.kind === 'resource_updated') return;
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // One stream's failure does not stop the others (the SDK's listeners do not throw).
      }
    }
  }

  subscribe(listener: Listener): () => void {
    const sink = this.preparing.getStore();
    const claimed = sink && !sink.claimed ? sink : undefined;
    claimed?.bind(listener);
    this.listeners.add(listener);
    let live = true;
    return () => {
      if (!live) return;
      live = false;
      this.listeners.delete(listener);
      claimed?.close();
    };
  }
}
