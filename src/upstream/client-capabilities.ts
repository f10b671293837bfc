/**
 * What Gatehouse declares at `initialize` to a 2025-era upstream. That era fixes a client's capabilities for
 * the whole session, which every agent's calls share, and the hub's catalog (tools, resources, UI pins) is
 * listed on such a session too; so the declaration is what Gatehouse itself can carry to agents:
 *
 * - the asks it relays (`asks.ts`), each checked against the calling agent;
 * - MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865): Gatehouse passes `ui://` resources and `_meta.ui` on,
 *   pins them, and declares the extension to agents wherever an upstream offers it. An upstream that offers its
 *   app only to hosts declaring the extension (as the MCP Apps SDK's servers do) then lists it for the hub.
 *
 * A 2026-07-28 upstream is told per request instead: on a call, the calling agent's own capabilities and
 * extensions; on the hub's catalog requests, MCP Apps alone (`catalogParams`).
 */
import { CLIENT_CAPABILITIES_META_KEY, type Client, type ClientCapabilities } from '@modelcontextprotocol/client';
import { ASK_CAPABILITIES } from './asks.js';

/** MCP Apps' extension id (SEP-1865). */
export const UI_EXTENSION = 'io.modelcontextprotocol/ui';
/** The MIME type of an MCP App's HTML resource, the one the extension's hosts declare. */
export const MCP_APP_MIME_TYPE = 'text/html;profile=mcp-app';

export const LEGACY_CLIENT_CAPABILITIES: ClientCapabilities = {
  ...ASK_CAPABILITIES,
  extensions: { [UI_EXTENSION]: { mimeTypes: [MCP_APP_MIME_TYPE] } },
};

/**
 * What a 2026-07-28 upstream is told with the hub's catalog requests (the handshake's lists and UI resource
 * reads): no agent is calling, so none of the asks; MCP Apps, as to a 2025-era upstream, so an app offered
 * only to hosts that declare the extension is listed (and pinned) for the agents that do.
 */
const CATALOG_CLIENT_CAPABILITIES: ClientCapabilities = { extensions: LEGACY_CLIENT_CAPABILITIES.extensions };

/** `params` of a catalog request, with that declaration in its envelope when `client` speaks 2026-07-28. */
export function catalogParams<P extends object>(client: Client, params: P): P {
  if (client.getProtocolEra() !== 'modern') return params;
  const meta = (params as { _meta?: Record<string, unknown> })._meta;
  return { ...params, _meta: { ...meta, [CLIENT_CAPABILITIES_META_KEY]: CATALOG_CLIENT_CAPABILITIES } };
}
