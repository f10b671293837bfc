import { afterEach, expect, it } from 'vitest';
import { cleanUp, FIXTURE_SANDBOX, fixtureSpec, newMarker, waitFor } from '../fixtures/stdio/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, type StoreTarget } from '../helpers/stores.js';
import { FAST_SUPERVISOR_ENV } from './helpers.js';

describeEachStore('a stdio server stopped by an operator', (target) => {
  const markers: string[] = [];
  let gateways: TestGateway[] = [];
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    for (const gw of gateways) await gw.gateway.app.close();
    gateways = [];
    await cleanup?.();
    expect(await cleanUp([], markers.splice(0))).toEqual({});
  });

  it('stays stopped when the gateway starts again, until an operator starts it', { timeout: 120_000 }, async () => {
    const place = await target.fresh();
    cleanup = place.cleanup;
    // The same store for both gateway processes (the second is "the gateway, restarted").
    const same: StoreTarget = { kind: target.kind, fresh: async () => ({ ...place, cleanup: async () => {} }) };
    const boot = async () => {
      const gw = await startTestGateway(same, FAST_SUPERVISOR_ENV);
      gateways.push(gw);
      return gw;
    };

    const first = await boot();
    for (const id of ['held', 'free']) {
      const marker = newMarker();
      markers.push(marker);
      const { command, args } = fixtureSpec(marker);
      const installed = await first.request('POST', '/api/mcp/install', {
        // The fixture runs from the working tree, which a sandbox hides unless it is mounted read-only.
        body: { manifest: { id, name: id, transport: 'stdio', command, args, sandbox: FIXTURE_SANDBOX } },
      });
      expect(installed.statusCode, installed.body).toBe(201);
      expect((await first.request('POST', `/api/mcp/servers/${id}/start`)).statusCode).toBe(200);
    }
    expect((await first.request('POST', '/api/mcp/servers/held/stop')).json().process.state).toBe('stopped');
    await first.gateway.app.close();
    gateways = [];

    const second = await boot();
    const stateOf = (id: string) => second.gateway.supervisor.stateOf(id);
    expect(await waitFor(() => stateOf('free') === 'running', 60_000)).toBe(true);
    expect(stateOf('held')).toBe('stopped');
    expect((await second.request('GET', '/api/mcp/servers/held')).json()).toMatchObject({ stoppedByOperator: true });

    // Started by hand: forgotten, so the next restart starts it again.
    expect((await second.request('POST', '/api/mcp/servers/held/start')).statusCode).toBe(200);
    expect((await second.request('GET', '/api/mcp/servers/held')).json().stoppedByOperator).toBeUndefined();
  });
});
