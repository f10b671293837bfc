/**
 * The handshake behind `POST /api/mcp/servers/{id}/test`: connect, then
 * tools/list → prompts/list → resources/list as the server advertises them,
 * each bounded. HTTP servers go through the upstream pool (and so the egress
 * guard); stdio servers are started for the test and reaped after.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { ServerTable } from '../store/schema.js';
import type { UpstreamPool } from '../upstream/index.js';
import type { Connection, DiscoveredTool } from './records.js';

export interface HandshakeResult {
  era: 'modern' | 'legacy' | null;
  discover?: unknown;
  tools: DiscoveredTool[];
  prompts: unknown[];
  resources: unknown[];
}

export interface Handshaker {
  handshake(row: ServerTable, connection: Connection): Promise<HandshakeResult>;
}

const MAX_ITEMS = 1000;
const MAX_PAGES = 50;

/** Drains a paginated list verb with explicit cursors, bounded like tools/list. */
async function drain<T>(
  page: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor?: string | undefined }>,
): Promise<T[]> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let pages = 0; pages < MAX_PAGES && items.length < MAX_ITEMS; pages++) {
    const result = await page(cursor);
    items.push(...result.items.slice(0, MAX_ITEMS - items.length));
    cursor = result.nextCursor;
    if (!cursor || seen.has(cursor)) break;
    seen.add(cursor);
  }
  return items;
}

/** Prompts and resources, as far as the server's capabilities advertise them. */
export async function listExtras(
  client: Client,
  signal: AbortSignal,
): Promise<Pick<HandshakeResult, 'prompts' | 'resources'>> {
  const capabilities = client.getServerCapabilities() ?? {};
  const prompts = capabilities.prompts
    ? await drain(async (cursor) => {
        const r = await client.listPrompts(cursor ? { cursor } : {}, { signal, cacheMode: 'bypass' });
        return { items: r.prompts, nextCursor: r.nextCursor };
      })
    : [];
  const resources = capabilities.resources
    ? await drain(async (cursor) => {
        const r = await client.listResources(cursor ? { cursor } : {}, { signal, cacheMode: 'bypass' });
        return { items: r.resources, nextCursor: r.nextCursor };
      })
    : [];
  return { prompts, resources };
}

export interface HttpHandshakerOptions {
  poolFor(privateNetwork: boolean): UpstreamPool;
  timeoutMs: number;
  /** stdio servers: provided by the stdio spawner; absent means stdio cannot be tested here. */
  stdio?: Handshaker;
}

export function createHandshaker(options: HttpHandshakerOptions): Handshaker {
  return {
    async handshake(row, connection) {
      if (connection.transport === 'stdio') {
        if (!options.stdio) throw new Error('stdio handshakes are not available');
        return options.stdio.handshake(row, connection);
      }
      const pool = options.poolFor(connection.privateNetwork);
      const target = { url: connection.url, headers: connection.headers };
      const { tools } = await pool.listTools(target);
      return pool.withClient(target, options.timeoutMs, async (client, signal) => ({
        era: client.getProtocolEra() ?? null,
        discover: client.getDiscoverResult(),
        tools: tools as DiscoveredTool[],
        ...(await listExtras(client, signal)),
      }));
    },
  };
}
