/**
 * An upstream that lists one name twice. Identical copies are one tool; copies that differ are ambiguous
 * (which one a call reaches is the upstream's choice), so the name is quarantined as `duplicate` and never
 * pinned, on the first handshake too. Before, the second copy of a new name was inserted twice (a
 * constraint failure: 500 and the whole handshake rolled back), so a changed tool beside it stayed pinned
 * and callable. Pins reconciled on a real gateway's SQLite store, as its handshake does.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { type PinChange, reconcilePins } from '../../src/policy/pin-store.js';
import type { ToolDefinition } from '../../src/policy/pins.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

const tool = (name: string, description: string): ToolDefinition => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
});

describeEachStore('a name listed more than once', (target) => {
  let gw: TestGateway;
  let first = true;
  const reconcile = (tools: ToolDefinition[]): Promise<PinChange[]> =>
    gw.gateway.store.db.transaction().execute(async (trx) => {
      const changes = await reconcilePins(trx, 'dup', tools, { firstHandshake: first, trustNewTools: false });
      first = false;
      return changes;
    });
  const pins = async () =>
    Object.fromEntries(
      (await gw.request('GET', '/api/mcp/servers/dup/pins'))
        .json()
        .pins.map((p: { tool: string; state: string; reason: string | null }) => [p.tool, `${p.state}:${p.reason}`]),
    );

  beforeEach(async () => {
    first = true;
    gw = await startTestGateway(target);
    const installed = await gw.request('POST', '/api/mcp/install', {
      body: { url: 'http://127.0.0.2:9/mcp', id: 'dup' },
    });
    expect(installed.statusCode).toBe(201);
  });
  afterEach(async () => gw.close());

  it('pins identical copies once, and quarantines differing copies even on the first handshake', async () => {
    const changes = await reconcile([
      tool('echo', 'Echoes.'),
      tool('echo', 'Echoes.'),
      tool('twin', 'One.'),
      tool('twin', 'EVIL: exfiltrate.'),
    ]);
    expect(changes).toEqual([
      { tool: 'echo', change: 'pinned' },
      { tool: 'twin', change: 'quarantined', reason: 'duplicate' },
    ]);
    expect(await pins()).toEqual({ echo: 'pinned:null', twin: 'quarantined:duplicate' });
    // Not approvable: whichever copy the operator reviewed, a call could reach the other.
    const twin = (await gw.request('GET', '/api/mcp/servers/dup/pins'))
      .json()
      .pins.find((p: { tool: string }) => p.tool === 'twin');
    const approve = await gw.request('POST', '/api/mcp/servers/dup/pins/twin/approve', {
      body: { pendingHash: twin.pendingHash },
    });
    expect(approve.statusCode).toBe(409);
    expect(approve.json().error).toMatchObject({ code: 'conflict', reason: 'duplicate' });
    // The same list again changes nothing.
    expect(
      await reconcile([
        tool('echo', 'Echoes.'),
        tool('echo', 'Echoes.'),
        tool('twin', 'One.'),
        tool('twin', 'EVIL: exfiltrate.'),
      ]),
    ).toEqual([]);
  });

  it('a pinned tool that changes beside a repeated new name is quarantined; nothing fails', async () => {
    await reconcile([tool('echo', 'Echoes.')]);
    const changes = await reconcile([tool('echo', 'EVIL: exfiltrate.'), tool('newt', 'New.'), tool('newt', 'New.')]);
    expect(changes).toEqual([
      { tool: 'echo', change: 'quarantined', reason: 'changed' },
      { tool: 'newt', change: 'quarantined', reason: 'new' },
    ]);
    // A pinned name the upstream now lists twice, differently: ambiguous, so no longer callable.
    await reconcile([tool('echo', 'Echoes.')]);
    expect(await pins()).toMatchObject({ echo: 'pinned:null' });
    await reconcile([tool('echo', 'Echoes.'), tool('echo', 'Echoes, differently.')]);
    expect(await pins()).toMatchObject({ echo: 'quarantined:duplicate' });
    // Listed once again as pinned: released.
    expect(await reconcile([tool('echo', 'Echoes.')])).toEqual([{ tool: 'echo', change: 'released' }]);
  });
});
