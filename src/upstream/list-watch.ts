/**
 * Hearing an upstream say that its tools, prompts or resources changed, in either era. A 2025-era
 * server sends `notifications/{tools,prompts,resources}/list_changed` unsolicited (on the session's
 * GET stream, or on stdio); a 2026-07-28 server sends them only on a `subscriptions/listen` stream
 * the client opens. The SDK delivers both to the same notification handlers.
 */
import type { Client } from '@modelcontextprotocol/client';

export type ListKind = 'tools' | 'prompts' | 'resources';

const NOTIFICATIONS = {
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
} as const satisfies Record<ListKind, string>;

const FILTER_KEYS = {
  tools: 'toolsListChanged',
  prompts: 'promptsListChanged',
  resources: 'resourcesListChanged',
} as const satisfies Record<ListKind, string>;

export interface ListWatch {
  /**
   * Settles when the channel the changes arrive on has ended: on 2026-07-28 the subscription
   * (`local`, `graceful` or `remote`, as the SDK says); undefined on a 2025-era connection, whose
   * channel is the connection itself.
   */
  ended: Promise<'local' | 'graceful' | 'remote'> | undefined;
  close(): Promise<void>;
}

/**
 * Calls `onChanged` for every list-changed notification `client` receives from now on. On a
 * 2026-07-28 connection it opens the subscription, for the lists the server says can change (a
 * server that advertises none gets no subscription: it has said it will not send any).
 */
export async function watchListChanges(
  client: Client,
  onChanged: (list: ListKind) => void,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<ListWatch> {
  const lists = Object.keys(NOTIFICATIONS) as ListKind[];
  // Registered for every list: a 2025-era server may notify without advertising it, and hearing it costs nothing.
  for (const list of lists) client.setNotificationHandler(NOTIFICATIONS[list], () => onChanged(list));
  if (client.getProtocolEra() !== 'modern') return { ended: undefined, close: async () => {} };
  const capabilities = client.getServerCapabilities() ?? {};
  const advertised = lists.filter((list) => capabilities[list]?.listChanged === true);
  if (advertised.length === 0) return { ended: undefined, close: async () => {} };
  const subscription = await client.listen(Object.fromEntries(advertised.map((list) => [FILTER_KEYS[list], true])), {
    timeout: options.timeoutMs,
    ...(options.signal && { signal: options.signal }),
  });
  return { ended: subscription.closed, close: () => subscription.close() };
}
