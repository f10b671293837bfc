/**
 * The supervisor soak: 200 starts and stops of real stdio MCP servers through the REST routes,
 * several servers at once, in every way a supervised child ends — stopped right after start, stopped
 * after a call through the hub path, restarted, crashed mid-call (then stopped while in backoff),
 * and stopped while a lazy start is still connecting. Then `/proc` is scanned for the soak's marker
 * (orphans re-parent away from us, so only the command line finds them): nothing may be left, the
 * supervisor may count nothing as running, and the pid file is gone.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PID_DIR } from '../../src/supervisor/pidfile.js';
import { cleanUp, pidsWithMarker, waitFor } from '../fixtures/stdio/index.js';
import { sqliteTarget } from '../helpers/stores.js';
import { type Harness, startHarness } from './helpers.js';

const SERVERS = 4;
const CYCLES_PER_SERVER = 50; // 200 starts and stops in all

describe('stdio supervisor soak', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness(sqliteTarget, { GATEHOUSE_STDIO_MAX_RESTARTS: '100' });
  });
  afterEach(async () => {
    const markers = [...h.markers];
    await h.close();
    expect(await cleanUp([], markers)).toEqual({});
  });

  it(`${SERVERS * CYCLES_PER_SERVER} starts and stops leave no process behind`, { timeout: 600_000 }, async () => {
    const ids = Array.from({ length: SERVERS }, (_, i) => `soak-${i}`);
    for (const id of ids) await h.installPlain(id);
    const supervisor = h.gw.gateway.supervisor;
    let starts = 0;

    const cycle = async (id: string, i: number) => {
      switch (i % 5) {
        case 0: {
          expect((await h.gw.request('POST', `/api/mcp/servers/${id}/start`)).statusCode).toBe(200);
          starts += 1;
          break;
        }
        case 1: {
          expect((await h.gw.request('POST', `/api/mcp/servers/${id}/start`)).statusCode).toBe(200);
          starts += 1;
          const result = await supervisor.callTool(id, 'echo', { text: `${id}-${i}` });
          expect(result).toMatchObject({ content: [{ type: 'text', text: `${id}-${i}` }] });
          break;
        }
        case 2: {
          expect((await h.gw.request('POST', `/api/mcp/servers/${id}/start`)).statusCode).toBe(200);
          expect((await h.gw.request('POST', `/api/mcp/servers/${id}/restart`)).statusCode).toBe(200);
          starts += 2;
          break;
        }
        case 3: {
          expect((await h.gw.request('POST', `/api/mcp/servers/${id}/start`)).statusCode).toBe(200);
          starts += 1;
          await expect(supervisor.callTool(id, 'crash', { code: 1 })).rejects.toMatchObject({
            code: 'upstream_unreachable',
          });
          break;
        }
        default: {
          // Stopped while a start is still spawning and connecting.
          const starting = supervisor.start(id).catch(() => undefined);
          starts += 1;
          await new Promise((resolve) => setImmediate(resolve));
          await h.gw.request('POST', `/api/mcp/servers/${id}/stop`);
          await starting;
        }
      }
      const stopped = await h.gw.request('POST', `/api/mcp/servers/${id}/stop`);
      expect(stopped.json().process.state).toBe('stopped');
    };

    await Promise.all(
      ids.map(async (id) => {
        for (let i = 0; i < CYCLES_PER_SERVER; i++) await cycle(id, i);
      }),
    );
    expect(starts).toBeGreaterThanOrEqual(SERVERS * CYCLES_PER_SERVER);

    for (const id of ids) expect(supervisor.stateOf(id)).toBe('stopped');
    for (const marker of h.markers) {
      expect(await waitFor(() => pidsWithMarker(marker).length === 0, 5000)).toBe(true);
    }
    const pidFiles = join(h.gw.dataDir, PID_DIR);
    expect(existsSync(pidFiles) ? readdirSync(pidFiles) : []).toEqual([]);
  });
});
