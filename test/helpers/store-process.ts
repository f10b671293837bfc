/**
 * Run as its own process by tests that need real concurrency between processes
 * (SQLite locks are per process): opens the store, bootstraps the admin token,
 * and prints one JSON line with what happened.
 *   tsx test/helpers/store-process.ts <dataDir> [databaseUrl]
 */
import { openStore } from '../../src/store/db.js';
import { TokenStore } from '../../src/store/tokens.js';

const [dataDir, databaseUrl] = process.argv.slice(2);
const store = await openStore({ dataDir: dataDir as string, databaseUrl: databaseUrl || undefined });
const created = await new TokenStore(store).bootstrapAdmin();
await store.close();
process.stdout.write(`${JSON.stringify({ createdAdmin: created !== undefined })}\n`);
