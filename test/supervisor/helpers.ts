/**
 * Shared set-up of the supervisor tests: a real gateway (store of the suite's kind) listening on
 * loopback, stdio fixture servers installed through the REST API, and SDK clients calling them
 * through the hub as an agent would.
 */
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { expect } from 'vitest';
import { FIXTURE_SANDBOX, fixtureSpec, newMarker, pidsWithMarker, waitFor } from '../fixtures/stdio/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import type { StoreTarget } from '../helpers/stores.js';

export const PLAIN_SERVER = fileURLToPath(new URL('../fixtures/stdio/plain-server.mjs', import.meta.url));

/** Fast lifecycle for tests: short grace, short backoff, two restarts before giving up, 1 MiB lines. */
export const FAST_SUPERVISOR_ENV = {
  GATEHOUSE_STDIO_GRACE_MS: '300',
  GATEHOUSE_STDIO_RESTART_BASE_MS: '50',
  GATEHOUSE_STDIO_MAX_RESTARTS: '2',
  GATEHOUSE_STDIO_MAX_LINE_BYTES: '1mb',
  // A sandboxed tsx fixture compiles afresh in each new sandbox (its /tmp cache is new): slow on a busy host.
  GATEHOUSE_LIST_TIMEOUT_MS: '20000',
  GATEHOUSE_CALL_TIMEOUT_MS: '20000',
};

export interface Harness {
  gw: TestGateway;
  base: string;
  agentToken: string;
  markers: string[];
  clients: Client[];
  /** Installs the tsx fixture (`server.ts`) with `flags` and tests it; every tool allowed. Returns its marker. */
  install(id: string, flags?: string[], extra?: Record<string, unknown>): Promise<string>;
  /** Installs the plain fixture (`plain-server.mjs`). */
  installPlain(id: string, extra?: Record<string, unknown>): Promise<string>;
  /** An agent's SDK client on `/mcp/s/{id}`. */
  agent(id: string): Promise<Client>;
  process(id: string): Promise<{ state: string; pid: number | null; crashes: number; lastError: string | null }>;
  waitForState(id: string, state: string, ms?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startHarness(target: StoreTarget, env: Record<string, string> = {}): Promise<Harness> {
  const gw = await startTestGateway(target, { ...FAST_SUPERVISOR_ENV, ...env });
  const agentToken = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-stdio' } })).json()
    .token as string;
  await gw.gateway.app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(gw.gateway.app.server.address() as AddressInfo).port}`;
  const markers: string[] = [];
  const clients: Client[] = [];

  const installManifest = async (id: string, command: string, args: string[], extra: Record<string, unknown>) => {
    const response = await gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id,
          name: id,
          transport: 'stdio',
          command,
          args,
          toolPolicy: { defaultTier: 'allow' },
          sandbox: FIXTURE_SANDBOX,
          ...extra,
        },
      },
    });
    expect(response.statusCode, response.body).toBe(201);
    // The handshake lists and pins the tools the hub serves (a temporary child: nothing runs yet).
    await gw.request('POST', `/api/mcp/servers/${id}/test`);
  };

  const harness: Harness = {
    gw,
    base,
    agentToken,
    markers,
    clients,
    async install(id, flags = [], extra = {}) {
      const marker = newMarker();
      markers.push(marker);
      const spec = fixtureSpec(marker, flags);
      await installManifest(id, spec.command, spec.args, extra);
      return marker;
    },
    async installPlain(id, extra = {}) {
      const marker = newMarker();
      markers.push(marker);
      await installManifest(id, process.execPath, [PLAIN_SERVER, `--gatehouse-test-marker=${marker}`], extra);
      return marker;
    },
    async agent(id) {
      const client = new Client({ name: 'test-agent', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${base}/mcp/s/${id}`), {
          requestInit: { headers: { authorization: `Bearer ${agentToken}` } },
        }),
      );
      clients.push(client);
      return client;
    },
    async process(id) {
      const response = await gw.request('GET', `/api/mcp/servers/${id}/process`);
      expect(response.statusCode, response.body).toBe(200);
      return response.json().process;
    },
    async waitForState(id, state, ms = 60_000) {
      let last = '';
      const reached = await waitFor(() => {
        last = gw.gateway.supervisor.stateOf(id);
        return last === state;
      }, ms);
      if (!reached) {
        // What the server's events and the gateway's warnings say, so a failure explains itself.
        const events = (await gw.request('GET', `/api/mcp/servers/${id}/logs?limit=15`)).json().events ?? [];
        const warnings = gw.logs.filter((line) => line.includes(`"server":"${id}"`) && /"level":(4|5)0/.test(line));
        expect.fail(
          `state of ${id} stayed ${last}, expected ${state}\nevents (newest first):\n${events
            .map((e: { kind: string; message: string }) => `  ${e.kind}: ${e.message}`)
            .join('\n')}\nwarnings:\n${warnings.slice(-5).join('')}`,
        );
      }
    },
    async close() {
      await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
      await gw.close();
    },
  };
  return harness;
}

/** The pids of live processes carrying the marker, after they settle. */
export function livePids(marker: string): number[] {
  return pidsWithMarker(marker);
}

/** The `structuredContent.error` of a hub refusal. */
export function errorOf(result: unknown): { code: string; message: string } {
  const structured = (result as { structuredContent?: { error?: { code: string; message: string } } })
    .structuredContent;
  expect(structured?.error, JSON.stringify(result)).toBeDefined();
  return structured!.error!;
}

export function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content[0]?.text ?? '';
}
