/**
 * An upstream's pass-through lists and results are bounded before anything keeps or serves them: lists are
 * asked one page per request (at most 50 pages, 1000 items, 5 MiB, each item's strings and nesting bounded),
 * `instructions` are cut to a few kB, and `resources/read`, `prompts/get`, `completion/complete` and
 * `resources/templates/list` answers are bounded as tool results are, or refused with a clear error: never the
 * hang of an answer the gateway cannot serialize. A real gateway, a raw-HTTP hostile upstream on 127.0.0.2,
 * an SDK agent.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BOUNDS, MAX_INSTRUCTIONS_CHARS } from '../../src/upstream/bounds.js';
import { DRAIN_LIMITS } from '../../src/upstream/drain.js';
import { HOSTILE, type HostileListsFixture, startHostileListsServer } from '../fixtures/hostile-lists.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

type Json = Record<string, unknown>;

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
const TRUNCATED = 'io.gatehouse/truncated';

/** How many objects deep a value nests (iterative: a hostile value would overflow a recursive walk). */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    max = Math.max(max, depth + 1);
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return max;
}

/** Settles `work` and says how long it took: the agent must get its answer (or its error) quickly. */
async function timed<T>(work: Promise<T>): Promise<{ ms: number; value?: T; error?: Error }> {
  const start = Date.now();
  try {
    const value = await work;
    return { ms: Date.now() - start, value };
  } catch (error) {
    return { ms: Date.now() - start, error: error as Error };
  }
}

describe('hostile upstream lists and pass-through results', () => {
  let gw: TestGateway;
  let upstream: HostileListsFixture;
  let base: string;
  let token: string;
  let agent: Client;
  let handshake: Json;
  const wrapped = (uri: string) => `gatehouse://up/${encodeURIComponent(uri)}`;

  beforeAll(async () => {
    upstream = await startHostileListsServer(PUBLIC_TEST_HOST);
    gw = await startTestGateway(sqliteTarget);
    expect((await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'up' } })).statusCode).toBe(
      201,
    );
    handshake = (await gw.request('POST', '/api/mcp/servers/up/test')).json();
    token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json().token;
    base = await gw.listen();
    agent = await connectAgent(`${base}/mcp`, token, { era: 'legacy' });
  }, 60_000);

  afterAll(async () => {
    await agent?.close().catch(() => {});
    await gw?.close();
    await upstream?.close();
  });

  it('drains prompts and resources one page per request, within the page, item and size bounds', async () => {
    expect(handshake.ok).toBe(true);
    // 60 pages on offer: at most the page limit asked (prompts stop earlier, at the size ceiling).
    expect(upstream.log.count('resources/list')).toBe(DRAIN_LIMITS.maxPages);
    expect(upstream.log.count('prompts/list')).toBeLessThan(DRAIN_LIMITS.maxPages);

    const detail = (await gw.request('GET', '/api/mcp/servers/up')).json() as {
      discoveredPrompts: Json[];
      discoveredResources: Json[];
    };
    const prompts = detail.discoveredPrompts;
    expect(prompts.length).toBeGreaterThan(0);
    expect(prompts.length).toBeLessThan(HOSTILE.pages);
    for (const prompt of prompts) expect((prompt.description as string).length).toBe(DEFAULT_BOUNDS.maxStringChars);
    expect(bytes(prompts)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxSerializedBytes);

    const resources = detail.discoveredResources;
    expect(resources).toHaveLength(4 + DRAIN_LIMITS.maxPages * HOSTILE.resourcesPerPage);
    expect(bytes(resources)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxSerializedBytes);
    const meta = resources.find((r) => r.uri === 'file:///meta')!;
    expect((meta.description as string).length).toBe(DEFAULT_BOUNDS.maxStringChars);
    expect(depthOf(meta)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxDepth + 1);

    // What agents are served is that bounded list.
    const listed = await agent.listPrompts();
    expect(listed.prompts).toHaveLength(prompts.length);
    for (const prompt of listed.prompts) expect(prompt.description?.length).toBe(DEFAULT_BOUNDS.maxStringChars);
    expect((await agent.listResources()).resources).toHaveLength(resources.length);
  });

  it('asks one page of templates per listing and serves at most 100 of them', async () => {
    const before = upstream.log.count('resources/templates/list');
    const { resourceTemplates } = await agent.listResourceTemplates();
    expect(upstream.log.count('resources/templates/list') - before).toBe(1);
    expect(resourceTemplates).toHaveLength(100);
  });

  it('refuses a 10 MiB resource with a clear error, at once', async () => {
    const { ms, value, error } = await timed(agent.readResource({ uri: wrapped('file:///big') }, { timeout: 15_000 }));
    expect(value).toBeUndefined();
    expect(error?.message).toMatch(/larger than Gatehouse passes on/);
    expect(ms).toBeLessThan(10_000);
  });

  it('serves a resource text over the string cap but under the ceiling whole', async () => {
    const read = await agent.readResource({ uri: wrapped('file:///mid') }, { timeout: 15_000 });
    expect((read.contents[0] as { text: string }).text).toHaveLength(HOSTILE.midTextChars);
    expect(read._meta?.[TRUNCATED]).toBeUndefined();
  });

  it('cuts a resource whose _meta nests 300,000 deep, and answers at once', async () => {
    const { ms, value, error } = await timed(agent.readResource({ uri: wrapped('file:///deep') }, { timeout: 15_000 }));
    expect(error).toBeUndefined();
    expect(ms).toBeLessThan(10_000);
    expect(value?.contents[0]).toMatchObject({ text: 'hi' });
    expect(depthOf(value)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxDepth + 2);
    expect(value?._meta?.[TRUNCATED]).toBe(true);
    // The gateway is still well.
    expect((await gw.request('GET', '/healthz')).statusCode).toBe(200);
  });

  it('bounds prompts/get and completion/complete answers as tool results are', async () => {
    const name = (await agent.listPrompts()).prompts[0]!.name;
    const prompt = await agent.getPrompt({ name }, { timeout: 15_000 });
    expect(prompt.messages.length).toBeGreaterThan(0);
    expect(prompt.messages.length).toBeLessThan(HOSTILE.messages);
    for (const message of prompt.messages)
      expect((message.content as { text: string }).text).toHaveLength(DEFAULT_BOUNDS.maxStringChars);
    expect(bytes(prompt)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxSerializedBytes + 1024);
    expect(prompt._meta?.[TRUNCATED]).toBe(true);

    const completed = await agent.complete(
      { ref: { type: 'ref/prompt', name }, argument: { name: 'x', value: '' } },
      { timeout: 15_000 },
    );
    const values = completed.completion.values;
    expect(values.length).toBeGreaterThan(0);
    expect(values.length).toBeLessThan(HOSTILE.values);
    for (const value of values) expect(value).toHaveLength(DEFAULT_BOUNDS.maxStringChars);
    expect(completed._meta?.[TRUNCATED]).toBe(true);
  });

  it('cuts the instructions an upstream gives to a few kB', async () => {
    const single = await connectAgent(`${base}/mcp/s/up`, token, { era: 'legacy' });
    try {
      const instructions = single.getInstructions() ?? '';
      expect(instructions.startsWith('i'.repeat(MAX_INSTRUCTIONS_CHARS))).toBe(true);
      expect(instructions).not.toContain('i'.repeat(MAX_INSTRUCTIONS_CHARS + 1));
      expect(instructions.length).toBeLessThan(MAX_INSTRUCTIONS_CHARS + 1024);
    } finally {
      await single.close();
    }
  });
});
