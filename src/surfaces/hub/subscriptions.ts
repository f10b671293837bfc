/**
 * Resource subscriptions through the hub: an agent session's `resources/subscribe` is passed to the upstream
 * that owns the URI (unwrapped from `gatehouse://` on `/mcp`), and the upstream's
 * `notifications/resources/updated` for that URI reach every agent session subscribed to it, with the URI the
 * agent used (wrapped again on `/mcp`).
 *
 * - A 2025-era upstream is subscribed with `resources/subscribe` on the connection the request ran on, and
 *   sends its updates unsolicited on that session.
 * - A 2026-07-28 upstream has no `resources/subscribe`: a client names the URIs it wants updates for in the
 *   `resourceSubscriptions` of a `subscriptions/listen` stream. The hub keeps one such stream per upstream
 *   (and per OAuth user, for a server reached with per-user grants), on a connection of its own
 *   (`UpstreamPool.openChannel`), naming every URI some agent session listens to there: when that set
 *   changes, a new stream with the new set is opened (and acknowledged) before the old one is closed, so no
 *   update is lost in between. A stream the upstream ends (a restart) is opened again, a few times, while
 *   anyone listens.
 *
 * Upstream connections are shared by agents, so the relay keeps which agent sessions listen to which upstream
 * URI; the upstream is unsubscribed (or the URI left out of the stream) when the last of them leaves. A
 * session that closes drops its subscriptions, and so does one that may no longer see the server owning the URI
 * (its exposure narrowed, the server disabled or removed: `revoke`, run when servers change, never per update).
 *
 * A subscriber is a 2025-era agent session (its `Server`), or a 2026-07-28 agent's own `subscriptions/listen`
 * stream (`listen-streams.ts`): anything that can be sent an update and says when it closes.
 */
import type { Client, McpSubscription } from '@modelcontextprotocol/client';
import type { UpstreamChannel } from '../../upstream/index.js';

/** Who is told of updates: an agent session's `Server`, or an agent's listen stream. */
export interface Subscriber {
  sendResourceUpdated(params: { uri: string }): Promise<void>;
  /** Set here: the subscriber calls it when it ends, and its subscriptions go with it. */
  onclose?: (() => void) | undefined;
  /** Its subscription to `exposedUri` was revoked: an update it still holds for it is not sent. */
  revoked?(exposedUri: string): void;
}

/** What a subscription was allowed by, checked again when servers change: the owning server, the caller's groups. */
export interface Reach {
  serverId: string;
  groups: readonly string[];
}

/** One agent session's interest in one upstream URI. */
interface Listener {
  agent: Subscriber;
  /** The URI as the agent knows it (wrapped on `/mcp`). */
  exposedUri: string;
  reach: Reach;
}

/** Most subscriptions one agent session may hold (a bound, like every list the hub keeps). */
export const MAX_SUBSCRIPTIONS_PER_SESSION = 100;

/** Most times a listen stream the upstream ended is opened again in a row, and the first pause between tries. */
const MAX_RELISTENS = 5;
const RELISTEN_DELAY_MS = 500;

/** How a 2026-07-28 upstream's listen streams are reached: a channel of their own, and the ack's deadline. */
export interface ListenOpener {
  open(): Promise<UpstreamChannel>;
  timeoutMs: number;
}

/** One 2026-07-28 upstream's stream of resource updates, for every URI some session listens to there. */
interface Listened {
  key: string;
  opener: ListenOpener;
  uris: Map<string, Set<Listener>>;
  channel?: Promise<UpstreamChannel> | undefined;
  subscription?: McpSubscription | undefined;
  /** Changes to the stream, one at a time. */
  queue: Promise<void>;
  /** Streams the upstream ended in a row (reset by one that is acknowledged). */
  failures: number;
  /** The URIs the current stream names (sorted, joined): a change that leaves them as they are opens none. */
  named?: string | undefined;
}

interface Entry {
  listener: Listener;
  /** Forgets the listener; settles once the upstream was told, when it had to be (the last listener left). */
  release(): Promise<void>;
}

export class ResourceSubscriptions {
  /** Upstream client → upstream URI → listeners (2025 era). */
  private readonly byClient = new WeakMap<Client, Map<string, Set<Listener>>>();
  /** Upstream key → its listen stream (2026-07-28). */
  private readonly listened = new Map<string, Listened>();
  /** Agent session → its subscriptions, by the URI it used. */
  private readonly byAgent = new WeakMap<Subscriber, Map<string, Entry>>();
  /** Server id → the listeners of its URIs, both eras (what `revoke` checks; each leaves with its entry). */
  private readonly byServer = new Map<string, Set<Listener>>();

  /** Whether `agent` may hold one more subscription (or already holds this one). */
  hasRoom(agent: Subscriber, exposedUri: string): boolean {
    const mine = this.byAgent.get(agent);
    return !mine || mine.has(exposedUri) || mine.size < MAX_SUBSCRIPTIONS_PER_SESSION;
  }

  /**
   * Records `agent`'s subscription (after the upstream accepted it); `unsubscribe` tells the upstream when the
   * last listener of `uri` there leaves. Answers false when over the session's bound.
   */
  add(
    client: Client,
    uri: string,
    agent: Subscriber,
    exposedUri: string,
    reach: Reach,
    unsubscribe: () => Promise<unknown>,
  ): boolean {
    const mine = this.mine(agent);
    if (mine.has(exposedUri)) return true;
    if (mine.size >= MAX_SUBSCRIPTIONS_PER_SESSION) return false;
    let uris = this.byClient.get(client);
    if (!uris) {
      uris = new Map();
      this.byClient.set(client, uris);
      this.listen(client, uris);
    }
    const listener: Listener = { agent, exposedUri, reach };
    const listeners = uris.get(uri) ?? new Set();
    listeners.add(listener);
    uris.set(uri, listeners);
    const known = uris;
    this.hold(mine, listener, async () => {
      listeners.delete(listener);
      // Another session may have subscribed again since: only the set still on record is the live one.
      if (listeners.size > 0 || known.get(uri) !== listeners) return;
      known.delete(uri);
      await unsubscribe().catch(() => {});
    });
    return true;
  }

  /**
   * Subscribes `agent` to `uri` of the 2026-07-28 upstream `key`: the upstream's listen stream is opened (or
   * opened again with the URI added) and acknowledged before this resolves. Answers false when over the
   * session's bound; rejects (holding nothing) when the upstream could not be reached.
   */
  async addListened(
    key: string,
    opener: ListenOpener,
    uri: string,
    agent: Subscriber,
    exposedUri: string,
    reach: Reach,
  ): Promise<boolean> {
    const mine = this.mine(agent);
    if (mine.has(exposedUri)) return true;
    if (mine.size >= MAX_SUBSCRIPTIONS_PER_SESSION) return false;
    let record = this.listened.get(key);
    if (!record) {
      record = { key, opener, uris: new Map(), queue: Promise.resolve(), failures: 0 };
      this.listened.set(key, record);
    }
    const listener: Listener = { agent, exposedUri, reach };
    const listeners = record.uris.get(uri);
    if (listeners) listeners.add(listener);
    else record.uris.set(uri, new Set([listener]));
    const target = record;
    const release = this.hold(mine, listener, () => {
      const set = target.uris.get(uri);
      set?.delete(listener);
      if (set && set.size === 0) {
        target.uris.delete(uri);
        void this.relisten(target).catch(() => {});
      }
      return Promise.resolve();
    });
    // A URI the stream names already needs no new stream.
    if (listeners) return true;
    try {
      await this.relisten(record);
    } catch (error) {
      mine.delete(exposedUri);
      void release();
      throw error;
    }
    return true;
  }

  /**
   * Forgets `agent`'s subscription to `exposedUri`. When no other session listens there any more, the
   * upstream is told (2025 era: settles once it answered) or its stream narrowed (2026-07-28).
   */
  async remove(agent: Subscriber, exposedUri: string): Promise<void> {
    const mine = this.byAgent.get(agent);
    const entry = mine?.get(exposedUri);
    if (!mine || !entry) return;
    mine.delete(exposedUri);
    await entry.release();
  }

  /**
   * Drops the subscriptions to server `serverId`'s URIs whose subscriber it no longer `reaches` (given the groups
   * it subscribed with: the check made then, on the servers as they are now), as `remove` would: the upstream is
   * told, or its stream narrowed, once nobody there listens. Run when servers change; a subscription that began
   * on an older view checks itself once it is held (`subscribeUpstream`).
   */
  /** Whether anyone is subscribed to a URI of server `serverId` (else a change to it has nothing to revoke). */
  listensTo(serverId: string): boolean {
    return this.byServer.has(serverId);
  }

  async revoke(serverId: string, reaches: (groups: readonly string[]) => boolean): Promise<void> {
    const lost = [...(this.byServer.get(serverId) ?? [])].filter((listener) => !reaches(listener.reach.groups));
    await Promise.all(
      lost.map(({ agent, exposedUri }) => {
        agent.revoked?.(exposedUri);
        return this.remove(agent, exposedUri);
      }),
    );
  }

  /** Closes every listen stream and its channel (the hub is closing). */
  async close(): Promise<void> {
    const records = [...this.listened.values()];
    this.listened.clear();
    this.byServer.clear();
    await Promise.all(
      records.map(async (record) => {
        record.uris.clear();
        await record.queue.catch(() => {});
        await this.drop(record);
      }),
    );
  }

  /** Records `listener` under its agent and its server; answers its release, which forgets it in both. */
  private hold(mine: Map<string, Entry>, listener: Listener, release: () => Promise<void>): () => Promise<void> {
    const { serverId } = listener.reach;
    let held = this.byServer.get(serverId);
    if (!held) {
      held = new Set();
      this.byServer.set(serverId, held);
    }
    held.add(listener);
    const released = () => {
      const now = this.byServer.get(serverId);
      now?.delete(listener);
      if (now?.size === 0) this.byServer.delete(serverId);
      return release();
    };
    mine.set(listener.exposedUri, { listener, release: released });
    return released;
  }

  private mine(agent: Subscriber): Map<string, Entry> {
    let mine = this.byAgent.get(agent);
    if (!mine) {
      const entries = new Map<string, Entry>();
      mine = entries;
      this.byAgent.set(agent, entries);
      // A session that ends takes its subscriptions with it.
      const previous = agent.onclose;
      agent.onclose = () => {
        previous?.();
        for (const key of [...entries.keys()]) void this.remove(agent, key);
      };
    }
    return mine;
  }

  private listen(client: Client, uris: Map<string, Set<Listener>>): void {
    client.setNotificationHandler('notifications/resources/updated', (notification) => {
      const uri = notification.params.uri;
      for (const { agent, exposedUri } of uris.get(uri) ?? []) {
        void agent.sendResourceUpdated({ uri: exposedUri }).catch(() => {});
      }
    });
  }

  /** Brings `record`'s stream in line with its URIs (queued behind earlier changes); rejects when that failed. */
  private relisten(record: Listened): Promise<void> {
    const run = record.queue.then(() => this.applyListen(record));
    record.queue = run.catch(() => {});
    return run;
  }

  private async applyListen(record: Listened): Promise<void> {
    const uris = [...record.uris.keys()];
    if (uris.length === 0) {
      await this.drop(record);
      return;
    }
    // Several URIs added at once queue one change each: the first stream already names them all.
    const named = [...uris].sort().join('\n');
    if (record.subscription && record.named === named) return;
    if (!record.channel) {
      const opening = record.opener.open();
      record.channel = opening;
      opening.then(
        (channel) => {
          channel.client.setNotificationHandler('notifications/resources/updated', (notification) => {
            for (const { agent, exposedUri } of record.uris.get(notification.params.uri) ?? []) {
              void agent.sendResourceUpdated({ uri: exposedUri }).catch(() => {});
            }
          });
          // A channel that dies is replaced at the next change, or when its stream's end is noticed.
          void channel.ended.then(() => {
            if (record.channel === opening) record.channel = undefined;
          });
        },
        () => {
          if (record.channel === opening) record.channel = undefined;
        },
      );
    }
    const channel = await record.channel;
    const previous = record.subscription;
    const next = await channel.client.listen({ resourceSubscriptions: uris }, { timeout: record.opener.timeoutMs });
    record.subscription = next;
    record.named = named;
    record.failures = 0;
    void next.closed.then((cause) => this.ended(record, next, cause));
    await previous?.close().catch(() => {});
  }

  /** A stream ended: one the upstream ended while it is still the current one is opened again. */
  private ended(record: Listened, subscription: McpSubscription, cause: string): void {
    if (cause === 'local' || record.subscription !== subscription) return;
    record.subscription = undefined;
    this.retry(record);
  }

  /** Opens `record`'s stream again after a pause that doubles, while anyone listens, a few times in a row. */
  private retry(record: Listened): void {
    if (record.uris.size === 0 || this.listened.get(record.key) !== record) return;
    record.failures += 1;
    if (record.failures > MAX_RELISTENS) return;
    const timer = setTimeout(
      () => void this.relisten(record).catch(() => this.retry(record)),
      RELISTEN_DELAY_MS * 2 ** (record.failures - 1),
    );
    timer.unref();
  }

  /** Ends `record`'s stream and channel and forgets it. */
  private async drop(record: Listened): Promise<void> {
    if (this.listened.get(record.key) === record) this.listened.delete(record.key);
    const { subscription, channel } = record;
    record.subscription = undefined;
    record.channel = undefined;
    await subscription?.close().catch(() => {});
    if (channel) await (await channel.catch(() => undefined))?.close().catch(() => {});
  }
}
