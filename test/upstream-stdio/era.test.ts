/**
 * Protocol eras over stdio. The spawner's transport probes in place (no sibling process), so each
 * test also proves, from the server's side (`--log-methods` writes every method it receives to
 * stderr), what was sent on the wire, and that every connect used exactly the children it says.
 */
import type { PriorDiscovery } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import {
  type ConnectStdioOptions,
  connectStdio,
  type ExitInfo,
  isStdioEraMismatch,
  type StdioChild,
  stdioError,
} from '../../src/upstream/stdio/index.js';
import { cleanUp, fixtureSpec, newMarker, pidsWithMarker, waitFor } from '../fixtures/stdio/index.js';

const markers: string[] = [];
const children: StdioChild[] = [];

/** Connects to the fixture with `flags`, recording every method each child received, in order. */
async function connect(flags: string[], options: Partial<ConnectStdioOptions> = {}) {
  const m = newMarker();
  markers.push(m);
  const received: string[] = [];
  const exits: ExitInfo[] = [];
  const spec = fixtureSpec(m, ['--log-methods', ...flags], {
    onExit: (info) => exits.push(info),
    onStderrLine: (line) => {
      const match = /^fixture received (.+)$/.exec(line);
      if (match) received.push(match[1]!);
    },
  });
  const connection = await connectStdio(spec, { timeoutMs: 20_000, ...options });
  children.push(connection.child);
  return { ...connection, received, exits, marker: m };
}

afterEach(async () => {
  // Whatever a test did, nothing it started may outlive it (and a failing test leaves nothing either).
  expect(await cleanUp(children, markers)).toEqual({});
});

describe('first contact negotiates in place', () => {
  it('a modern server: one server/discover on the same pipe, a modern verdict, no initialize', async () => {
    const { client, era, received, attempts, marker } = await connect(['--era=modern']);
    expect(era.kind).toBe('modern');
    expect(client.getProtocolEra()).toBe('modern');
    expect(attempts).toBe(1);
    // Only our child carries the marker: the probe spawned no sibling.
    expect(pidsWithMarker(marker)).toHaveLength(1);
    await client.listTools();
    expect(await waitFor(() => received.includes('tools/list'), 2000)).toBe(true);
    expect(received).toEqual(['server/discover', 'tools/list']);
  });

  it('a legacy server answers the probe with an error: legacy verdict, initialize on the same child', async () => {
    const { client, era, received, attempts } = await connect(['--era=legacy']);
    expect(era).toEqual({ kind: 'legacy' });
    expect(client.getProtocolEra()).toBe('legacy');
    expect(attempts).toBe(1);
    expect((await client.callTool({ name: 'add', arguments: { a: 4, b: 5 } })).structuredContent).toEqual({ sum: 9 });
    expect(await waitFor(() => received.includes('tools/call'), 2000)).toBe(true);
    expect(received).toEqual(['server/discover', 'initialize', 'notifications/initialized', 'tools/call']);
  });

  it('a legacy session is declared the asks Gatehouse relays and MCP Apps, which it carries to agents', async () => {
    const { client } = await connect(['--era=legacy', '--client-capabilities']);
    const declared = await client.callTool({ name: 'client_capabilities', arguments: {} });
    expect(JSON.parse((declared.content as Array<{ text: string }>)[0]!.text)).toEqual({
      sampling: {},
      elicitation: { form: {}, url: {} },
      roots: {},
      extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } },
    });
  });

  it('a legacy server that exits on the probe: a fresh child connects with the legacy verdict', async () => {
    const { client, child, era, received, attempts, exits } = await connect(['--era=strict-legacy']);
    expect(era).toEqual({ kind: 'legacy' });
    expect(attempts).toBe(2);
    // The discarded first child is not reported as an exit of the connection's child.
    expect(exits).toEqual([]);
    expect((await client.callTool({ name: 'echo', arguments: { text: 'ok' } })).content).toEqual([
      { type: 'text', text: 'ok' },
    ]);
    // stderr is read asynchronously: wait for the log of the call before reading the log.
    expect(await waitFor(() => received.includes('tools/call'), 2000)).toBe(true);
    // The first child got the probe and died; the second was never probed.
    expect(received).toEqual(['server/discover', 'initialize', 'notifications/initialized', 'tools/call']);
    const info = await child.stop(500);
    expect(exits).toEqual([info]);
  });

  it('a legacy server that never answers the probe: legacy after the probe timeout, same child', async () => {
    const started = Date.now();
    const { client, era, attempts } = await connect(['--era=silent-legacy'], { probeTimeoutMs: 500 });
    expect(era).toEqual({ kind: 'legacy' });
    expect(attempts).toBe(1);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });
});

describe('a remembered era skips the probe', () => {
  it('modern: the second connect sends no server/discover and no initialize', async () => {
    const first = await connect(['--era=modern']);
    expect(first.era.kind).toBe('modern');
    await first.child.stop(500);

    const second = await connect(['--era=modern'], { era: first.era });
    expect(second.era).toEqual(first.era);
    await second.client.callTool({ name: 'echo', arguments: { text: 'remembered' } });
    expect(await waitFor(() => second.received.includes('tools/call'), 2000)).toBe(true);
    expect(second.received).toEqual(['tools/call']);
  });

  it('legacy: the second connect goes straight to initialize (even for a server that exits on a probe)', async () => {
    const first = await connect(['--era=strict-legacy']);
    await first.child.stop(500);
    const second = await connect(['--era=strict-legacy'], { era: first.era });
    expect(second.attempts).toBe(1);
    await second.client.listTools();
    expect(await waitFor(() => second.received.includes('tools/list'), 2000)).toBe(true);
    expect(second.received).toEqual(['initialize', 'notifications/initialized', 'tools/list']);
  });

  it('a remembered legacy verdict still connects a server that serves both eras', async () => {
    const { client, era, received, attempts } = await connect(['--era=modern'], { era: { kind: 'legacy' } });
    expect(era).toEqual({ kind: 'legacy' });
    expect(attempts).toBe(1);
    await client.listTools();
    expect(await waitFor(() => received.includes('tools/list'), 2000)).toBe(true);
    expect(received).toEqual(['initialize', 'notifications/initialized', 'tools/list']);
  });

  it('a remembered modern verdict for a server that is now legacy fails at the first request, typed', async () => {
    const modern = await connect(['--era=modern']);
    await modern.child.stop(500);
    // Zero round trips at connect: the mismatch can only show on the first request.
    const stale = await connect(['--era=legacy'], { era: modern.era as PriorDiscovery });
    const error = await stale.client.listTools().catch((e: unknown) => e);
    expect(error).toBeDefined();
    expect(await waitFor(() => stale.received.includes('tools/list'), 2000)).toBe(true);
    expect(stale.received).toEqual(['tools/list']);
    const typed = stdioError(error, stale.child);
    expect(typed).toBeInstanceOf(GatehouseError);
    // The caller (the supervisor) forgets the verdict on an era mismatch and reconnects negotiating.
    expect(isStdioEraMismatch(error)).toBe(true);
    const renegotiated = await connect(['--era=legacy']);
    expect(renegotiated.era).toEqual({ kind: 'legacy' });
  });
});

describe('connect failures stop the child first', () => {
  it('a server that never answers: upstream_timeout within the deadline, nothing left running', async () => {
    for (const era of [undefined, { kind: 'legacy' } as const]) {
      const m = newMarker();
      markers.push(m);
      // Mute, and deaf to SIGTERM: the failed connect has to escalate to SIGKILL.
      const spec = fixtureSpec(m, ['--era=mute', '--ignore-sigterm']);
      const started = Date.now();
      const error = await connectStdio(spec, { timeoutMs: 1500, probeTimeoutMs: 300, ...(era && { era }) }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(GatehouseError);
      expect((error as GatehouseError).code).toBe('upstream_timeout');
      // The deadline, plus the short grace of a failed connect, plus the SIGKILL.
      expect(Date.now() - started).toBeLessThan(5000);
      expect(pidsWithMarker(m)).toEqual([]);
    }
  });

  it('a caller that cancels gets a typed error and nothing is left running', async () => {
    const m = newMarker();
    markers.push(m);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const error = await connectStdio(fixtureSpec(m, ['--era=mute']), {
      timeoutMs: 20_000,
      era: { kind: 'legacy' },
      signal: controller.signal,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatehouseError);
    expect((error as GatehouseError).details).toMatchObject({ reason: 'cancelled' });
    expect(pidsWithMarker(m)).toEqual([]);
  });
});
