/**
 * Stumble 3 of day one: a first `npx` start downloads the package, and a handshake deadline that
 * killed it mid-way broke the server for good. A stdio server that never connected starts (and is
 * tested) under the install budget, in state `installing`, with its progress on the events; once it
 * has connected, later starts are ordinary starts under the handshake deadline.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { cleanUp, newMarker, waitFor } from '../fixtures/stdio/index.js';
import { describeEachStore } from '../helpers/stores.js';
import { type Harness, startHarness } from './helpers.js';

const SLOW_INSTALL = fileURLToPath(new URL('../fixtures/stdio/slow-install-server.mjs', import.meta.url));
/** Longer than the handshake deadline below (which, before the budget, killed such a start), far shorter than the budget. */
const INSTALL_MS = 4000;

describeEachStore('the install budget of a first stdio start', (target) => {
  let h: Harness | undefined;
  const markers: string[] = [];
  afterEach(async () => {
    await h?.close();
    h = undefined;
    expect(await cleanUp([], markers.splice(0))).toEqual({});
  });

  it('a first start slower than the handshake deadline installs and runs; later starts are not installs', {
    timeout: 120_000,
  }, async () => {
    h = await startHarness(target, {
      GATEHOUSE_LIST_TIMEOUT_MS: '1500',
      GATEHOUSE_STDIO_INSTALL_TIMEOUT_MS: '60000',
      // What is measured is the deadline, not the confinement (bubblewrap may be missing here).
      GATEHOUSE_STDIO_SANDBOX: 'off',
    });
    const gw = h.gw;
    const install = async (id: string) => {
      const marker = newMarker();
      markers.push(marker);
      const args = [SLOW_INSTALL, `--install-ms=${INSTALL_MS}`, `--gatehouse-test-marker=${marker}`];
      const response = await gw.request('POST', '/api/mcp/install', {
        body: {
          manifest: {
            id,
            name: id,
            transport: 'stdio',
            command: process.execPath,
            args,
            toolPolicy: { defaultTier: 'allow' },
          },
        },
      });
      expect(response.statusCode, response.body).toBe(201);
    };

    // The supervised start: `installing` while the "download" runs, then running.
    await install('slow');
    const starting = gw.request('POST', '/api/mcp/servers/slow/start');
    expect(await waitFor(() => gw.gateway.supervisor.stateOf('slow') === 'installing', 30_000)).toBe(true);
    const started = await starting;
    expect(started.statusCode, started.body).toBe(200);
    expect(started.json().process.state).toBe('running');
    const events = async () =>
      (await gw.request('GET', '/api/mcp/servers/slow/logs?limit=500')).json().events as Array<{
        kind: string;
        message: string;
      }>;
    const installNotes = async () =>
      (await events()).filter((e) => e.kind === 'process' && e.message.startsWith('First start: installing')).length;
    expect(await installNotes()).toBe(1);
    expect((await events()).some((e) => e.kind === 'stderr' && e.message.includes('npm http fetch'))).toBe(true);
    const agent = await h.agent('slow');
    expect(await agent.callTool({ name: 'echo', arguments: { text: 'installed' } })).toMatchObject({
      content: [{ type: 'text', text: 'installed' }],
    });

    // It has connected once (its era is remembered): a later start is an ordinary one, not an install.
    expect((await gw.request('POST', '/api/mcp/servers/slow/stop')).statusCode).toBe(200);
    const states: string[] = [];
    const watching = waitFor(() => {
      states.push(gw.gateway.supervisor.stateOf('slow'));
      return false;
    }, 1500);
    await gw.request('POST', '/api/mcp/servers/slow/start');
    await watching;
    expect(states).not.toContain('installing');
    expect(await installNotes()).toBe(1);
    expect((await gw.request('POST', '/api/mcp/servers/slow/stop')).statusCode).toBe(200);

    // A test of a record that never connected (its own temporary child) gets the budget too.
    await install('tested');
    const tested = await gw.request('POST', '/api/mcp/servers/tested/test');
    expect(tested.statusCode, tested.body).toBe(200);
    expect(JSON.stringify(tested.json())).toContain('echo');
  });
});
