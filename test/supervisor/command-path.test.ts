/**
 * `stdio.allowedCommands` holds against a record's own `PATH`: the program that runs is the one the check
 * approved. A record whose `PATH` makes `node` another program is refused at start and at test (sandboxed or
 * not), and that program never runs; a `PATH` that finds the very same `node` starts as before, and one that finds
 * another file the list names is tested and started alike.
 */
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findBwrap, resolveOnPath } from '../../src/upstream/stdio/index.js';
import { cleanUp, FIXTURE_SANDBOX, newMarker } from '../fixtures/stdio/index.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Harness, PLAIN_SERVER, startHarness } from './helpers.js';

const SLOW = { timeout: 120_000 };
const NODE = resolveOnPath('node');
const BWRAP = findBwrap() !== undefined;

describe.skipIf(NODE === undefined)("stdio.allowedCommands and the record's PATH", () => {
  let h: Harness;
  let evil: string;

  beforeAll(() => {
    // A `node` that announces itself, then runs the real one (so, unchecked, the server even works).
    evil = mkdtempSync(join(tmpdir(), 'gh-evil-path-'));
    chmodSync(evil, 0o755); // a sandboxed child may run as a uid of its own
    const ran = join(evil, 'ran');
    writeFileSync(
      join(evil, 'node'),
      `#!/bin/sh\necho evil-node-ran >&2\n( : > ${ran} ) 2>/dev/null\nexec ${NODE} "$@"\n`,
    );
    chmodSync(join(evil, 'node'), 0o755);
  });
  afterAll(() => rmSync(evil, { recursive: true, force: true }));
  beforeEach(async () => {
    h = await startHarness(sqliteTarget);
    const allowed = await h.gw.request('PATCH', '/api/settings', { body: { 'stdio.allowedCommands': ['node'] } });
    expect(allowed.statusCode, allowed.body).toBe(200);
  });
  afterEach(async () => {
    const markers = [...h.markers];
    await h.close();
    expect(await cleanUp([], markers)).toEqual({});
  });

  const install = async (id: string, path: string, mode: 'on' | 'off') => {
    const marker = newMarker();
    h.markers.push(marker);
    const installed = await h.gw.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id,
          name: id,
          transport: 'stdio',
          command: 'node',
          args: [PLAIN_SERVER, `--gatehouse-test-marker=${marker}`],
          env: { PATH: path },
          toolPolicy: { defaultTier: 'allow' },
          sandbox: { ...FIXTURE_SANDBOX, mode },
        },
      },
    });
    expect(installed.statusCode, installed.body).toBe(201);
  };

  const logs = async (id: string) => JSON.stringify((await h.gw.request('GET', `/api/mcp/servers/${id}/logs`)).json());

  for (const mode of ['off', 'on'] as const) {
    it.skipIf(mode === 'on' && !BWRAP)(
      `refuses a PATH that makes the name another program (sandbox ${mode})`,
      SLOW,
      async () => {
        await install(`swapped-${mode}`, evil, mode);
        const tested = await h.gw.request('POST', `/api/mcp/servers/swapped-${mode}/test`);
        expect(tested.json().ok, tested.body).not.toBe(true);
        expect(tested.body).toContain('stdio.command_not_allowed');
        const started = await h.gw.request('POST', `/api/mcp/servers/swapped-${mode}/start`);
        expect(started.statusCode, started.body).toBe(403);
        expect(started.json().error.code).toBe('stdio.command_not_allowed');
        expect(started.json().error.message).toContain(join(evil, 'node'));
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(await logs(`swapped-${mode}`)).not.toContain('evil-node-ran');
        expect(existsSync(join(evil, 'ran'))).toBe(false);
      },
    );
  }

  it('tests and starts alike a server whose PATH finds another program the list names', SLOW, async () => {
    // Allowed by name, and the record's PATH picks a second allowed file: a start runs that file; a test did not
    // (it spawned the bare name, refused because the gateway's PATH finds another file).
    const own = mkdtempSync(join(tmpdir(), 'gh-own-path-'));
    chmodSync(own, 0o755);
    writeFileSync(join(own, 'node'), `#!/bin/sh\nexec ${NODE} "$@"\n`);
    chmodSync(join(own, 'node'), 0o755);
    try {
      const allowed = await h.gw.request('PATCH', '/api/settings', {
        body: { 'stdio.allowedCommands': ['node', join(own, 'node')] },
      });
      expect(allowed.statusCode, allowed.body).toBe(200);
      await install('own', own, 'off');
      const tested = await h.gw.request('POST', '/api/mcp/servers/own/test');
      expect(tested.json().ok, tested.body).toBe(true);
      const started = await h.gw.request('POST', '/api/mcp/servers/own/start');
      expect(started.statusCode, started.body).toBe(200);
      await h.gw.request('POST', '/api/mcp/servers/own/stop');
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });

  it('starts a server whose PATH finds the very same program', SLOW, async () => {
    await install('same', dirname(NODE as string), 'off');
    const started = await h.gw.request('POST', '/api/mcp/servers/same/start');
    expect(started.statusCode, started.body).toBe(200);
    await h.gw.request('POST', '/api/mcp/servers/same/stop');
  });
});
