/**
 * Recursive upstream schemas: a `$ref` loop that consumes nothing (`{"$ref":"#"}` at the root, `$defs` that
 * refer round in a circle) would recurse until the stack overflows on every call, so its tool is quarantined
 * at the handshake (`unsafe_schema`) and never compiled; a schema that recurses into properties or items (a
 * tree) is accepted and validates. Whatever still throws while checking arguments (a stack overflow on
 * arguments nested too deep) is a typed refusal, logged once, never a bare JSON-RPC internal error.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { ArgumentValidator } from '../../src/policy/arguments.js';
import { schemaRefusal } from '../../src/policy/pins.js';
import { refLoop } from '../../src/policy/schema-safety.js';
import { startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

type Json = Record<string, unknown>;

const TREE: Json = {
  $defs: {
    node: {
      type: 'object',
      properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } },
    },
  },
  $ref: '#/$defs/node',
};

/** Loops that never descend into the instance. */
const LOOPS: Record<string, Json> = {
  root: { $ref: '#', type: 'object' },
  defs: { type: 'object', $defs: { a: { $ref: '#/$defs/a' } }, properties: { x: { $ref: '#/$defs/a' } } },
  defsPair: { $defs: { a: { $ref: '#/$defs/b' }, b: { allOf: [{ $ref: '#/$defs/a' }] } }, $ref: '#/$defs/a' },
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then, not a thenable.
  ifThen: { type: 'object', if: { type: 'object' }, then: { $ref: '#' } },
  anchor: { $defs: { a: { $anchor: 'loop', not: { $ref: '#loop' } } }, properties: { x: { $ref: '#/$defs/a' } } },
  escaped: { $defs: { 'a/b': { anyOf: [{ $ref: '#/$defs/a~1b' }] } }, $ref: '#/$defs/a~1b' },
  byId: { $id: 'https://example.test/root', properties: { x: { $id: 'sub', $ref: 'sub' } } },
};

/** Recursion that descends (into a property, an item, a property name): ends when the arguments do. */
const DESCENDING: Record<string, Json> = {
  tree: TREE,
  rootProperty: { type: 'object', properties: { next: { $ref: '#' } } },
  additional: { type: 'object', additionalProperties: { $ref: '#' } },
  chain: { $defs: { a: { $ref: '#/$defs/b' }, b: { type: 'string' } }, properties: { x: { $ref: '#/$defs/a' } } },
  viaId: {
    $id: 'https://example.test/root',
    $defs: { list: { $id: 'list', type: 'array', items: { $ref: 'root' } } },
    properties: { x: { $ref: 'list' } },
  },
};

/**
 * A schema the SDK upstream lists exactly as given and never checks (`fromJsonSchema` itself overflows the
 * stack on a `$defs` loop): what is on trial is the gateway.
 */
function listedAs(schema: Json): Parameters<McpServer['registerTool']>[1]['inputSchema'] {
  const standard = {
    version: 1,
    vendor: 'test',
    validate: (value: unknown) => ({ value }),
    jsonSchema: { input: () => schema, output: () => schema },
  };
  return { '~standard': standard } as unknown as Parameters<McpServer['registerTool']>[1]['inputSchema'];
}

function thrown(fn: () => void): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('$ref loops that consume nothing', () => {
  it('finds each loop, naming where it runs', () => {
    for (const [name, schema] of Object.entries(LOOPS)) expect({ name, loop: refLoop(schema) }).not.toEqual({ name });
    expect(refLoop(LOOPS.root)).toEqual(['#', '#']);
    expect(refLoop(LOOPS.defsPair)).toEqual(['#/$defs/a', '#/$defs/b', '#/$defs/b/allOf/0', '#/$defs/a']);
    expect(refLoop(LOOPS.ifThen)).toEqual(['#', '#/then', '#']);
  });

  it('accepts recursion that descends into the arguments, and refs it cannot resolve', () => {
    for (const [name, schema] of Object.entries(DESCENDING)) expect({ name, loop: refLoop(schema) }).toEqual({ name });
    expect(refLoop({ $ref: 'https://elsewhere.test/schema.json' })).toBeUndefined();
    expect(refLoop({ $ref: '#/$defs/missing' })).toBeUndefined();
    expect(refLoop(true)).toBeUndefined();
  });

  it('refuses the tool at the handshake as unsafe_schema (input or output schema); a tree passes', () => {
    expect(schemaRefusal({ name: 't', inputSchema: LOOPS.root })).toBe('unsafe_schema');
    expect(schemaRefusal({ name: 't', inputSchema: LOOPS.defs })).toBe('unsafe_schema');
    expect(schemaRefusal({ name: 't', inputSchema: { type: 'object' }, outputSchema: LOOPS.defsPair })).toBe(
      'unsafe_schema',
    );
    expect(schemaRefusal({ name: 't', inputSchema: TREE, outputSchema: DESCENDING.viaId })).toBeNull();
  });
});

describe('ArgumentValidator on recursive schemas', () => {
  it('refuses a call through a loop, typed, without running it (a pin made before the handshake refused loops)', () => {
    const validator = new ArgumentValidator();
    for (const [name, schema] of Object.entries(LOOPS)) {
      const error = thrown(() => validator.validate(`pin-${name}`, schema, { x: {} }));
      expect(error).toBeInstanceOf(GatehouseError);
      expect({ name, code: (error as GatehouseError).code }).toEqual({ name, code: 'tool.unsafe_schema' });
    }
  });

  it('validates a tree', () => {
    const validator = new ArgumentValidator();
    validator.validate('tree', TREE, { name: 'a', children: [{ name: 'b', children: [{ name: 'c' }] }] });
    const error = thrown(() => validator.validate('tree', TREE, { children: [{ children: [{ name: 3 }] }] }));
    expect(error).toMatchObject({ code: 'tool.invalid_arguments' });
    expect((error as GatehouseError).message).toMatch(/\/children\/0\/children\/0\/name must be string/);
  });

  it('turns a stack overflow on arguments nested too deep into tool.arguments_too_complex, logged once', () => {
    const warnings: unknown[][] = [];
    const validator = new ArgumentValidator({ log: { warn: ((...line: unknown[]) => warnings.push(line)) as never } });
    let deep: Json = { children: [] };
    for (let i = 0; i < 50_000; i++) deep = { children: [deep] };
    for (let i = 0; i < 2; i++) {
      const error = thrown(() => validator.validate('tree', TREE, deep));
      expect(error).toBeInstanceOf(GatehouseError);
      expect(error).toMatchObject({ code: 'tool.arguments_too_complex' });
    }
    expect(warnings).toHaveLength(1);
    expect(JSON.stringify(warnings[0])).toMatch(/RangeError/);
    // The same schema still checks ordinary arguments.
    validator.validate('tree', TREE, { children: [{ children: [] }] });
  });

  it('turns any other throw while validating into tool.invalid_arguments', () => {
    const validator = new ArgumentValidator({ log: { warn: () => {} } });
    const compiled = (validator as unknown as { compiled: Map<string, unknown> }).compiled;
    compiled.set('broken', () => {
      throw new TypeError('a keyword failed');
    });
    const error = thrown(() => validator.validate('broken', { type: 'object' }, {}));
    expect(error).toBeInstanceOf(GatehouseError);
    expect(error).toMatchObject({ code: 'tool.invalid_arguments' });
  });
});

describe('recursive upstream schemas through the gateway', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const SCHEMAS: Record<string, Json> = { recref: LOOPS.defs as Json, recref2: LOOPS.root as Json, tree: TREE };

  /** Calls each tool got upstream (the fixture's `stats` count only its standard tools). */
  const ran: Record<string, number> = {};

  async function setup(): Promise<{ gw: TestGateway; agent: Client }> {
    const gw = await startTestGateway(sqliteTarget);
    cleanups.push(() => gw.close());
    const register = (server: McpServer) => {
      for (const [name, schema] of Object.entries(SCHEMAS)) {
        server.registerTool(name, { description: `schema ${name}`, inputSchema: listedAs(schema) }, async () => {
          ran[name] = (ran[name] ?? 0) + 1;
          return { content: [{ type: 'text' as const, text: `${name} ran` }] };
        });
      }
    };
    const upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'], register });
    cleanups.push(() => upstream.close());
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBe(201);
    await gw.request('PATCH', '/api/mcp/servers/files/tools', {
      body: { mode: 'all', allow: ['echo', ...Object.keys(SCHEMAS)], defaultTier: 'blocked' },
    });
    const tested = (await gw.request('POST', '/api/mcp/servers/files/test')).json();
    expect(tested, JSON.stringify(tested)).toMatchObject({ ok: true });
    const token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-one' } })).json();
    const base = await gw.listen();
    const agent = await connectAgent(`${base}/mcp`, token.token, { era: 'modern' });
    cleanups.push(() => agent.close());
    return { gw, agent };
  }

  it('quarantines a looping schema at the handshake (unsafe_schema) and serves a tree', async () => {
    const s = await setup();
    const pins = (await s.gw.request('GET', '/api/mcp/servers/files/pins')).json() as {
      pins: { tool: string; state: string; reason: string | null }[];
    };
    expect(Object.fromEntries(pins.pins.map((p) => [p.tool, { state: p.state, reason: p.reason }]))).toEqual({
      echo: { state: 'pinned', reason: null },
      tree: { state: 'pinned', reason: null },
      recref: { state: 'quarantined', reason: 'unsafe_schema' },
      recref2: { state: 'quarantined', reason: 'unsafe_schema' },
    });

    const refused = await s.agent.callTool({ name: 'files__recref2', arguments: {} });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({
      status: 'error',
      error: { code: 'tool.quarantined', reason: 'unsafe_schema' },
    });
    expect(ran.recref2 ?? 0).toBe(0);

    const ok = await s.agent.callTool({ name: 'files__tree', arguments: { children: [{ children: [] }] } });
    expect(ok.content).toEqual([{ type: 'text', text: 'tree ran' }]);
    expect(ran.tree).toBe(1);
    const invalid = await s.agent.callTool({ name: 'files__tree', arguments: { children: [{ children: 3 }] } });
    expect(invalid.structuredContent).toMatchObject({ error: { code: 'tool.invalid_arguments' } });
  });
});
