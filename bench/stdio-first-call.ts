/**
 * A new client's first call, measured from outside every gateway alike: `--count` times in a row,
 * a brand-new official SDK `Client` connects (2025 era: `initialize`; modern: negotiated), makes one
 * `tools/call` of `echo`, and closes. Reported: the time from creating the client to the answer of its
 * first call (connect included), p50/p99/min/max, and how long the connect alone took (p50). One JSON
 * line on stdout.
 *
 *   node --import tsx bench/stdio-first-call.ts --url http://127.0.0.1:PORT/mcp --era legacy --count 20
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    era: { type: 'string', default: 'legacy' },
    token: { type: 'string' },
    count: { type: 'string', default: '20' },
  },
});
const TEXT = 'hello gatehouse';
const CALL_TIMEOUT_MS = 30_000;

export interface FirstCallReport {
  count: number;
  errors: number;
  firstError?: string | undefined;
  p50Ms: number;
  p99Ms: number;
  minMs: number;
  maxMs: number;
  connectP50Ms: number;
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

async function once(): Promise<{ totalMs: number; connectMs: number }> {
  const t0 = performance.now();
  const client = new Client(
    { name: 'gatehouse-bench-first-call', version: '1.0.0' },
    values.era === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {},
  );
  const transport = new StreamableHTTPClientTransport(
    new URL(values.url ?? ''),
    values.token ? { requestInit: { headers: { authorization: `Bearer ${values.token}` } } } : {},
  );
  try {
    await client.connect(transport, { timeout: CALL_TIMEOUT_MS });
    const connectMs = performance.now() - t0;
    const result = await client.callTool({ name: 'echo', arguments: { text: TEXT } }, { timeout: CALL_TIMEOUT_MS });
    const totalMs = performance.now() - t0;
    const first = result.content[0];
    if (result.isError || first?.type !== 'text' || first.text !== TEXT) {
      throw new Error(`unexpected answer: ${JSON.stringify(result).slice(0, 300)}`);
    }
    return { totalMs, connectMs };
  } finally {
    await client.close().catch(() => {});
  }
}

const totals: number[] = [];
const connects: number[] = [];
let errors = 0;
let firstError: string | undefined;
const count = Number(values.count);
for (let i = 0; i < count; i++) {
  try {
    const { totalMs, connectMs } = await once();
    totals.push(totalMs);
    connects.push(connectMs);
  } catch (error) {
    errors += 1;
    firstError ??= error instanceof Error ? error.message : String(error);
  }
}
totals.sort((a, b) => a - b);
connects.sort((a, b) => a - b);
const report: FirstCallReport = {
  count: totals.length,
  errors,
  firstError,
  p50Ms: percentile(totals, 0.5),
  p99Ms: percentile(totals, 0.99),
  minMs: totals[0] ?? Number.NaN,
  maxMs: totals[totals.length - 1] ?? Number.NaN,
  connectP50Ms: percentile(connects, 0.5),
};
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(0);
