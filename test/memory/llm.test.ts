/**
 * The language-model features against a fake OpenAI-compatible server built for the test (on
 * 127.0.0.2, which the egress guard's test seam treats as public): fact extraction, a zero-yield
 * extraction, reflect grounded in recalled facts, mental-model refresh, the sealed key (sent, never
 * logged or returned), and a failing endpoint that fails the operation honestly. Plus the
 * store-unreachable answer of memory_add through real HTTP.
 */
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SurfaceGrants } from '../../src/api/grants.js';
import { buildApp } from '../../src/app.js';
import { ApprovalQueue } from '../../src/approvals/queue.js';
import { AuditLog } from '../../src/audit/log.js';
import { EventHub } from '../../src/audit/stream.js';
import { loadConfig } from '../../src/config.js';
import { tokenAuthenticator } from '../../src/identity/index.js';
import { createLogger } from '../../src/logging.js';
import { MemoryEngine } from '../../src/memory/engine.js';
import { SettingsService } from '../../src/settings/service.js';
import { TokenStore } from '../../src/store/tokens.js';
import { createMemorySurface } from '../../src/surfaces/memory/index.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, freshStore, sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const LLM_KEY = 'sk-test-very-secret-llm-key-4242';

interface FakeLlm {
  url: string;
  requests: { authorization: string | undefined; body: Json }[];
  mode: 'ok' | 'broken';
  close(): Promise<void>;
}

/** An OpenAI-compatible chat endpoint: extracts one fact per sentence, answers reflect from fact [1]. */
async function startFakeLlm(): Promise<FakeLlm> {
  const fake: FakeLlm = { url: '', requests: [], mode: 'ok', close: async () => {} };
  const server: HttpServer = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw) as Json;
      fake.requests.push({ authorization: req.headers.authorization, body });
      if (req.url !== '/v1/chat/completions' || fake.mode === 'broken') {
        res.writeHead(fake.mode === 'broken' ? 500 : 404).end('{"error":"nope"}');
        return;
      }
      const system = String(body.messages[0].content);
      const user = String(body.messages[1].content);
      let content: string;
      if (system.startsWith('Extract the durable facts')) {
        const sentences = user.includes('NOTHING') ? [] : user.split(/(?<=\.)\s+/).filter((s) => s.trim());
        content = JSON.stringify({
          facts: sentences.map((text, i) => ({ text, fact_type: i === 0 ? 'world' : 'experience', entities: ['Ops'] })),
        });
      } else {
        const first = /\[1\] \(([^)]+)\) (.*)/.exec(user);
        content = first ? `According to [1] (${first[1]}): ${first[2]}` : 'No facts.';
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content } }],
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, PUBLIC_TEST_HOST, resolve));
  fake.url = `http://${PUBLIC_TEST_HOST}:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () => new Promise((resolve) => server.close(() => resolve()));
  return fake;
}

describeEachStore('memory with a language model', (target) => {
  let gw: TestGateway;
  let llm: FakeLlm;
  let client: Client;

  const ok = async (name: string, args: Json = {}) => {
    const result = (await client.callTool({ name, arguments: args })) as { isError?: boolean; structuredContent: Json };
    expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
    return result.structuredContent;
  };
  const settle = async (id: string): Promise<Json> => {
    await gw.gateway.memory.idle();
    return ok('memory_operation_get', { id });
  };

  beforeEach(async () => {
    llm = await startFakeLlm();
    gw = await startTestGateway(target, {
      GATEHOUSE_LLM_URL: llm.url,
      GATEHOUSE_LLM_MODEL: 'fake-model',
      GATEHOUSE_LLM_KEY: LLM_KEY,
    });
    const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'thinker' } })).json();
    await gw.gateway.app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(gw.gateway.app.server.address() as AddressInfo).port}`;
    client = new Client({ name: 'thinker', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp/memory`), {
        requestInit: { headers: { authorization: `Bearer ${agent.token}` } },
      }),
    );
  });
  afterEach(async () => {
    await client.close().catch(() => {});
    await gw.close();
    await llm.close();
  });

  it('extracts facts, reports a zero yield, and reflects grounded in recalled facts', async () => {
    const added = await ok('memory_add', {
      text: 'The database is backed up hourly. I restored it last Monday.',
      tags: ['db'],
    });
    const op = await settle(added.operation_id);
    expect(op).toMatchObject({ status: 'completed', facts_extracted: 2 });
    const units = (await ok('memory_list', {})).items as Json[];
    expect(units.map((u) => u.text).sort()).toEqual([
      'I restored it last Monday.',
      'The database is backed up hourly.',
    ]);
    expect(units.find((u) => u.text.startsWith('I restored'))).toMatchObject({
      fact_type: 'experience',
      entities: ['Ops'],
      tags: ['db'],
    });
    const extraction = llm.requests[0] as { authorization: string; body: Json };
    expect(extraction.authorization).toBe(`Bearer ${LLM_KEY}`);
    expect(extraction.body).toMatchObject({ model: 'fake-model', response_format: { type: 'json_object' } });

    const nothing = await ok('memory_add', { text: 'NOTHING worth keeping here.' });
    expect(await settle(nothing.operation_id)).toMatchObject({
      status: 'completed',
      facts_extracted: 0,
      nothing_learned: true,
      notice: expect.stringMatching(/Nothing new was learned/),
    });

    const reflected = await ok('memory_reflect', { query: 'How often is the database backed up?' });
    const grounding = reflected.based_on as Json[];
    const backup = units.find((u) => u.text === 'The database is backed up hourly.') as Json;
    expect(grounding.map((g) => g.id)).toContain(backup.id);
    expect(reflected).toMatchObject({ status: 'ok', model: 'fake-model' });
    expect(reflected.text).toMatch(/^According to \[1\]/);
    // The model was given exactly the recalled facts, with their ids.
    const prompt = String((llm.requests.at(-1) as { body: Json }).body.messages[1].content);
    for (const g of grounding) expect(prompt).toContain(`(${g.id}) ${g.text}`);

    // A mental model's content comes from a refresh operation grounded the same way.
    const model = await ok('memory_mental_model_create', { name: 'backups', source_query: 'database backup' });
    expect(model.operation_id).toEqual(expect.any(String));
    expect(await settle(model.operation_id)).toMatchObject({ kind: 'refresh', status: 'completed' });
    const full = await ok('memory_mental_model_get', { id: model.mental_model_id });
    expect(full).toMatchObject({ stale: false, content: expect.stringMatching(/^According to/) });
    expect(full.grounding).toContain(backup.id);

    // The key is never logged and never returned.
    expect(gw.logs.join('')).not.toContain(LLM_KEY);
    expect(JSON.stringify(await ok('memory_bank_stats'))).not.toContain(LLM_KEY);
  });

  it('fails the operation honestly when the endpoint fails, and retries it', async () => {
    llm.mode = 'broken';
    const added = await ok('memory_add', { text: 'The cache TTL is five minutes.' });
    const failed = await settle(added.operation_id);
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'memory.llm_failed' } });
    const reflect = (await client.callTool({ name: 'memory_reflect', arguments: { query: 'cache' } })) as Json;
    // Nothing recalled yet: reflect says so without calling the model.
    expect(reflect.structuredContent).toMatchObject({ status: 'ok', based_on: [] });
    llm.mode = 'ok';
    await ok('memory_operation_retry', { id: added.operation_id });
    expect(await settle(added.operation_id)).toMatchObject({ status: 'completed', facts_extracted: 1, attempts: 2 });
  });
});

describe('memory engine unavailable', () => {
  let cleanup: (() => Promise<void>) | undefined;
  beforeEach(() => {
    cleanup = undefined;
  });
  afterEach(async () => cleanup?.());

  it('memory_add answers memory.engine_unavailable with retry_after_s when the store cannot be reached', async () => {
    // The control plane (tokens, settings, approvals) on one live store; the memory engine on a store that is gone.
    const live = await freshStore(sqliteTarget);
    const gone = await freshStore(sqliteTarget);
    const config = loadConfig({
      env: { NODE_ENV: 'test', GATEHOUSE_DATA_DIR: live.dataDir, GATEHOUSE_LOG_LEVEL: 'silent' },
    });
    const logger = createLogger(config);
    const tokens = new TokenStore(live.store);
    const settings = new SettingsService(live.store);
    const audit = new AuditLog(live.store);
    const events = await EventHub.open(live.store);
    const approvals = new ApprovalQueue({ store: live.store, audit, events });
    const engine = new MemoryEngine({ store: gone.store });
    const app = await buildApp({
      config,
      logger,
      grants: new SurfaceGrants(),
      authenticate: tokenAuthenticator(live.store, tokens),
      routes: [],
    });
    createMemorySurface({ config, app, engine, settings, approvals, audit: async () => {} });
    await gone.store.close();
    const created = await tokens.create({ role: 'agent', name: 'alice', source: 'api' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const client = new Client({ name: 'alice', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    cleanup = async () => {
      await client.close().catch(() => {});
      await app.close();
      await approvals.close();
      events.close();
      await audit.flush();
      await live.cleanup();
      await gone.cleanup().catch(() => {});
    };
    await client.connect(
      new StreamableHTTPClientTransport(
        new URL(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/mcp/memory`),
        { requestInit: { headers: { authorization: `Bearer ${created.token}` } } },
      ),
    );
    const result = (await client.callTool({ name: 'memory_add', arguments: { text: 'hello' } })) as Json;
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({
      status: 'error',
      error: {
        code: 'memory.engine_unavailable',
        message: expect.stringMatching(/retry/),
        details: { retry_after_s: 5 },
      },
    });
    // A schema error is still a schema error, not unavailability.
    const bad = (await client.callTool({ name: 'memory_add', arguments: { text: '' } })) as Json;
    expect(bad.structuredContent.error.code).toBe('mcp.memory_schema');
  });
});
