/**
 * OpenTelemetry: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, a hub call exports one connected trace to an
 * OTLP/HTTP receiver (a plain node http server here, reading the exporter's JSON): the agent's span
 * (its `traceparent`, as an HTTP header or in `_meta`) → the gate's span (`tools/call <name>`, SERVER,
 * with the verdict) → the upstream span (`tools/call <tool>`, CLIENT), whose context reached the
 * upstream as a `traceparent` header and in `_meta`; the audit row carries the trace id. A call that
 * waited for an approval and its approved execution are one trace, the execution linked to the decision.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { acceptedContent, inputRequired } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { flushTracing, stopTracing, tracingEnabled } from '../../src/telemetry/tracing.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { eventually } from '../helpers/eventually.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
  links?: Array<{ traceId: string; spanId: string }>;
}

/** Every span the receiver got, from OTLP/HTTP JSON export requests. */
function spansOf(bodies: unknown[]): OtlpSpan[] {
  const spans: OtlpSpan[] = [];
  for (const body of bodies) {
    for (const rs of (body as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: OtlpSpan[] }> }> })
      .resourceSpans ?? []) {
      for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
    }
  }
  return spans;
}

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value ? Object.values(value)[0] : undefined;
};

/** OTLP span kinds: 2 SERVER, 3 CLIENT. */
const SERVER = 2;
const CLIENT = 3;

describe('tracing', () => {
  let receiver: Server;
  const exports: unknown[] = [];
  const contentTypes: string[] = [];
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  let token: string;

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        contentTypes.push(String(req.headers['content-type']));
        if (req.url === '/v1/traces') exports.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_OPS_ENABLED: 'true' });
    expect(tracingEnabled()).toBe(true);
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBe(201);
    const policy = await gw.request('PATCH', '/api/mcp/servers/files/tools', {
      body: { mode: 'all', allow: ['echo'], gated: ['add'] },
    });
    expect(policy.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'traced' } })).json().token;
    base = await gw.listen();
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await stopTracing();
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    await new Promise((resolve) => receiver?.close(resolve));
  });

  /** Waits for the spans of `traceId` that the test expects, after a flush. */
  async function traceOf(traceId: string, count: number): Promise<OtlpSpan[]> {
    let spans: OtlpSpan[] = [];
    await eventually(async () => {
      await flushTracing();
      spans = spansOf(exports).filter((s) => s.traceId === traceId);
      expect(spans.length).toBeGreaterThanOrEqual(count);
    });
    return spans;
  }

  /** The upstream's `tools/call` requests that carried `traceId` (header and `_meta`). */
  function upstreamCarriers(traceId: string) {
    return upstream.log.records
      .filter((r) => r.rpcMethods.includes('tools/call') && r.body?.includes(traceId))
      .map((r) => ({
        header: r.headers.traceparent,
        meta: (JSON.parse(r.body as string) as { params: { _meta?: { traceparent?: string } } }).params._meta
          ?.traceparent,
      }));
  }

  for (const carrier of ['header', '_meta'] as const) {
    it(`connects agent → gate → upstream in one trace (agent context in the ${carrier})`, async () => {
      const traceId = randomBytes(16).toString('hex');
      const agentSpan = randomBytes(8).toString('hex');
      const traceparent = `00-${traceId}-${agentSpan}-01`;
      const agent = await connectAgent(`${base}/mcp`, token, {
        era: 'modern',
        ...(carrier === 'header' ? { headers: { traceparent } } : {}),
      });
      try {
        const result = await agent.callTool({
          name: 'files__echo',
          arguments: { text: `traced-${carrier}` },
          ...(carrier === '_meta' ? { _meta: { traceparent } } : {}),
        });
        expect((result.content as Array<{ text: string }>)[0]?.text).toBe(`traced-${carrier}`);
      } finally {
        await agent.close();
      }
      const spans = await traceOf(traceId, 2);
      const gate = spans.find((s) => s.name === 'tools/call files__echo') as OtlpSpan;
      expect(gate).toBeDefined();
      expect(gate.kind).toBe(SERVER);
      expect(gate.parentSpanId).toBe(agentSpan);
      expect(attribute(gate, 'mcp.method.name')).toBe('tools/call');
      expect(attribute(gate, 'gen_ai.tool.name')).toBe('files__echo');
      expect(attribute(gate, 'gen_ai.operation.name')).toBe('execute_tool');
      expect(attribute(gate, 'gatehouse.verdict')).toBe('allow');
      const call = spans.find((s) => s.name === 'tools/call echo') as OtlpSpan;
      expect(call).toBeDefined();
      expect(call.kind).toBe(CLIENT);
      expect(call.parentSpanId).toBe(gate.spanId);
      // The upstream received the upstream span's context, as a header and in `_meta`.
      const carried = upstreamCarriers(traceId);
      expect(carried.length).toBeGreaterThanOrEqual(1);
      for (const c of carried) {
        expect(c.header).toBe(`00-${traceId}-${call.spanId}-01`);
        expect(c.meta).toBe(`00-${traceId}-${call.spanId}-01`);
      }
      // The audit row leads to the trace (stored from the journal: settled first, as the audit routes do).
      await gw.gateway.audit.settle();
      const rows = await gw.gateway.store.db
        .selectFrom('audit_events')
        .select(['trace_id', 'tool'])
        .where('kind', '=', 'call')
        .where('trace_id', '=', traceId)
        .execute();
      expect(rows.map((r) => r.tool)).toEqual(['echo']);
    });
  }

  /** Every `tools/call` the upstream received in `traceId`'s trace: its `tracestate` header and `_meta`. */
  function upstreamStates(traceId: string) {
    return upstream.log.records
      .filter((r) => r.rpcMethods.includes('tools/call') && r.body?.includes(traceId))
      .map((r) => ({
        header: r.headers.tracestate,
        meta: (JSON.parse(r.body as string) as { params: { _meta?: { tracestate?: string } } }).params._meta
          ?.tracestate,
        body: r.body as string,
      }));
  }

  /** An agent's `tools/call files__echo` with its context in the header or in `_meta`. */
  async function callWith(carrier: 'header' | '_meta', context: Record<string, string>, text: string) {
    const agent = await connectAgent(`${base}/mcp`, token, {
      era: 'modern',
      ...(carrier === 'header' ? { headers: context } : {}),
    });
    try {
      const result = await agent.callTool({
        name: 'files__echo',
        arguments: { text },
        ...(carrier === '_meta' ? { _meta: context } : {}),
      });
      expect((result.content as Array<{ text: string }>)[0]?.text).toBe(text);
    } finally {
      await agent.close();
    }
  }

  for (const carrier of ['header', '_meta'] as const) {
    it(`keeps the agent’s tracestate from the upstream, the trace id still carried (${carrier})`, async () => {
      const traceId = randomBytes(16).toString('hex');
      const agentSpan = randomBytes(8).toString('hex');
      const context = { traceparent: `00-${traceId}-${agentSpan}-01`, tracestate: 'vendor=agent-chosen,dd=s:2' };
      await callWith(carrier, context, `state-${carrier}`);
      const spans = await traceOf(traceId, 2);
      const gate = spans.find((s) => s.name === 'tools/call files__echo') as OtlpSpan;
      expect(gate.parentSpanId).toBe(agentSpan);
      const call = spans.find((s) => s.name === 'tools/call echo') as OtlpSpan;
      const states = upstreamStates(traceId);
      expect(states.length).toBeGreaterThanOrEqual(1);
      for (const state of states) {
        expect(state.header).toBeUndefined();
        expect(state.meta).toBeUndefined();
        expect(state.body).not.toContain('agent-chosen');
      }
      for (const c of upstreamCarriers(traceId)) expect(c.header).toBe(`00-${traceId}-${call.spanId}-01`);
    });
  }

  it('records the gateway’s spans of an agent that says its trace is not sampled (flags 00)', async () => {
    const traceId = randomBytes(16).toString('hex');
    const agentSpan = randomBytes(8).toString('hex');
    await callWith('header', { traceparent: `00-${traceId}-${agentSpan}-00` }, 'unsampled-agent');
    const spans = await traceOf(traceId, 2);
    const gate = spans.find((s) => s.name === 'tools/call files__echo') as OtlpSpan;
    expect(gate).toBeDefined();
    expect(gate.parentSpanId).toBe(agentSpan);
    expect(attribute(gate, 'gatehouse.verdict')).toBe('allow');
    const call = spans.find((s) => s.name === 'tools/call echo') as OtlpSpan;
    expect(call.parentSpanId).toBe(gate.spanId);
    // Gatehouse's decision travels on: the upstream is told the trace is sampled.
    const carried = upstreamCarriers(traceId);
    expect(carried.length).toBeGreaterThanOrEqual(1);
    for (const c of carried) expect(c.header).toBe(`00-${traceId}-${call.spanId}-01`);
  });

  it('ignores a tracestate over 512 characters without parsing it, and a traceparent over 55', async () => {
    // A valid member first: parsed, it would survive (the invalid ones are skipped member by member).
    const oversized = `vendor=agent-chosen,${'A=b,'.repeat(50_000)}`;
    const traceId = randomBytes(16).toString('hex');
    const agentSpan = randomBytes(8).toString('hex');
    await callWith('_meta', { traceparent: `00-${traceId}-${agentSpan}-01`, tracestate: oversized }, 'big-state');
    const spans = await traceOf(traceId, 2);
    const gate = spans.find((s) => s.name === 'tools/call files__echo') as OtlpSpan & { traceState?: string };
    // The traceparent still counts; the tracestate was never taken (not even its valid first member).
    expect(gate.parentSpanId).toBe(agentSpan);
    expect(gate.traceState ?? '').toBe('');
    for (const state of upstreamStates(traceId)) expect(state.body).not.toContain('agent-chosen');

    // A traceparent longer than the spec's 55 characters (a "future version" with a tail) is not a parent.
    const longTrace = randomBytes(16).toString('hex');
    await callWith('header', { traceparent: `01-${longTrace}-${agentSpan}-01-${'x'.repeat(200)}` }, 'long-parent');
    await flushTracing();
    expect(spansOf(exports).filter((s) => s.traceId === longTrace)).toEqual([]);
    expect(upstreamCarriers(longTrace)).toEqual([]);
  });

  it('traces a conduit call (/ops/call-tool) from the caller’s traceparent to the upstream', async () => {
    const ops = (await gw.request('POST', '/api/tokens', { body: { role: 'ops', name: 'platform' } })).json().token;
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const answer = await fetch(`${base}/ops/call-tool`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ops}`,
        'content-type': 'application/json',
        traceparent: `00-${traceId}-${callerSpan}-01`,
      },
      body: JSON.stringify({ url: upstream.url, name: 'echo', arguments: { text: 'via-conduit' } }),
    });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    const spans = await traceOf(traceId, 2);
    const server = spans.find((s) => s.name === 'ops/call-tool') as OtlpSpan;
    expect(server.kind).toBe(SERVER);
    expect(server.parentSpanId).toBe(callerSpan);
    const call = spans.find((s) => s.name === 'tools/call echo') as OtlpSpan;
    expect(call.kind).toBe(CLIENT);
    expect(call.parentSpanId).toBe(server.spanId);
    const carried = upstreamCarriers(traceId);
    expect(carried.length).toBeGreaterThanOrEqual(1);
    for (const c of carried) {
      expect(c.header).toBe(`00-${traceId}-${call.spanId}-01`);
      expect(c.meta).toBe(`00-${traceId}-${call.spanId}-01`);
    }
  });

  it('starts a trace of its own for an agent that sends no context, still connected to the upstream span', async () => {
    const agent = await connectAgent(`${base}/mcp`, token, { era: 'legacy' });
    try {
      await agent.callTool({ name: 'files__echo', arguments: { text: 'untraced-agent' } });
    } finally {
      await agent.close();
    }
    let gate: OtlpSpan | undefined;
    await eventually(async () => {
      await flushTracing();
      gate = spansOf(exports).find(
        (s) => s.name === 'tools/call files__echo' && s.parentSpanId === undefined && attribute(s, 'gatehouse.verdict'),
      );
      expect(gate).toBeDefined();
    });
    const spans = await traceOf((gate as OtlpSpan).traceId, 2);
    expect(spans.find((s) => s.name === 'tools/call echo')?.parentSpanId).toBe((gate as OtlpSpan).spanId);
    expect(contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);
  });

  it('runs an approved call in the trace of the call that waited, linked to the decision', async () => {
    const traceId = randomBytes(16).toString('hex');
    const agentSpan = randomBytes(8).toString('hex');
    const agent = await connectAgent(`${base}/mcp`, token, {
      era: 'modern',
      headers: { traceparent: `00-${traceId}-${agentSpan}-01` },
    });
    let approvalId: string;
    try {
      const waited = await agent.callTool({ name: 'files__add', arguments: { a: 2, b: 3 } });
      const answer = JSON.parse((waited.content as Array<{ text: string }>)[0]?.text as string);
      expect(answer.status).toBe('pending_approval');
      approvalId = answer.approval_id;
    } finally {
      await agent.close();
    }
    expect(upstream.stats.calls.add ?? 0).toBe(0);
    // The operator decides later, in a trace of its own.
    const decisionTrace = randomBytes(16).toString('hex');
    const operatorSpan = randomBytes(8).toString('hex');
    const decided = await fetch(`${base}/api/approvals/${approvalId}/approve`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
        'content-type': 'application/json',
        traceparent: `00-${decisionTrace}-${operatorSpan}-01`,
      },
      body: '{}',
    });
    expect(decided.status).toBe(200);
    await decided.arrayBuffer();
    await eventually(async () =>
      expect((await gw.request('GET', `/api/approvals/${approvalId}`)).json().status).toBe('executed'),
    );

    // agent → gate (gated) → approval.create → approval.execute → upstream call: one trace.
    const spans = await traceOf(traceId, 4);
    const gate = spans.find((s) => s.name === 'tools/call files__add') as OtlpSpan;
    expect(gate.parentSpanId).toBe(agentSpan);
    expect(attribute(gate, 'gatehouse.verdict')).toBe('gated');
    const created = spans.find((s) => s.name === 'gatehouse.approval.create') as OtlpSpan;
    expect(created.parentSpanId).toBe(gate.spanId);
    const executed = spans.find((s) => s.name === 'gatehouse.approval.execute') as OtlpSpan;
    expect(executed.parentSpanId).toBe(created.spanId);
    expect(attribute(executed, 'gatehouse.approval.id')).toBe(approvalId);
    const call = spans.find((s) => s.name === 'tools/call add') as OtlpSpan;
    expect(call.kind).toBe(CLIENT);
    expect(call.parentSpanId).toBe(executed.spanId);
    for (const c of upstreamCarriers(traceId)) expect(c.header).toBe(`00-${traceId}-${call.spanId}-01`);
    // The execution links to the decision's span, a child of the operator's context.
    const decision = (await traceOf(decisionTrace, 1)).find((s) => s.name === 'approvals/approve') as OtlpSpan;
    expect(decision.kind).toBe(SERVER);
    expect(decision.parentSpanId).toBe(operatorSpan);
    expect(executed.links).toEqual([expect.objectContaining({ traceId: decisionTrace, spanId: decision.spanId })]);
    // Both audit rows, the call that waited and its approved execution, lead to the one trace (REST view).
    await eventually(async () => {
      const { events } = (await gw.request('GET', `/api/audit?kind=call&trace=${traceId}`)).json() as {
        events: Array<{ outcome: string; approvalId: string; traceId: string }>;
      };
      expect(events.map((e) => e.outcome).sort()).toEqual(['ok', 'pending_approval']);
      expect(events.every((e) => e.approvalId === approvalId && e.traceId === traceId)).toBe(true);
    });
    expect((await gw.request('GET', '/api/audit?trace=not-a-trace-id')).statusCode).toBe(400);
  });

  /** The audit rows of one trace, through the REST view the dashboard reads. */
  async function auditOfTrace(traceId: string) {
    return (await gw.request('GET', `/api/audit?trace=${traceId}&limit=100`)).json().events as Array<{
      kind: string;
      action: string;
      tool: string | null;
      verdict: string | null;
      outcome: string;
      approvalId: string | null;
      traceId: string;
    }>;
  }

  /** A call on `path` (admin or memory surface) in the agent's trace, answered `pending_approval`; returns its id. */
  async function gatedCall(
    path: string,
    traceId: string,
    name: string,
    args: Record<string, unknown>,
    options: Omit<Parameters<typeof connectAgent>[2] & object, 'era' | 'headers'> = {},
  ) {
    const agent = await connectAgent(`${base}${path}`, token, {
      era: 'modern',
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      ...options,
    });
    try {
      const waited = await agent.callTool({ name, arguments: args });
      const answer = waited.structuredContent as { status: string; approval_id: string };
      expect(answer.status).toBe('pending_approval');
      return answer.approval_id;
    } finally {
      await agent.close();
    }
  }

  /** An operator approves (untraced, so a new trace of its own); waits for the execution to finish. */
  async function approveAndWait(approvalId: string) {
    expect((await gw.request('POST', `/api/approvals/${approvalId}/approve`, { body: {} })).statusCode).toBe(200);
    await eventually(async () =>
      expect((await gw.request('GET', `/api/approvals/${approvalId}`)).json().status).toBe('executed'),
    );
  }

  it('gives an approved admin-surface call the trace id of the call that waited, on every row it writes', async () => {
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true, 'mcp.scope.servers': 'write' } });
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'scratch' } })).statusCode,
    ).toBe(201);
    const traceId = randomBytes(16).toString('hex');
    const approvalId = await gatedCall('/mcp/admin', traceId, 'mcp_server_uninstall', { args: { id: 'scratch' } });
    const card = (await gw.request('GET', `/api/approvals/${approvalId}`)).json();
    expect(card.traceId).toBe(traceId);
    await approveAndWait(approvalId);
    expect((await gw.request('GET', '/api/mcp/servers/scratch')).statusCode).toBe(404);
    await eventually(async () => {
      const rows = await auditOfTrace(traceId);
      expect(rows.every((r) => r.traceId === traceId)).toBe(true);
      // The call that waited and its execution: two call rows, one trace.
      const calls = rows.filter((r) => r.kind === 'call');
      expect(calls.map((r) => r.outcome).sort()).toEqual(['ok', 'pending_approval']);
      expect(calls.every((r) => r.action === 'admin.call' && r.tool === 'mcp_server_uninstall')).toBe(true);
      expect(calls.every((r) => r.verdict === 'gated' && r.approvalId === approvalId)).toBe(true);
      // The control-plane rows written inside it: the approval, its execution, and what the route changed.
      const admin = rows.filter((r) => r.kind === 'admin').map((r) => r.action);
      expect(admin).toEqual(expect.arrayContaining(['approval.create', 'approval.execute']));
      expect(admin.some((a) => a.includes('uninstall'))).toBe(true);
      // The decision is the operator's, in the operator's own trace.
      expect(admin).not.toContain('approval.approve');
    });
  });

  it('keeps an approved hub call’s later rounds (the agent’s answers) in the trace of the call that waited', async () => {
    const confirmation = z.object({ confirm: z.boolean() });
    const ops = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: [],
      register: (server) =>
        server.registerTool('deploy', { inputSchema: z.object({ env: z.string() }) }, async ({ env }, ctx) => {
          const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', confirmation);
          if (!answer) {
            return inputRequired({
              inputRequests: {
                confirm: inputRequired.elicit({ message: `Deploy to ${env}?`, requestedSchema: confirmation }),
              },
            });
          }
          return { content: [{ type: 'text', text: `deploy ${env}: ${answer.confirm}` }] };
        }),
    });
    try {
      expect((await gw.request('POST', '/api/mcp/install', { body: { url: ops.url, id: 'ops' } })).statusCode).toBe(
        201,
      );
      await gw.request('PATCH', '/api/mcp/servers/ops/tools', { body: { mode: 'all', gated: ['deploy'] } });
      expect((await gw.request('POST', '/api/mcp/servers/ops/test')).json().ok).toBe(true);
      const traceId = randomBytes(16).toString('hex');
      // The agent that asks says it can answer forms (the approved call's first round needs that).
      const approvalId = await gatedCall(
        '/mcp',
        traceId,
        'ops__deploy',
        { env: 'prod' },
        { client: { capabilities: { elicitation: { form: {} } } } },
      );
      await approveAndWait(approvalId);
      // The agent reads the outcome later, in another trace of its own, and answers the upstream's question.
      const laterTrace = randomBytes(16).toString('hex');
      const agent = await connectAgent(`${base}/mcp`, token, {
        era: 'modern',
        headers: { traceparent: `00-${laterTrace}-${randomBytes(8).toString('hex')}-01` },
        client: { capabilities: { elicitation: { form: {} } } },
        prepare: (client) =>
          client.setRequestHandler('elicitation/create', async () => ({
            action: 'accept',
            content: { confirm: true },
          })),
      });
      try {
        const done = await agent.callTool({
          name: 'gatehouse__approval_status',
          arguments: { approval_id: approvalId, wait_s: 10 },
        });
        expect(JSON.stringify(done.structuredContent)).toContain('deploy prod: true');
      } finally {
        await agent.close();
      }
      await eventually(async () => {
        const calls = (await auditOfTrace(traceId)).filter((r) => r.kind === 'call' && r.tool === 'deploy');
        // The call that waited, the first round (the question) and the round with the answers: one trace.
        expect(calls.map((r) => r.outcome).sort()).toEqual(['input_required', 'ok', 'pending_approval']);
        expect(calls.every((r) => r.approvalId === approvalId)).toBe(true);
      });
      expect((await auditOfTrace(laterTrace)).filter((r) => r.tool === 'deploy')).toEqual([]);
      const spans = await traceOf(traceId, 3);
      const round = spans.find((s) => s.name === 'gatehouse.approval.round') as OtlpSpan;
      expect(round).toBeDefined();
      // Linked to the status call that carried the answers.
      expect(round.links?.[0]?.traceId).toBe(laterTrace);
    } finally {
      await ops.close();
    }
  });

  it('gives an approved memory-surface call the trace id of the call that waited', async () => {
    const writer = await connectAgent(`${base}/mcp/memory`, token, { era: 'modern' });
    let directiveId: string;
    try {
      const created = await writer.callTool({
        name: 'memory_directive_create',
        arguments: { name: 'traced', content: 'Answer briefly.' },
      });
      directiveId = (created.structuredContent as { id: string }).id;
    } finally {
      await writer.close();
    }
    const traceId = randomBytes(16).toString('hex');
    const approvalId = await gatedCall('/mcp/memory', traceId, 'memory_directive_delete', { id: directiveId });
    expect((await gw.request('GET', `/api/approvals/${approvalId}`)).json().traceId).toBe(traceId);
    await approveAndWait(approvalId);
    await eventually(async () => {
      const rows = await auditOfTrace(traceId);
      const calls = rows.filter((r) => r.kind === 'call');
      expect(calls.map((r) => r.outcome).sort()).toEqual(['ok', 'pending_approval']);
      expect(calls.every((r) => r.action === 'memory.call' && r.tool === 'memory_directive_delete')).toBe(true);
      expect(calls.every((r) => r.approvalId === approvalId && r.traceId === traceId)).toBe(true);
      expect(rows.filter((r) => r.kind === 'admin').map((r) => r.action)).toContain('approval.execute');
    });
    // The approved execution's span is in that trace too.
    const spans = await traceOf(traceId, 2);
    expect(spans.find((s) => s.name === 'gatehouse.approval.execute')).toBeDefined();
  });
});
