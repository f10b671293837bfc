/**
 * The load generator: N concurrent callers, each connected once, each making calls in a closed loop
 * (next call as soon as the previous answer arrives) for a fixed duration or a fixed total count.
 * Latency is measured here, per call, around the client's own call; throughput is calls completed
 * over the measured wall time. One JSON line on stdout is the report.
 *
 *   node --import tsx bench/load.ts --mode sdk --url http://127.0.0.1:PORT/mcp --era modern \
 *        --concurrency 16 --duration-ms 5000 --warmup-ms 1000
 *   node --import tsx bench/load.ts --mode ops --url http://127.0.0.1:PORT --upstream http://…/mcp --count 10000
 *
 * Modes:
 *   sdk  one official SDK `Client` per caller (Streamable HTTP), `--era modern` (2026-07-28, negotiated
 *        with `versionNegotiation: {mode: 'auto'}`) or `legacy` (2025 era, the SDK's default);
 *        `--token` adds a bearer; `--op call` calls `--tool` with `{text}`, `--op list` runs `tools/list`
 *        (cache bypassed, so every call is a round trip) and checks `--expect-tools`.
 *   http a hand-written 2026-07-28 agent over one undici keep-alive connection per caller: each call is
 *        one JSON-RPC POST with the per-request envelope and the standard headers, answered JSON and
 *        read with `JSON.parse` (what any agent must do at least); `--op list` only. It shows what the
 *        gateway delivers without the SDK client's own cost of validating a large answer.
 *   ops  the conduit's REST contract: `POST {url}/ops/call-tool {url: upstream, name, arguments}` over one
 *        undici keep-alive pool with one connection per caller.
 *   rotate  one SDK `Client` per target of `--targets` (a JSON array of `{name, url, token?, tool}`), called by
 *        one caller in turn — every target once per turn, in a fresh random order — so that every target is
 *        measured under the same conditions, call by call; the measured phase is cut into `--slices` equal
 *        slices, and the report gives each target's p50 per slice (`rotation`). Two gateways compared this
 *        way see the same machine at the same moments, which back-to-back cells of a few seconds do not.
 *
 * Phases: connect every caller; warm up for `--warmup-ms` (not reported); then, when started by the
 * orchestrator (an IPC channel exists), send `{type: 'ready'}` and wait for `{type: 'go'}` so the
 * orchestrator can read the gateway's CPU counter right before the measured phase; then measure.
 * Every phase is bounded in time; more than 50 failed calls end the run early (reported, not hidden).
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Agent, request } from 'undici';

export interface LoadReport {
  mode: 'sdk' | 'http' | 'ops' | 'rotate';
  op: 'call' | 'list';
  concurrency: number;
  /** Protocol era the SDK clients ended up speaking (sdk mode). */
  era?: string | undefined;
  /** Calls that completed with a correct answer in the measured phase. */
  calls: number;
  errors: number;
  firstError?: string | undefined;
  /** Wall time of the measured phase, until the last call in flight came back. */
  elapsedMs: number;
  callsPerS: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** This process's CPU (user + system) during the measured phase, per call. */
  loadCpuMsPerCall: number;
  /** Serialized size of one answer (list mode: the whole tools/list result). */
  answerBytes?: number | undefined;
  /** http mode: p50 of the time until the answer's last byte arrived (before the agent decodes and parses it). */
  p50LastByteMs?: number | undefined;
  /** http mode: p50 of the time the agent then took to decode and parse the answer (no server can shorten it). */
  p50DecodeMs?: number | undefined;
  /** False when the count was not reached before `--max-ms`. */
  complete: boolean;
  /** rotate mode: per slice of the measured phase, each target's p50 (ms); and each target's calls. */
  rotation?: { sliceP50Ms: Record<string, number>[]; calls: Record<string, number> } | undefined;
}

const { values } = parseArgs({
  options: {
    mode: { type: 'string', default: 'sdk' },
    url: { type: 'string' },
    upstream: { type: 'string' },
    era: { type: 'string', default: 'modern' },
    token: { type: 'string' },
    op: { type: 'string', default: 'call' },
    tool: { type: 'string', default: 'echo' },
    concurrency: { type: 'string', default: '1' },
    'duration-ms': { type: 'string' },
    count: { type: 'string' },
    'warmup-ms': { type: 'string', default: '1000' },
    'max-ms': { type: 'string', default: '120000' },
    'expect-tools': { type: 'string' },
    targets: { type: 'string' },
    slices: { type: 'string', default: '5' },
  },
});

const CONNECT_TIMEOUT_MS = 30_000;
const GO_TIMEOUT_MS = 60_000;
const MAX_ERRORS = 50;
const MAX_SAMPLES = 5_000_000;

function fail(message: string): never {
  process.stderr.write(`load: ${message}\n`);
  process.exit(2);
}

const MODES = ['sdk', 'http', 'ops', 'rotate'] as const;
const mode = MODES.find((m) => m === values.mode) ?? fail(`unknown --mode ${values.mode}`);
const op = values.op === 'list' ? 'list' : values.op === 'call' ? 'call' : fail(`unknown --op ${values.op}`);
const url = values.url ?? (mode === 'rotate' ? '' : fail('--url is required'));
const concurrency = Number(values.concurrency);
const durationMs = values['duration-ms'] !== undefined ? Number(values['duration-ms']) : undefined;
const count = values.count !== undefined ? Number(values.count) : undefined;
const warmupMs = Number(values['warmup-ms']);
const maxMs = Number(values['max-ms']);
const expectTools = values['expect-tools'] !== undefined ? Number(values['expect-tools']) : undefined;
if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) fail('--concurrency must be 1..256');
if ((durationMs === undefined) === (count === undefined)) fail('give exactly one of --duration-ms and --count');
if (mode === 'ops' && !values.upstream) fail('--upstream is required with --mode ops');
if (mode === 'http' && op !== 'list') fail('--mode http serves --op list only');
if (mode === 'rotate' && (op !== 'call' || concurrency !== 1 || durationMs === undefined)) {
  fail('--mode rotate calls (--op call) with one caller (--concurrency 1) for --duration-ms');
}
const slices = Number(values.slices);
if (!Number.isInteger(slices) || slices < 1 || slices > 100) fail('--slices must be 1..100');

interface Target {
  name: string;
  url: string;
  token?: string | undefined;
  tool: string;
}

function targetsOf(json: string | undefined): Target[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json ?? fail('--targets is required with --mode rotate'));
  } catch {
    fail('--targets must be JSON');
  }
  const ok = (t: unknown): t is Target => {
    const r = t as Record<string, unknown> | null;
    return (
      typeof r === 'object' &&
      r !== null &&
      typeof r.name === 'string' &&
      typeof r.url === 'string' &&
      typeof r.tool === 'string' &&
      (r.token === undefined || typeof r.token === 'string')
    );
  };
  if (!Array.isArray(parsed) || parsed.length < 2 || !parsed.every(ok)) {
    fail('--targets must be an array of at least two {name, url, token?, tool}');
  }
  return parsed;
}

/** One caller: a function making one call, throwing when the answer is not the expected one. */
interface Caller {
  /** Makes one call; may answer when its last byte arrived (ms after it started), for `p50LastByteMs`. */
  call(): Promise<number | undefined>;
  close(): Promise<void>;
  era?: string | undefined;
  /** List mode: the serialized size of one tools/list answer (an extra, untimed call). */
  answerBytes?(): Promise<number>;
}

const TEXT = 'hello gatehouse';

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Node's fetch, each request with a signal of its own that follows the one the transport passes. A
 * 2025-era transport hands every request its one long-lived signal; undici adds a listener to it per
 * request and removes it only when the request is garbage-collected, and past 1,500 listeners Node
 * printed a warning with a stack on every call — client CPU inside the measured latency (the limit
 * cannot be raised: undici sets it back to 1,500). A dependent signal takes no listener on its source.
 */
const quietFetch: typeof fetch = (input, init) =>
  fetch(input, init?.signal ? { ...init, signal: AbortSignal.any([init.signal]) } : init);

async function sdkCaller(
  target: Omit<Target, 'name'> = { url, token: values.token, tool: values.tool },
): Promise<Caller> {
  const client = new Client(
    { name: 'gatehouse-bench', version: '1.0.0' },
    values.era === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {},
  );
  const transport = new StreamableHTTPClientTransport(new URL(target.url), {
    ...(target.token ? { requestInit: { headers: { authorization: `Bearer ${target.token}` } } } : {}),
    fetch: quietFetch,
  });
  await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, 'connect');
  const era = client.getProtocolEra();
  if (era !== values.era) throw new Error(`asked for the ${values.era} era, the client negotiated ${era}`);
  const name = target.tool;
  const list = async () => {
    const result = await client.listTools(undefined, { cacheMode: 'bypass' });
    if (expectTools !== undefined && result.tools.length !== expectTools) {
      throw new Error(`expected ${expectTools} tools, got ${result.tools.length}`);
    }
    return result;
  };
  return {
    era,
    async call() {
      if (op === 'list') {
        await list();
        return;
      }
      const result = await client.callTool({ name, arguments: { text: TEXT } });
      const first = result.content[0];
      if (result.isError || first?.type !== 'text' || first.text !== TEXT) {
        throw new Error(`unexpected answer: ${JSON.stringify(result).slice(0, 300)}`);
      }
    },
    answerBytes: async () => Buffer.byteLength(JSON.stringify(await list())),
    close: () => client.close(),
  };
}

/** The 2026-07-28 per-request envelope a modern client sends (the SDK client sends the same). */
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'gatehouse-bench', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

function httpCallers(): Caller[] {
  const dispatcher = new Agent({ connections: concurrency, keepAliveTimeout: 30_000, pipelining: 1 });
  let id = 0;
  let lastByteMs: number | undefined;
  const list = async () => {
    id += 1;
    const started = performance.now();
    const response = await request(url, {
      method: 'POST',
      dispatcher,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/list',
        ...(values.token ? { authorization: `Bearer ${values.token}` } : {}),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list', params: { _meta: ENVELOPE } }),
    });
    // The bytes as they arrive, decoded once (undici's body.text() decodes through a web stream, several times slower).
    const chunks: Buffer[] = [];
    for await (const chunk of response.body) chunks.push(chunk as Buffer);
    lastByteMs = performance.now() - started;
    const text = Buffer.concat(chunks).toString('utf8');
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}: ${text.slice(0, 300)}`);
    const answer = JSON.parse(text) as { id?: unknown; result?: { tools?: unknown[]; nextCursor?: unknown } };
    const tools = answer.result?.tools;
    if (answer.id !== id || !Array.isArray(tools) || answer.result?.nextCursor !== undefined) {
      throw new Error(`unexpected answer: ${text.slice(0, 300)}`);
    }
    if (expectTools !== undefined && tools.length !== expectTools) {
      throw new Error(`expected ${expectTools} tools, got ${tools.length}`);
    }
    return answer.result;
  };
  const caller: Caller = {
    era: 'modern',
    call: async () => {
      await list();
      return lastByteMs;
    },
    answerBytes: async () => Buffer.byteLength(JSON.stringify(await list())),
    close: () => dispatcher.close(),
  };
  return Array.from({ length: concurrency }, () => caller);
}

function opsCallers(): Caller[] {
  const dispatcher = new Agent({ connections: concurrency, keepAliveTimeout: 30_000, pipelining: 1 });
  const target = new URL('/ops/call-tool', url).href;
  const body = JSON.stringify({ url: values.upstream, name: values.tool, arguments: { text: TEXT } });
  const caller: Caller = {
    async call() {
      const response = await request(target, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json' },
        body,
      });
      const text = await response.body.text();
      if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}: ${text.slice(0, 300)}`);
      const result = JSON.parse(text) as { isError?: boolean; content?: { type: string; text?: string }[] };
      if (result.isError || result.content?.[0]?.text !== TEXT) {
        throw new Error(`unexpected answer: ${text.slice(0, 300)}`);
      }
    },
    close: () => dispatcher.close(),
  };
  return Array.from({ length: concurrency }, () => caller);
}

interface Phase {
  latencies: number[];
  lastBytes: number[];
  /** Per call that reported its last byte: the time after it (the agent decoding and parsing the answer). */
  decodes: number[];
  calls: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  cpuMs: number;
}

/** Runs every caller in a closed loop until the deadline passes or the tickets run out. */
async function runPhase(callers: Caller[], untilMs: number, tickets: number, record: boolean): Promise<Phase> {
  const phase: Phase = { latencies: [], lastBytes: [], decodes: [], calls: 0, errors: 0, elapsedMs: 0, cpuMs: 0 };
  let issued = 0;
  let stop = false;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const deadline = start + untilMs;
  await Promise.all(
    callers.map(async (caller) => {
      while (!stop && issued < tickets && performance.now() < deadline) {
        issued += 1;
        const t0 = performance.now();
        try {
          const lastByte = await caller.call();
          const dt = performance.now() - t0;
          phase.calls += 1;
          if (record && phase.latencies.length < MAX_SAMPLES) {
            phase.latencies.push(dt);
            if (lastByte !== undefined) {
              phase.lastBytes.push(lastByte);
              phase.decodes.push(dt - lastByte);
            }
          }
        } catch (error) {
          phase.errors += 1;
          phase.firstError ??= error instanceof Error ? error.message : String(error);
          if (phase.errors > MAX_ERRORS) stop = true;
        }
      }
    }),
  );
  phase.elapsedMs = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  phase.cpuMs = (cpu.user + cpu.system) / 1000;
  return phase;
}

interface Rotation {
  /** Per slice, per target, the latencies of its calls (ms). */
  slices: Map<string, number[]>[];
  calls: number;
  errors: number;
  firstError?: string;
}

/**
 * One caller calls every target once per turn, in a fresh random order (so no target always follows
 * another), until `untilMs` has passed; each latency goes to the slice of the phase it ended in.
 */
async function runRotation(
  targets: ReadonlyArray<{ name: string; caller: Caller }>,
  untilMs: number,
  sliceCount: number,
) {
  const phase: Rotation = { slices: Array.from({ length: sliceCount }, () => new Map()), calls: 0, errors: 0 };
  const start = performance.now();
  const sliceMs = untilMs / sliceCount;
  const order = [...targets];
  while (performance.now() - start < untilMs && phase.errors <= MAX_ERRORS) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j] as (typeof order)[number], order[i] as (typeof order)[number]];
    }
    for (const { name, caller } of order) {
      const t0 = performance.now();
      try {
        await caller.call();
        const t1 = performance.now();
        const slice = phase.slices[Math.min(sliceCount - 1, Math.floor((t1 - start) / sliceMs))] as Map<
          string,
          number[]
        >;
        const samples = slice.get(name) ?? [];
        if (samples.length === 0) slice.set(name, samples);
        samples.push(t1 - t0);
        phase.calls += 1;
      } catch (error) {
        phase.errors += 1;
        phase.firstError ??= `${name}: ${error instanceof Error ? error.message : String(error)}`;
      }
    }
  }
  return phase;
}

async function rotate(): Promise<void> {
  const targets = targetsOf(values.targets);
  const callers = await Promise.all(targets.map(async (t) => ({ name: t.name, caller: await sdkCaller(t) })));
  if (warmupMs > 0) {
    const warm = await runRotation(callers, warmupMs, 1);
    if (warm.errors > MAX_ERRORS) throw new Error(`warm-up failed: ${warm.firstError}`);
  }
  await handshake('ready', 'go');
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const measured = await runRotation(callers, durationMs as number, slices);
  const elapsedMs = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const all = Float64Array.from(measured.slices.flatMap((slice) => [...slice.values()].flat())).sort();
  const calls: Record<string, number> = {};
  for (const { name } of targets) {
    calls[name] = measured.slices.reduce((sum, slice) => sum + (slice.get(name)?.length ?? 0), 0);
  }
  const report: LoadReport = {
    mode,
    op,
    concurrency,
    era: callers[0]?.caller.era,
    calls: measured.calls,
    errors: measured.errors,
    firstError: measured.firstError,
    elapsedMs,
    callsPerS: measured.calls / (elapsedMs / 1000),
    p50Ms: percentile(all, 0.5),
    p99Ms: percentile(all, 0.99),
    meanMs: all.length > 0 ? all.reduce((a, b) => a + b, 0) / all.length : Number.NaN,
    loadCpuMsPerCall: measured.calls > 0 ? (cpu.user + cpu.system) / 1000 / measured.calls : Number.NaN,
    complete: true,
    rotation: {
      sliceP50Ms: measured.slices.map((slice) =>
        Object.fromEntries(targets.map(({ name }) => [name, median(slice.get(name) ?? []) ?? Number.NaN])),
      ),
      calls,
    },
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
  await handshake('reported', 'close').catch(() => {});
  await withTimeout(Promise.allSettled(callers.map((c) => c.caller.close())), 3_000, 'closing').catch(() => {});
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** The p50 of samples that some calls report (undefined when none did). */
function median(samples: readonly number[]): number | undefined {
  return samples.length > 0 ? percentile(Float64Array.from(samples).sort(), 0.5) : undefined;
}

/** With an orchestrator (IPC channel): tell it `type`, wait for its `answer`. Without one, go on at once. */
function handshake(type: string, answer: string, send = process.send?.bind(process)): Promise<void> {
  if (!send) return Promise.resolve();
  let onMessage: ((message: unknown) => void) | undefined;
  return withTimeout(
    new Promise<void>((resolve) => {
      onMessage = (message: unknown) => {
        if ((message as { type?: string } | null)?.type === answer) resolve();
      };
      process.on('message', onMessage);
      send({ type });
    }),
    GO_TIMEOUT_MS,
    `waiting for the orchestrator's ${answer}`,
  ).finally(() => {
    if (onMessage) process.off('message', onMessage);
  });
}

async function main(): Promise<void> {
  const callers =
    mode === 'ops'
      ? opsCallers()
      : mode === 'http'
        ? httpCallers()
        : await Promise.all(Array.from({ length: concurrency }, () => sdkCaller()));
  if (warmupMs > 0) {
    const warm = await runPhase(callers, warmupMs, Number.POSITIVE_INFINITY, false);
    if (warm.errors > MAX_ERRORS) throw new Error(`warm-up failed: ${warm.firstError}`);
  }
  await handshake('ready', 'go');
  const measured = await runPhase(callers, durationMs ?? maxMs, count ?? Number.POSITIVE_INFINITY, true);
  const sorted = Float64Array.from(measured.latencies).sort();
  const sum = measured.latencies.reduce((a, b) => a + b, 0);
  const answerBytes = op === 'list' ? await callers[0]?.answerBytes?.() : undefined;
  const report: LoadReport = {
    mode,
    op,
    concurrency,
    era: callers[0]?.era,
    calls: measured.calls,
    errors: measured.errors,
    firstError: measured.firstError,
    elapsedMs: measured.elapsedMs,
    callsPerS: measured.calls / (measured.elapsedMs / 1000),
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    meanMs: measured.calls > 0 ? sum / measured.calls : Number.NaN,
    loadCpuMsPerCall: measured.calls > 0 ? measured.cpuMs / measured.calls : Number.NaN,
    answerBytes,
    p50LastByteMs: median(measured.lastBytes),
    p50DecodeMs: median(measured.decodes),
    complete: count === undefined || measured.calls + measured.errors >= count,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
  // Closing the clients makes requests too (a 2025 session ends with DELETE): only once the orchestrator
  // has read the gateway's CPU counter.
  await handshake('reported', 'close').catch(() => {});
  await withTimeout(Promise.allSettled(callers.map((c) => c.close())), 3_000, 'closing').catch(() => {});
}

try {
  await (mode === 'rotate' ? rotate() : main());
  process.exit(0);
} catch (error) {
  process.stderr.write(`load: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
}
