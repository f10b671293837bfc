/**
 * Nothing answered is lost on a crash: a real gateway process takes a burst of hub calls (and runs
 * approved calls) and is killed with SIGKILL in the middle; after a restart every call whose answer
 * reached the agent has its audit row, and every approval's state has the audit row of its change.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, expect, it } from 'vitest';
import { argsDigest } from '../../src/audit/calls.js';
import { openStore } from '../../src/store/db.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, TEST_ADMIN_TOKEN, TEST_SECRET_KEY } from '../helpers/gateway.js';
import { NODE_TS } from '../helpers/processes.js';
import { describeEachStore } from '../helpers/stores.js';

const GATEWAY = new URL('../helpers/gateway-process.ts', import.meta.url).pathname;
const CALLERS = 8;
const APPROVALS = 12;
/** Kill once this many calls were answered (and every approval decided). */
const ANSWERED_BEFORE_KILL = 120;

interface Place {
  dataDir: string;
  databaseUrl: string | undefined;
}

/** Starts the gateway process on `place`; resolves with it and its URL once it listens. */
function startGateway(place: Place): Promise<{ child: ChildProcessWithoutNullStreams; url: string }> {
  const [node, ...flags] = NODE_TS;
  const child = spawn(node, [...flags, GATEWAY], {
    env: {
      ...process.env,
      NODE_ENV: 'test',
      GATEHOUSE_DATA_DIR: place.dataDir,
      ...(place.databaseUrl ? { GATEHOUSE_DATABASE_URL: place.databaseUrl } : {}),
      GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
      GATEHOUSE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      GATEHOUSE_ALLOW_HTTP: 'true',
      GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST,
      GATEHOUSE_LOG_LEVEL: 'warn',
      GATEHOUSE_LIST_WATCH: 'false',
    },
  });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    let buffer = '';
    child.on('exit', (code, signal) =>
      reject(new Error(`gateway exited (${code ?? signal}) before listening\n${stderr}`)),
    );
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const line = buffer.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve({ child, url: (JSON.parse(line) as { url: string }).url });
    });
  });
}

function exited(child: ChildProcessWithoutNullStreams): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

const children: ChildProcessWithoutNullStreams[] = [];
const clients: Client[] = [];
let upstream: McpFixture | undefined;

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited(child);
  }
  await upstream?.close();
  upstream = undefined;
});

describeEachStore('audit after a crash', (target) => {
  it('keeps the audit row of every answered call and of every approval change through kill -9', async () => {
    const place = await target.fresh();
    try {
      upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
      const first = await startGateway(place);
      const api = async (method: string, path: string, body?: unknown, token = TEST_ADMIN_TOKEN) => {
        const response = await fetch(`${first.url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      expect((await api('POST', '/api/mcp/install', { url: upstream.url, id: 'files' })).status).toBeLessThan(300);
      const policy = await api('PATCH', '/api/mcp/servers/files/tools', {
        mode: 'all',
        allow: ['echo'],
        gated: ['add'],
      });
      expect(policy.status).toBe(200);
      expect((await api('POST', '/api/mcp/servers/files/test')).body.ok).toBe(true);
      const agent = (await api('POST', '/api/tokens', { role: 'agent', name: 'burst', rateLimit: 1_000_000 })).body;
      const connect = async () => {
        const client = await connectAgent(`${first.url}/mcp`, agent.token as string);
        clients.push(client);
        return client;
      };

      // Gated calls waiting for a decision; they are approved (and run) during the burst.
      const asker = await connect();
      const approvalIds: string[] = [];
      for (let i = 0; i < APPROVALS; i++) {
        const pending = await asker.callTool({ name: 'files__add', arguments: { a: i, b: 1 } });
        approvalIds.push((pending.structuredContent as { approval_id: string }).approval_id);
      }

      const answered: string[] = [];
      let decided = 0;
      let stopped = false;
      const kill = () => {
        if (!stopped && answered.length >= ANSWERED_BEFORE_KILL && decided === APPROVALS) {
          stopped = true;
          first.child.kill('SIGKILL');
        }
      };
      let next = 0;
      const caller = async (client: Client) => {
        while (!stopped) {
          const text = `call-${next++}`;
          try {
            const result = await client.callTool({ name: 'files__echo', arguments: { text } });
            if ((result.content as { text?: string }[])[0]?.text === text) answered.push(text);
          } catch {
            return; // the gateway is gone
          }
          kill();
        }
      };
      const callers = await Promise.all(Array.from({ length: CALLERS }, () => connect()));
      const burst = callers.map((client) => caller(client));
      for (const id of approvalIds) {
        expect((await api('POST', `/api/approvals/${id}/approve`, {})).status).toBe(200);
        decided++;
      }
      kill();
      await Promise.all(burst);
      await exited(first.child);
      expect(first.child.signalCode).toBe('SIGKILL');
      expect(answered.length).toBeGreaterThanOrEqual(ANSWERED_BEFORE_KILL);

      // A restart on the same store comes up (and resumes what the dead process left), then stops cleanly.
      const second = await startGateway(place);
      second.child.kill('SIGTERM');
      await exited(second.child);

      const store = await openStore(place);
      try {
        const callRows = await store.db
          .selectFrom('audit_events')
          .select(['args_digest', 'approval_id', 'tool'])
          .where('kind', '=', 'call')
          .execute();
        const digests = new Set(callRows.filter((r) => r.tool === 'echo').map((r) => r.args_digest));
        const missing = answered.filter((text) => !digests.has(argsDigest({ text })));
        expect(missing).toEqual([]);

        const admin = await store.db
          .selectFrom('audit_events')
          .select(['action', 'data'])
          .where('kind', '=', 'admin')
          .where('action', 'like', 'approval.%')
          .execute();
        const actionsOf = (id: string) =>
          admin
            .filter((r) => (JSON.parse(r.data ?? '{}') as { approvalId?: string }).approvalId === id)
            .map((r) => r.action);
        const approvals = await store.db.selectFrom('approvals').select(['id', 'status']).execute();
        expect(approvals).toHaveLength(APPROVALS);
        for (const { id, status } of approvals) {
          const actions = actionsOf(id);
          expect(actions).toContain('approval.create');
          expect(actions).toContain('approval.approve');
          if (status === 'executed' || status === 'failed') expect(actions).toContain('approval.execute');
          // An approved call that ran has its call row (written before its outcome was stored).
          if (status === 'executed') expect(callRows.some((r) => r.approval_id === id)).toBe(true);
        }
      } finally {
        await store.close();
      }
    } finally {
      await place.cleanup();
    }
  }, 120_000);
});
