/**
 * The handshake behind `POST /api/mcp/servers/{id}/test`: connect, then
 * tools/list → prompts/list → resources/list as the server advertises them,
 * each bounded. HTTP servers go through the upstream pool (and so the egress
 * guard); stdio servers are started for the test and reaped after.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, DiscoverResult, PriorDiscovery } from '@modelcontextprotocol/client';
import { findGatehouseError, GatehouseError } from '../errors.js';
import { type PinnableItem, uiResourceItem, uiResourceOf } from '../policy/pins.js';
import type { ServerTable } from '../store/schema.js';
import { boundDiscover, boundResult, RESOURCE_RESULT } from '../upstream/bounds.js';
import { catalogParams } from '../upstream/client-capabilities.js';
import { Deadline } from '../upstream/deadline.js';
import { drainList } from '../upstream/drain.js';
import type { UpstreamPool } from '../upstream/index.js';
import { listAllTools } from '../upstream/operations.js';
import { connectStdio, type SandboxOptions, type StdioChild, stdioError } from '../upstream/stdio/index.js';
import { networkDeniedMessage, networkFailureIn } from '../upstream/stdio/network-denial.js';
import { type Connection, type DiscoveredTool, upstreamTargetOf } from './records.js';

export interface HandshakeResult {
  era: 'modern' | 'legacy' | null;
  /**
   * A 2026-07-28 server's `server/discover` result; for a 2025-era server, what its `initialize` said
   * of itself (`serverInfo`, `instructions`), which `/mcp/s/{id}` passes on. Era memory reads it for
   * modern servers only.
   */
  discover?: unknown;
  tools: DiscoveredTool[];
  prompts: unknown[];
  resources: unknown[];
  /** MCP Apps UI resources (`ui://`) as read at the handshake, for their pins (`uiResourceItem`). */
  uiResources?: PinnableItem[];
}

export interface HandshakeOptions {
  /** A stdio server is listed only over its running supervised connection: undefined when it is not running. */
  runningOnly?: boolean;
  /** Abandons the handshake (HTTP servers). */
  signal?: AbortSignal;
}

export interface Handshaker {
  handshake(row: ServerTable, connection: Connection, options?: HandshakeOptions): Promise<HandshakeResult | undefined>;
}

/** What a connected client learnt of the server: its discover result, or what its `initialize` said of itself. */
export function discoveredIdentity(client: Client): unknown {
  const discover = client.getDiscoverResult();
  if (discover) return boundDiscover(discover);
  const serverInfo = client.getServerVersion();
  const instructions = client.getInstructions();
  // Its declared extensions too (MCP Apps): the hub declares one to agents when an upstream offers it.
  const extensions = client.getServerCapabilities()?.extensions;
  if (!serverInfo && instructions === undefined && !extensions) return undefined;
  // Bounded (its `instructions` to a few kB) before it is stored and passed on to agents.
  return boundDiscover({
    ...(serverInfo ? { serverInfo } : {}),
    ...(instructions !== undefined ? { instructions } : {}),
    ...(extensions ? { capabilities: { extensions } } : {}),
  });
}

/** Prompts and resources, as far as the server's capabilities advertise them. */
export async function listExtras(
  client: Client,
  signal: AbortSignal,
): Promise<Pick<HandshakeResult, 'prompts' | 'resources'>> {
  const capabilities = client.getServerCapabilities() ?? {};
  // One page per request, each item bounded, the list to `drain`'s limits (never the SDK's auto-aggregate).
  const prompts = capabilities.prompts ? await drainList(client, 'prompts/list', signal, { catalog: true }) : [];
  const resources = capabilities.resources ? await drainList(client, 'resources/list', signal, { catalog: true }) : [];
  return { prompts, resources };
}

/** UI resources read at one handshake, at most (each read bounded by the handshake's deadline and body cap). */
const MAX_UI_RESOURCES = 50;

/**
 * The MCP Apps UI resources of a handshake, read so their content can be pinned: every `ui://` resource
 * listed and every one a tool names (`_meta.ui.resourceUri`). One that cannot be read is left out (it is
 * pinned when it is first read through the hub instead).
 */
export async function readUiResources(
  client: Client,
  tools: readonly DiscoveredTool[],
  resources: readonly unknown[],
  signal: AbortSignal,
): Promise<PinnableItem[]> {
  const uris = new Set<string>();
  for (const resource of resources) {
    const uri = (resource as { uri?: unknown } | null)?.uri;
    if (typeof uri === 'string' && uri.startsWith('ui://')) uris.add(uri);
  }
  for (const tool of tools) {
    const uri = uiResourceOf(tool as { _meta?: unknown });
    if (uri) uris.add(uri);
  }
  if (uris.size === 0 || !client.getServerCapabilities()?.resources) return [];
  const items: PinnableItem[] = [];
  for (const uri of [...uris].slice(0, MAX_UI_RESOURCES)) {
    try {
      const read = await client.readResource(catalogParams(client, { uri }), { signal });
      // Bounded as a read through the hub bounds it (`server.ts`), so the pin is of what agents are served.
      const { contents } = boundResult(read, RESOURCE_RESULT);
      const item = uiResourceItem(uri, contents);
      if (item) items.push(item);
    } catch {
      if (signal.aborted) throw signal.reason;
    }
  }
  return items;
}

/** The era verdict remembered on the record, so a reconnect skips the probe. */
export function rememberedEra(row: ServerTable): PriorDiscovery | undefined {
  if (row.protocol_era === 'legacy') return { kind: 'legacy' };
  if (row.protocol_era === 'modern' && row.discover) {
    try {
      return { kind: 'modern', discover: JSON.parse(row.discover) as DiscoverResult };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

export interface HandshakerOptions {
  poolFor(privateNetwork: boolean): UpstreamPool;
  timeoutMs: number;
  /** Deadline of a stdio test of a record that never connected (its package may be downloading); default `timeoutMs`. */
  installTimeoutMs?: number;
  /** Where a stdio child's stderr lines go (already redacted). */
  onStderr?: (serverId: string, line: string) => void;
  /**
   * Checks a stdio server's command on the PATH its `env` gives the child, as a start does, and plans its launch:
   * the file to spawn (undefined: the command as given) and its sandbox (undefined: unsandboxed). Throws when it
   * may not run.
   */
  launchFor?: (
    row: ServerTable,
    command: string,
    env: Record<string, string>,
  ) => Promise<{ program: string | undefined; sandbox: SandboxOptions | undefined }>;
  /** Runs `fn` on the supervised connection of a running stdio server; undefined when it is not running. */
  supervised?: <T>(
    serverId: string,
    fn: (client: Client, signal: AbortSignal, era: PriorDiscovery) => Promise<T>,
  ) => Promise<T> | undefined;
}

/**
 * A start that failed with the network off: when the error or the child's last stderr lines show a
 * refused or unreachable connection, `sandbox.network_denied` (the test's answer and `lastError`).
 */
async function offlineFailure(id: string, error: unknown, child: StdioChild | undefined): Promise<unknown> {
  if (child) await Promise.race([child.exited, sleep(500, undefined, { ref: false })]);
  const evidence = networkFailureIn([(error as Error)?.message, ...(child?.recentStderr() ?? [])]);
  if (!evidence) return error;
  return new GatehouseError(
    'sandbox.network_denied',
    networkDeniedMessage(id, evidence),
    { network: 'none' },
    { cause: error },
  );
}

/**
 * A stdio server's tools, listed as an HTTP server's are (`listAllTools`: one page per request, each tool
 * bounded, the list to `LIST_LIMITS` and the serialized ceiling), within `ms` and `signal`.
 */
async function stdioTools(client: Client, ms: number, signal: AbortSignal): Promise<DiscoveredTool[]> {
  const deadline = new Deadline(ms, signal);
  try {
    return (await listAllTools(client, deadline, { catalog: true })).tools as DiscoveredTool[];
  } finally {
    deadline.dispose();
  }
}

/** A stdio server is started for the test in its own process group and reaped after. */
async function stdioHandshake(
  row: ServerTable,
  connection: Extract<Connection, { transport: 'stdio' }>,
  options: HandshakerOptions,
): Promise<HandshakeResult> {
  const era = rememberedEra(row);
  // A first connect may be an `npx`/`uvx` download: killed mid-way, it leaves a half-written cache.
  const timeoutMs = era === undefined ? Math.max(options.installTimeoutMs ?? 0, options.timeoutMs) : options.timeoutMs;
  const deadline = AbortSignal.timeout(timeoutMs);
  const launch = await options.launchFor?.(row, connection.command, connection.env);
  const sandbox = launch?.sandbox;
  let spawned: StdioChild | undefined;
  const {
    client,
    child,
    era: verdict,
  } = await connectStdio(
    {
      command: launch?.program ?? connection.command,
      args: connection.args,
      env: connection.env,
      label: row.id,
      onStderrLine: (line) => options.onStderr?.(row.id, line),
      onSpawn: (c) => {
        spawned = c;
      },
      sandbox,
    },
    { timeoutMs, signal: deadline, ...(era ? { era } : {}) },
  ).catch(async (error: unknown) => {
    throw sandbox?.network === 'none' ? await offlineFailure(row.id, error, spawned) : error;
  });
  try {
    const tools = await stdioTools(client, timeoutMs, deadline);
    const extras = await listExtras(client, deadline);
    return {
      era: verdict.kind,
      ...(verdict.kind === 'modern'
        ? { discover: boundDiscover(verdict.discover) }
        : { discover: discoveredIdentity(client) }),
      tools: tools as DiscoveredTool[],
      ...extras,
      uiResources: await readUiResources(client, tools as DiscoveredTool[], extras.resources, deadline),
    };
  } catch (error) {
    throw deadline.aborted
      ? new GatehouseError('upstream_timeout', 'The stdio server did not answer in time.')
      : stdioError(error, child);
  } finally {
    await client.close().catch(() => {});
    await child.stop(1000);
  }
}

/** A refused private address, with the message naming the fix: the server's `privateNetwork` switch. */
function withPrivateNetworkHint(error: unknown, id: string): GatehouseError | undefined {
  const refused = findGatehouseError(error);
  if (refused?.code !== 'private_network_blocked') return undefined;
  return new GatehouseError(
    'private_network_blocked',
    `${refused.message} If this server is meant to be on your own network, an admin allows it: ` +
      `\`gatehouse servers add <url> --private-network\` when adding it, ` +
      `PATCH /api/mcp/servers/${id}/config {"privateNetwork": true}, or the Private network switch in the dashboard.`,
    refused.details,
  );
}

export function createHandshaker(options: HandshakerOptions): Handshaker {
  return {
    async handshake(row, connection, { runningOnly = false, signal } = {}) {
      if (connection.transport === 'stdio') {
        const running = options.supervised?.(row.id, async (client, signal, era) => {
          const tools = await stdioTools(client, options.timeoutMs, signal);
          const extras = await listExtras(client, signal);
          return {
            era: era.kind,
            ...(era.kind === 'modern'
              ? { discover: boundDiscover(era.discover) }
              : { discover: discoveredIdentity(client) }),
            tools,
            ...extras,
            uiResources: await readUiResources(client, tools, extras.resources, signal),
          };
        });
        if (running) return running;
        return runningOnly ? undefined : stdioHandshake(row, connection, options);
      }
      const pool = options.poolFor(connection.privateNetwork);
      const target = upstreamTargetOf(connection, row.id);
      const abandon = signal ? { signal } : {};
      const { tools } = await pool.listTools(target, { ...abandon, catalog: true }).catch((error: unknown) => {
        throw connection.privateNetwork ? error : (withPrivateNetworkHint(error, row.id) ?? error);
      });
      return pool.withClient(
        target,
        options.timeoutMs,
        async (client, clientSignal) => {
          const extras = await listExtras(client, clientSignal);
          return {
            era: client.getProtocolEra() ?? null,
            discover: discoveredIdentity(client),
            tools: tools as DiscoveredTool[],
            ...extras,
            uiResources: await readUiResources(client, tools as DiscoveredTool[], extras.resources, clientSignal),
          };
        },
        abandon,
      );
    },
  };
}
