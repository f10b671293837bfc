/**
 * Run as its own process by the crash test: writes audit rows and server records as fast as it can,
 * printing each id only after its transaction committed, until it is killed.
 *   tsx test/helpers/write-burst-process.ts <dataDir> [databaseUrl]
 */
import { openStore } from '../../src/store/db.js';
import { nowIso } from '../../src/store/json.js';

const [dataDir, databaseUrl] = process.argv.slice(2);
const store = await openStore({ dataDir: dataDir as string, databaseUrl: databaseUrl || undefined });
process.stdout.write('ready\n');
for (let i = 0; ; i++) {
  const key = `burst-${i}`;
  await store.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('settings')
      .values({ key, value: String(i), updated_at: nowIso(), updated_by: null })
      .execute();
    await trx
      .insertInto('server_events')
      .values({ server_id: 'burst', kind: 'test', message: key, data: null, at: nowIso() })
      .execute();
  });
  process.stdout.write(`${key}\n`);
}
