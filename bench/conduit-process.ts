/**
 * `gatehouse conduit` in its own process for the benchmark: the product's `createConduit` with its
 * configuration read from the environment (`MCP_SESSION_MODE`, `MCP_ALLOW_PRIVATE_NETWORKS`, …) by
 * `loadConfig`, listening on 127.0.0.1:0. See `launcher.ts` for the stdout line and the IPC questions.
 *
 *   node --expose-gc --import tsx bench/conduit-process.ts
 */

import { createConduit } from '../src/conduit.js';
import { loadConfig } from '../src/config.js';
import { launch } from './launcher.js';

await launch('conduit', async () => {
  const config = loadConfig({ env: { ...process.env, HOST: '127.0.0.1', PORT: '0' } });
  return (await createConduit(config)).app;
});
