/**
 * The resources and prompts of a per-user OAuth server (each person reaches the upstream with their own
 * account): asked live with the caller's own grant, as `resources/templates/list` is, never what a handshake
 * discovered under someone's account (an operator's documents and prompts). A caller without a grant, or a
 * failing upstream, gets none from that server (as templates). Tools stay the pinned, reviewed definitions;
 * a prompt is listed only as its pin in force has it (a name or definition no one approved is not).
 */
import type { Client } from '@modelcontextprotocol/client';
import type { Prompt, Resource } from '@modelcontextprotocol/server';
import { itemPinHash, type PinnableItem } from '../../policy/pins.js';
import { drainList } from '../../upstream/drain.js';
import type { HubPrompt, HubServer } from './view.js';

/** Runs `fn` on a client of the server's upstream with the caller's grant (the hub's `withUpstream`). */
export type AsCaller = <T>(hub: HubServer, fn: (client: Client, signal: AbortSignal) => Promise<T>) => Promise<T>;

/** One server's live list, asked as the caller; bounded as a handshake's (`drain`: page by page, each item bounded). */
async function live<T>(
  hub: HubServer,
  asCaller: AsCaller,
  list: (client: Client, signal: AbortSignal) => Promise<T[]>,
) {
  if (hub.row.status !== 'connected') return [];
  try {
    return await asCaller(hub, list);
  } catch {
    // No grant of the caller's (or a failing upstream): none from this server; the others still list.
    return [];
  }
}

/** The caller's own resources on a per-user server. */
export function liveResources(hub: HubServer, asCaller: AsCaller): Promise<Resource[]> {
  return live(hub, asCaller, async (client, signal) => {
    if (!client.getServerCapabilities()?.resources) return [];
    return drainList<Resource>(client, 'resources/list', signal, { catalog: true });
  });
}

/** The caller's own prompts on a per-user server that are pinned as they stand, with their entry. */
export async function livePrompts(
  hub: HubServer,
  asCaller: AsCaller,
): Promise<Array<{ entry: HubPrompt; prompt: Prompt }>> {
  if (hub.prompts.size === 0) return [];
  const prompts = await live(hub, asCaller, async (client, signal) => {
    if (!client.getServerCapabilities()?.prompts) return [];
    return drainList<Prompt>(client, 'prompts/list', signal, { catalog: true });
  });
  const byName = new Map([...hub.prompts.values()].map((entry) => [entry.name, entry]));
  const listed: Array<{ entry: HubPrompt; prompt: Prompt }> = [];
  for (const prompt of prompts) {
    const entry = byName.get(prompt.name);
    if (!entry || entry.pin.pinHash !== itemPinHash(prompt as PinnableItem, 'prompt', entry.pin.scheme)) continue;
    listed.push({ entry, prompt });
  }
  return listed;
}
