/**
 * OpenTelemetry traces, on only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set:
 * then the trace SDK and the OTLP/HTTP exporter are loaded (dynamic imports, so a gateway without
 * them set loads and runs none of it) and every helper here records spans; otherwise each helper
 * is one boolean test. The exporter reads the standard `OTEL_*` variables (headers, timeout,
 * protocol); `OTEL_SERVICE_NAME` names the service (default `gatehouse`).
 *
 * A call's trace: the agent's W3C `traceparent` (HTTP header, or `_meta.traceparent` in the request)
 * is the parent; the gate's span (`tools/call <name>`, kind SERVER) holds the verdict, the approval
 * and the upstream call (`tools/call <tool>`, kind CLIENT), which carries the context on to the
 * upstream as a `traceparent` header and in `_meta` (never the agent's `tracestate`; the agent's sampled flag
 * does not decide: see `agentContext`). Span names and attributes follow the MCP and
 * GenAI semantic conventions (`mcp.method.name`, `gen_ai.tool.name`, `gen_ai.operation.name`, …).
 * A call that waits for an approval stores its context with the approval; the approved execution
 * (`gatehouse.approval.execute`, on whichever replica claims it) continues that trace, linked to the
 * decision's span (`approvals/approve`).
 */
import {
  type Attributes,
  type Context,
  context,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { VERSION } from '../version.js';

let on = false;
let provider: { forceFlush(): Promise<void>; shutdown(): Promise<void> } | undefined;

/** Whether traces are recorded in this process. */
export function tracingEnabled(): boolean {
  return on;
}

/** Loads the SDK and starts exporting when the environment asks for it; idempotent. */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (on) return true;
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return false;
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
    ]);
  const tracerProvider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      'service.name': env.OTEL_SERVICE_NAME ?? 'gatehouse',
      'service.version': VERSION,
    }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The AsyncLocalStorage context manager and the W3C trace-context propagator, process-wide.
  tracerProvider.register();
  provider = tracerProvider;
  on = true;
  return true;
}

/** Sends what is buffered (tests; shutdown). */
export async function flushTracing(): Promise<void> {
  await provider?.forceFlush();
}

/** Flushes and stops exporting; the process-wide registrations go too. */
export async function stopTracing(): Promise<void> {
  const current = provider;
  provider = undefined;
  on = false;
  await current?.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
}

const tracer = () => trace.getTracer('gatehouse', VERSION);

/** The W3C Trace Context sizes: a `traceparent` (version 00) is 55 characters; a `tracestate` at most 512. */
const MAX_TRACEPARENT = 55;
const MAX_TRACESTATE = 512;

/**
 * The context an agent's request names as its parent: `_meta.traceparent` in the JSON-RPC body
 * (MCP's own carrier) wins over the HTTP `traceparent` header, each with its own `tracestate`. No valid
 * one: a new trace. The agent is not trusted with more than the trace id and its span id:
 * - a value over the spec's size is ignored unread (a `tracestate` may be as big as the body);
 * - its sampled flag does not decide: the parent is taken as sampled, so with the default (parent-based)
 *   sampler the gateway's spans record whatever the agent says (flags `00` would hide its calls);
 * - its `tracestate` stays on the gateway's own spans (exported to the operator's collector), never
 *   forwarded upstream (`outgoingCarrier`).
 */
export function agentContext(headers: Record<string, unknown>, body: unknown): Context {
  if (!on) return ROOT_CONTEXT;
  const meta = metaOf(body);
  const fromMeta = typeof meta?.traceparent === 'string';
  const traceparent = fromMeta ? meta?.traceparent : headers.traceparent;
  const tracestate = fromMeta ? meta?.tracestate : headers.tracestate;
  if (typeof traceparent !== 'string' || traceparent.length > MAX_TRACEPARENT) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent };
  if (typeof tracestate === 'string' && tracestate.length <= MAX_TRACESTATE) carrier.tracestate = tracestate;
  const parent = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, carrier));
  if (!parent) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, { ...parent, traceFlags: parent.traceFlags | TraceFlags.SAMPLED });
}

function metaOf(body: unknown): Record<string, unknown> | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const params = (body as { params?: unknown }).params;
  if (typeof params !== 'object' || params === null) return undefined;
  const meta = (params as { _meta?: unknown })._meta;
  return typeof meta === 'object' && meta !== null ? (meta as Record<string, unknown>) : undefined;
}

/** Runs `fn` with `parent` as the active context (when tracing is on). */
export function withContext<T>(parent: Context, fn: () => T): T {
  return on ? context.with(parent, fn) : fn();
}

/**
 * Runs `fn` inside a span (a child of the active context); the span ends when `fn` settles. Not itself
 * async, and `attributes` may be a function: with tracing off a call pays no promise and no attribute
 * of its own (it is on every call's path).
 */
export function inSpan<T>(
  name: string,
  kind: 'server' | 'client' | 'internal',
  attributes: Attributes | (() => Attributes),
  fn: (span: Span | undefined) => Promise<T>,
  links?: Link[],
): Promise<T> {
  if (!on) {
    try {
      return fn(undefined);
    } catch (error) {
      return Promise.reject(error); // as an async function would: a throw is a rejection
    }
  }
  return recordSpan(name, kind, typeof attributes === 'function' ? attributes() : attributes, fn, links);
}

async function recordSpan<T>(
  name: string,
  kind: 'server' | 'client' | 'internal',
  attributes: Attributes,
  fn: (span: Span | undefined) => Promise<T>,
  links?: Link[],
): Promise<T> {
  const spanKind = kind === 'server' ? SpanKind.SERVER : kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL;
  return tracer().startActiveSpan(name, { kind: spanKind, attributes, ...(links && { links }) }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      span.setAttribute('error.type', (error as { code?: string }).code ?? (error as Error).name ?? 'Error');
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The trace id of the active span (for the audit row), when tracing is on. */
export function activeTraceId(): string | undefined {
  if (!on) return undefined;
  const id = trace.getActiveSpan()?.spanContext().traceId;
  return id && id !== '00000000000000000000000000000000' ? id : undefined;
}

/**
 * The `traceparent` of the active context, to carry on to an upstream; none when off. Never a `tracestate`:
 * the one a span has is the agent's (Gatehouse adds no entry of its own), not Gatehouse's to pass on.
 */
export function outgoingCarrier(): Record<string, string> | undefined {
  if (!on) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ? { traceparent: carrier.traceparent } : undefined;
}

/** The active context's `traceparent`, to store with work that runs later (an approved call); none when off. */
export function activeTraceparent(): string | undefined {
  return outgoingCarrier()?.traceparent;
}

/**
 * Runs `fn` in a span that continues the trace `traceparent` was stored from (the call that waited for
 * an approval), linked to the span active now (the decision that let it run), when there is one. No
 * stored context: a child of the active one, as `inSpan`.
 */
export function inResumedSpan<T>(
  name: string,
  attributes: Attributes,
  traceparent: string | null | undefined,
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (!on || !traceparent) return inSpan(name, 'internal', attributes, fn);
  const resumed = propagation.extract(ROOT_CONTEXT, { traceparent });
  if (!trace.getSpanContext(resumed)) return inSpan(name, 'internal', attributes, fn);
  const now = trace.getActiveSpan()?.spanContext();
  const links = now && trace.isSpanContextValid(now) ? [{ context: now }] : undefined;
  return context.with(resumed, () => inSpan(name, 'internal', attributes, fn, links));
}
