/**
 * `gatehouse conduit` in its own process for the benchmark: the product's `createConduit` with its
 * configuration read from the environment (`MCP_SESSION_MODE`, `MCP_ALLOW_PRIVATE_NETWORKS`, …) by
 * `loadConfig`, listening on 127.0.0.1:0. See `launcher.ts` for the stdout line and the IPC questions.
 *
 * The product is loaded from the build `BENCH_PRODUCT_DIR` names, else from `src/` (see `product.ts`).
 *
 *   node --expose-gc --import tsx bench/conduit-process.ts
 */
import { launch } from './launcher.js';
import { productModule } from './product.js';

const { createConduit } = await productModule('conduit.js', () => import('../src/conduit.js'));
const { loadConfig } = await productModule('config.js', () => import('../src/config.js'));

await launch('conduit', async () => {
  const config = loadConfig({ env: { ...process.env, HOST: '127.0.0.1', PORT: '0' } });
  return (await createConduit(config)).app;
});
