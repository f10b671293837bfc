/** An agent as the tests need one: the official SDK client on Streamable HTTP, in either protocol era. */
import { Client, type ClientOptions, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

export type Era = 'modern' | 'legacy';

export interface AgentOptions {
  /** `modern` negotiates 2026-07-28 (`versionNegotiation: auto`); `legacy` is the SDK's 2025 default. */
  era?: Era;
  headers?: Record<string, string>;
  name?: string;
  /** Extra client options (capabilities, listChanged handlers, inputRequired, …). */
  client?: ClientOptions;
  /** Runs on the client before it connects (e.g. to register request handlers). */
  prepare?: (client: Client) => void;
}

/** Connects an SDK client to `url` with `token` as its bearer (none when null). */
export async function connectAgent(url: string, token: string | null, options: AgentOptions = {}): Promise<Client> {
  const era = options.era ?? 'modern';
  const client = new Client(
    { name: options.name ?? `test-${era}`, version: '1.0.0' },
    { ...(era === 'modern' ? { versionNegotiation: { mode: 'auto' as const } } : {}), ...options.client },
  );
  options.prepare?.(client);
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...options.headers } },
    }),
  );
  return client;
}
