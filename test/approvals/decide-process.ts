/**
 * Run as its own process by the race test: opens the store, waits for the start time, approves one
 * approval with several operators at once, lets any execution it won finish, and prints one JSON line
 * with the outcome of each attempt. Its executor
 * appends a line to `callsFile` for every call it runs, so the test can count runs across processes.
 *   tsx test/approvals/decide-process.ts <dataDir> <databaseUrl|-> <approvalId> <operatorIndex> <startAtMs> <callsFile>
 */
import { appendFileSync } from 'node:fs';
import { ApprovalQueue } from '../../src/approvals/queue.js';
import { AuditLog } from '../../src/audit/log.js';
import { EventHub } from '../../src/audit/stream.js';
import { isGatehouseError } from '../../src/errors.js';
import { openStore } from '../../src/store/db.js';

const [dataDir, databaseUrl, approvalId, index, startAt, callsFile] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];
const store = await openStore({ dataDir, databaseUrl: databaseUrl === '-' ? undefined : databaseUrl });
const events = await EventHub.open(store);
const queue = new ApprovalQueue({ store, audit: new AuditLog(store), events });
queue.registerExecutor('hub', {
  recheck: async () => ({ ok: true }),
  execute: async (approval) => {
    appendFileSync(callsFile, `${process.pid} ${approval.id}\n`);
    return { ranBy: process.pid };
  },
});
const attempts = 5;
const wait = Number(startAt) - Date.now();
if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
const outcomes = await Promise.all(
  Array.from({ length: attempts }, async (_, i) => {
    const operator = {
      id: `tok_proc_${index}_${i}`,
      name: `operator-${index}-${i}`,
      role: 'operator' as const,
      groups: [],
    };
    try {
      return { status: (await queue.decide(approvalId, 'approve', operator)).status };
    } catch (error) {
      return { code: isGatehouseError(error) ? error.code : String(error) };
    }
  }),
);
await queue.idle();
await queue.close();
events.close();
await store.close();
process.stdout.write(`${JSON.stringify(outcomes)}\n`);
