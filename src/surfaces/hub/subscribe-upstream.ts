/**
 * One agent's subscription to one resource, made on the upstream that owns it: shared by a 2025-era session's
 * `resources/subscribe` (`server.ts`) and a 2026-07-28 agent's own `subscriptions/listen` stream
 * (`listen-streams.ts`), so both resolve URIs, check access and reach upstreams one way (`subscriptions.ts`).
 */
import type { Client } from '@modelcontextprotocol/client';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { Principal } from '../../identity/index.js';
import type { UpstreamChannel } from '../../upstream/index.js';
import type { CallScope } from './calls.js';
import { isGatehouseUri, unwrapResourceUri } from './names.js';
import type { Reach, ResourceSubscriptions, Subscriber } from './subscriptions.js';
import type { GrantOptions, HubRegistry, HubServer, Snapshot } from './view.js';

export interface SubscribeDeps {
  registry: HubRegistry;
  /** Runs `fn` on a connected client of the server's upstream (prompts and resources). */
  withUpstream<T>(
    snapshot: Snapshot,
    server: HubServer,
    fn: (client: Client, signal: AbortSignal) => Promise<T>,
    signal: AbortSignal,
    /** Whose OAuth grant a server with `auth: oauth` is contacted with. */
    principal?: Principal,
    /** `connectLink: false`: a missing grant starts no connect flow (a list, not the person's own call). */
    options?: GrantOptions,
  ): Promise<T>;
  /** Agent sessions' and listen streams' resource subscriptions, relayed from the upstreams' updates. */
  subscriptions: ResourceSubscriptions;
  /** A connection of its own to an upstream (a stdio server's one client), for a 2026-07-28 listen stream. */
  openChannel(snapshot: Snapshot, server: HubServer, principal: Principal): Promise<UpstreamChannel>;
  /** How long an upstream may take to acknowledge a listen stream (and, here, to answer an unsubscribe). */
  listTimeoutMs: number;
}

/**
 * The server that owns a resource URI an agent gave in `scope`, and the URI as that server knows it; undefined
 * for a URI of no server the caller sees. On `/mcp` the URI is the wrapped form; on `/mcp/s/{id}` any URI of
 * that server but the aggregate's own `gatehouse://` ones (the upstream answers for what it does not have);
 * a toolset has no resources.
 */
export function resourceOwner(
  snapshot: Snapshot,
  scope: CallScope,
  groups: readonly string[],
  given: string,
): { owner: HubServer; uri: string } | undefined {
  let hub: HubServer | undefined;
  let uri = given;
  if (scope.kind === 'aggregate') {
    const unwrapped = unwrapResourceUri(uri);
    hub = unwrapped ? snapshot.server(unwrapped.serverId, groups) : undefined;
    if (unwrapped) uri = unwrapped.uri;
  } else if (scope.kind === 'single') hub = snapshot.server(scope.serverId, groups);
  if (!hub || uri.length === 0 || (scope.kind === 'single' && isGatehouseUri(uri))) return undefined;
  return { owner: hub, uri };
}

/** Whether `groups` still see server `serverId`: the check `resourceOwner` makes, for a subscription already held. */
export function reaches(snapshot: Snapshot, serverId: string, groups: readonly string[]): boolean {
  return snapshot.server(serverId, groups) !== undefined;
}

/**
 * Drops the subscriptions to `serverId`'s resources that their subscribers could no longer make (its exposure
 * narrowed, or it was disabled or removed): run when that server changed, on the snapshot that followed.
 */
export function revokeUnreachable(subscriptions: ResourceSubscriptions, snapshot: Snapshot, serverId: string) {
  return subscriptions.revoke(serverId, (groups) => reaches(snapshot, serverId, groups));
}

/**
 * Subscribes `subscriber` to `uri` of `owner` (the URI it named being `exposedUri`): a 2025-era upstream with
 * `resources/subscribe` on its pooled connection, a 2026-07-28 one through the hub's listen stream there (one
 * per upstream and OAuth user: a per-user grant's updates are that user's). Settles once the upstream accepted;
 * answers false when the subscriber holds the most subscriptions it may; rejects when the upstream cannot
 * subscribe or could not be reached, or the subscriber lost the server meanwhile (holding nothing).
 */
export async function subscribeUpstream(
  deps: SubscribeDeps,
  snapshot: Snapshot,
  target: { owner: HubServer; uri: string },
  principal: Principal,
  subscriber: Subscriber,
  exposedUri: string,
  signal: AbortSignal,
): Promise<boolean> {
  const { owner } = target;
  if (!deps.subscriptions.hasRoom(subscriber, exposedUri)) return false;
  const reach = { serverId: owner.row.id, groups: principal.groups };
  const added = await subscribeOn(deps, snapshot, target, principal, subscriber, exposedUri, reach, signal);
  // The server may have changed while the upstream was asked, its `revoke` run before this was held: the same
  // check again, on the servers as they are now (cached; a snapshot that cannot be built keeps the one checked).
  const now = await deps.registry.snapshot().catch(() => snapshot);
  if (added && !reaches(now, reach.serverId, reach.groups)) {
    await deps.subscriptions.remove(subscriber, exposedUri);
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Resource ${exposedUri} not found`);
  }
  return added;
}

async function subscribeOn(
  deps: SubscribeDeps,
  snapshot: Snapshot,
  target: { owner: HubServer; uri: string },
  principal: Principal,
  subscriber: Subscriber,
  exposedUri: string,
  reach: Reach,
  signal: AbortSignal,
): Promise<boolean> {
  const { owner, uri } = target;
  const era = await deps.withUpstream(
    snapshot,
    owner,
    async (client, signal) => {
      if (!client.getServerCapabilities()?.resources?.subscribe) {
        throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Server ${owner.row.id} has no subscriptions`);
      }
      // A 2026-07-28 upstream has no resources/subscribe: its updates come on a listen stream (below).
      if (client.getProtocolEra() === 'modern') return 'modern';
      await client.subscribeResource({ uri }, { signal });
      // Told when the last listener there leaves, on that very connection (a newer one never subscribed); a
      // server since disabled or removed is not contacted again for it.
      const unsubscribe = async () => {
        const snapshot = await deps.registry.snapshot();
        if (!snapshot.servers.get(owner.row.id)?.detail.enabled) return;
        await deps.withUpstream(
          snapshot,
          owner,
          (now, signal) => (now === client ? now.unsubscribeResource({ uri }, { signal }) : Promise.resolve({})),
          AbortSignal.timeout(deps.listTimeoutMs),
          principal,
        );
      };
      return deps.subscriptions.add(client, uri, subscriber, exposedUri, reach, unsubscribe) ? 'legacy' : 'full';
    },
    signal,
    principal,
  );
  if (era === 'full') return false;
  if (era === 'legacy') return true;
  const key = `${owner.row.id}\n${principal.user?.id ?? ''}`;
  const opener = { open: () => deps.openChannel(snapshot, owner, principal), timeoutMs: deps.listTimeoutMs };
  return deps.subscriptions.addListened(key, opener, uri, subscriber, exposedUri, reach);
}
