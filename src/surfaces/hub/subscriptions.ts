/**
 * Resource subscriptions through the hub (2025 era): an agent session's `resources/subscribe` is passed to the
 * upstream that owns the URI (unwrapped from `gatehouse://` on `/mcp`), and the upstream's
 * `notifications/resources/updated` for that URI reach every agent session subscribed to it, with the URI the
 * agent used (wrapped again on `/mcp`).
 *
 * Upstream connections are shared by agents, so the relay keeps, per upstream client, which agent sessions
 * listen to which upstream URI; the upstream is unsubscribed when the last of them leaves. A session that
 * closes drops its subscriptions.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { Server } from '@modelcontextprotocol/server';

/** One agent session's interest in one upstream URI. */
interface Listener {
  agent: Server;
  /** The URI as the agent knows it (wrapped on `/mcp`). */
  exposedUri: string;
}

/** Most subscriptions one agent session may hold (a bound, like every list the hub keeps). */
export const MAX_SUBSCRIPTIONS_PER_SESSION = 100;

export class ResourceSubscriptions {
  /** Upstream client → upstream URI → listeners. */
  private readonly byClient = new WeakMap<Client, Map<string, Set<Listener>>>();
  /** Agent session → its listeners, with the client and URI each is registered under. */
  private readonly byAgent = new WeakMap<Server, Map<string, { client: Client; uri: string; listener: Listener }>>();

  /** Records `agent`'s subscription (after the upstream accepted it). Answers false when over the session's bound. */
  add(client: Client, uri: string, agent: Server, exposedUri: string): boolean {
    const mine = this.byAgent.get(agent) ?? new Map();
    if (mine.has(exposedUri)) return true;
    if (mine.size >= MAX_SUBSCRIPTIONS_PER_SESSION) return false;
    let uris = this.byClient.get(client);
    if (!uris) {
      uris = new Map();
      this.byClient.set(client, uris);
      this.listen(client, uris);
    }
    const listener: Listener = { agent, exposedUri };
    const listeners = uris.get(uri) ?? new Set();
    listeners.add(listener);
    uris.set(uri, listeners);
    mine.set(exposedUri, { client, uri, listener });
    if (!this.byAgent.has(agent)) {
      this.byAgent.set(agent, mine);
      // A session that ends takes its subscriptions with it.
      const previous = agent.onclose;
      agent.onclose = () => {
        previous?.();
        for (const key of [...mine.keys()]) this.remove(agent, key);
      };
    }
    return true;
  }

  /**
   * Forgets `agent`'s subscription to `exposedUri`. Answers the upstream client and URI to unsubscribe when
   * no other session listens there any more.
   */
  remove(agent: Server, exposedUri: string): { client: Client; uri: string } | undefined {
    const mine = this.byAgent.get(agent);
    const entry = mine?.get(exposedUri);
    if (!mine || !entry) return undefined;
    mine.delete(exposedUri);
    const listeners = this.byClient.get(entry.client)?.get(entry.uri);
    listeners?.delete(entry.listener);
    if (listeners && listeners.size > 0) return undefined;
    this.byClient.get(entry.client)?.delete(entry.uri);
    return { client: entry.client, uri: entry.uri };
  }

  private listen(client: Client, uris: Map<string, Set<Listener>>): void {
    client.setNotificationHandler('notifications/resources/updated', (notification) => {
      const uri = notification.params.uri;
      for (const { agent, exposedUri } of uris.get(uri) ?? []) {
        void agent.sendResourceUpdated({ uri: exposedUri }).catch(() => {});
      }
    });
  }
}
