/**
 * `gatehouse serve` in its own process for the benchmark: the product's `createGateway` with its
 * configuration read from the environment (`GATEHOUSE_DATA_DIR`, `GATEHOUSE_ADMIN_TOKEN`,
 * `GATEHOUSE_ALLOW_PRIVATE_NETWORKS`, …) by `loadConfig`, listening on 127.0.0.1:0. The orchestrator
 * creates a temporary data folder and sets everything up through the REST API, as an operator would.
 * See `launcher.ts` for the stdout line and the IPC questions.
 *
 * With `BENCH_SHARED_SESSIONS=off` the hub keeps 2025-era sessions in the process even on PostgreSQL
 * (the `fleet` section measures the shared session store's cost against it).
 *
 * With `BENCH_REMOVE_DATA_DIR=1` the data folder is removed when the process stops, so it goes even
 * when the orchestrator was killed and could not remove it itself.
 *
 * The product is loaded from the build `BENCH_PRODUCT_DIR` names (this repository's `dist/`, or the
 * baseline's), else from `src/` (see `product.ts`).
 *
 *   node --expose-gc --import tsx bench/gateway-process.ts
 */
import { rm } from 'node:fs/promises';
import { launch } from './launcher.js';
import { productModule } from './product.js';

const { loadConfig } = await productModule('config.js', () => import('../src/config.js'));
const { createGateway } = await productModule('gateway.js', () => import('../src/gateway.js'));

const config = loadConfig({ env: { ...process.env, GATEHOUSE_HOST: '127.0.0.1', GATEHOUSE_PORT: '0' } });

await launch(
  'gateway',
  async () =>
    (await createGateway(config, process.env.BENCH_SHARED_SESSIONS === 'off' ? { sharedSessions: false } : {})).app,
  async () => {
    if (process.env.BENCH_REMOVE_DATA_DIR === '1') await rm(config.dataDir, { recursive: true, force: true });
  },
);
