/**
 * The bootstrap commands (`token`, `connect`, `servers export`) open the store directly. Run in another folder,
 * they would silently make a new, empty store there; so they say on stderr which store they opened, and warn when
 * opening it created it.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config.js';
import { openStore, type Store } from '../store/db.js';

/** Opens the store the config names, telling stderr which one it is (and whether it was just created). */
export async function openCliStore(config: Pick<Config, 'dataDir' | 'databaseUrl'>): Promise<Store> {
  const file = config.databaseUrl ? undefined : resolve(join(config.dataDir, 'gatehouse.db'));
  const existed = file === undefined || existsSync(file);
  const store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  const where = file ?? store.location;
  if (existed) {
    process.stderr.write(`gatehouse: using the store at ${where}\n`);
  } else {
    process.stderr.write(
      `gatehouse: warning: there was no store at ${where}; created a new, empty one. ` +
        'If your gateway keeps its data elsewhere, run this where it runs or pass --data-dir (GATEHOUSE_DATA_DIR).\n',
    );
  }
  return store;
}
