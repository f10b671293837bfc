/**
 * A record update reads the row, changes it and writes the whole row back. On PostgreSQL two replicas (or a
 * background refresh and an operator) can update one record at once: the second must read what the first
 * committed, never write its stale read over it.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

describe.skipIf(!POSTGRES_AVAILABLE)('server record updates [postgres]', () => {
  let gw: TestGateway | undefined;
  let other: pg.Client | undefined;
  afterEach(async () => {
    await other?.end().catch(() => {});
    await gw?.close();
    other = gw = undefined;
  });

  it('an update waiting on a concurrent one keeps what that one committed (no lost update)', async () => {
    gw = await startTestGateway(postgresTarget);
    const installed = await gw.request('POST', '/api/mcp/install', {
      body: { manifest: { id: 'web', name: 'web', transport: 'streamable-http', url: 'http://127.0.0.2:9/mcp' } },
    });
    expect(installed.statusCode, installed.body).toBe(201);

    // Another process disables the server in a transaction that has not committed yet…
    other = new pg.Client({ connectionString: gw.databaseUrl });
    await other.connect();
    await other.query('begin');
    await other.query(`update servers set enabled = 0 where id = 'web'`);
    const { rows } = await other.query<{ xid: string }>('select pg_current_xact_id()::text as xid');

    // …while this one records a handshake's outcome on the same row (as a background refresh does).
    const refreshed = gw.gateway.registry.records.update('web', (row) => {
      row.status = 'failed';
      row.last_error = 'unreachable';
    });
    // It waits on the other transaction's row lock (reading first, or only when it writes: either way, blocked).
    const admin = new pg.Client({ connectionString: gw.databaseUrl });
    await admin.connect();
    try {
      await eventually(async () => {
        const waiting = await admin.query(
          `select 1 from pg_locks where not granted and locktype = 'transactionid' and transactionid::text = $1`,
          [rows[0]!.xid],
        );
        expect(waiting.rowCount).toBe(1);
      });
    } finally {
      await admin.end();
    }
    await other.query('commit');
    await refreshed;

    const row = await gw.gateway.registry.records.getRow('web');
    expect({ enabled: row.enabled, status: row.status, lastError: row.last_error }).toEqual({
      enabled: 0,
      status: 'failed',
      lastError: 'unreachable',
    });
  });
});
