/**
 * Toolsets in `gatehouse.yaml` (issue 22), on both stores: created after the servers the same file
 * installs, a second apply writes nothing, an edit updates, `prune` removes what the file omits; a file
 * error names the path. Overrides are stored beside the pins on both stores too.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { GatehouseError } from '../../src/errors.js';
import { apply, parse, writes } from '../declarative/helpers.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('toolsets in the config file', (target) => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let file: Record<string, unknown>;

  beforeEach(async () => {
    gw = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    file = {
      servers: [{ id: 'calc', name: 'Calc', transport: 'streamable-http', url: upstream.url }],
      toolsets: [
        { name: 'maths', description: 'Sums.', tools: [{ server: 'calc', tool: 'add' }] },
        { name: 'talk', tools: [{ server: 'calc', tool: 'echo' }] },
      ],
    };
  });
  afterEach(async () => {
    await upstream.close();
    await gw.close();
  });

  it('creates, leaves alone, updates and prunes toolsets', async () => {
    const first = await apply(gw, file);
    expect(first.toolsets).toMatchObject({ created: ['maths', 'talk'], updated: [], unchanged: [] });
    const maths = (await gw.request('GET', '/api/toolsets/maths')).json();
    expect(maths).toMatchObject({ description: 'Sums.', tools: [{ server: 'calc', tool: 'add' }] });
    expect((await gw.request('GET', '/api/audit?limit=50')).json().events).toEqual(
      expect.arrayContaining([expect.objectContaining({ action: 'toolset.create', actorId: 'config' })]),
    );

    const before = await writes(gw.gateway.store);
    const again = await apply(gw, file);
    expect(again.toolsets).toMatchObject({ created: [], updated: [], unchanged: ['maths', 'talk'] });
    expect(await writes(gw.gateway.store)).toEqual(before);

    file.toolsets = [
      {
        name: 'maths',
        tools: [
          { server: 'calc', tool: 'add' },
          { server: 'calc', tool: 'echo' },
        ],
      },
    ];
    const edited = await apply(gw, file, { prune: true });
    expect(edited.toolsets).toMatchObject({ updated: ['maths'], pruned: ['talk'] });
    expect((await gw.request('GET', '/api/toolsets')).json()).toMatchObject({
      total: 1,
      toolsets: [{ name: 'maths', description: null, tools: [{ tool: 'add' }, { tool: 'echo' }] }],
    });
    // A file without `toolsets:` leaves them alone, even with prune.
    const without = await apply(gw, { servers: file.servers }, { prune: true });
    expect(without.toolsets).toBeUndefined();
    expect((await gw.request('GET', '/api/toolsets')).json().total).toBe(1);
  });

  it('names the path of a bad toolset entry', () => {
    let error: GatehouseError | undefined;
    try {
      parse({
        toolsets: [
          { name: 'ok', tools: [] },
          { name: 'ok', tools: [{ server: 'Bad Id', tool: 'x' }] },
        ],
      });
    } catch (thrown) {
      error = thrown as GatehouseError;
    }
    expect(error?.code).toBe('validation_error');
    expect(error?.message).toContain('toolsets[1].tools[0].server');
    expect(error?.message).toContain('toolsets[1].name: duplicate of toolsets[0]');
  });

  it('stores an override beside the pin and drops it with its server', async () => {
    await apply(gw, file);
    expect((await gw.request('POST', '/api/mcp/servers/calc/test')).json().ok).toBe(true);
    const put = await gw.request('PUT', '/api/mcp/servers/calc/overrides/add', {
      body: { displayName: 'sum', fixedArguments: { b: 1 } },
    });
    expect(put.statusCode).toBe(200);
    const row = await gw.gateway.store.db
      .selectFrom('tool_pins')
      .selectAll()
      .where('kind', '=', 'override')
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ server_id: 'calc', tool_name: 'add', state: 'pinned' });
    const pin = (await gw.request('GET', '/api/mcp/servers/calc/pins'))
      .json()
      .pins.find((p: { tool: string }) => p.tool === 'add');
    expect(JSON.parse(row.definition)).toEqual({
      displayName: 'sum',
      fixedArguments: { b: 1 },
      basePinHash: pin.pinHash,
    });
    expect((await gw.request('DELETE', '/api/mcp/servers/calc')).statusCode).toBe(200);
    const left = await gw.gateway.store.db.selectFrom('tool_pins').selectAll().where('kind', '=', 'override').execute();
    expect(left).toEqual([]);
  });
});
