/**
 * `gatehouse serve` as its own process, for tests that must kill it (`kill -9`) and start it again on
 * the same store: the product's `createGateway`, configured from the environment by `loadConfig`,
 * listening on 127.0.0.1:0. Prints one JSON line `{"url"}` once listening; stops on SIGTERM.
 *   node --import tsx test/helpers/gateway-process.ts
 */
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config.js';
import { createGateway } from '../../src/gateway.js';

const config = loadConfig({ env: { ...process.env, GATEHOUSE_HOST: '127.0.0.1', GATEHOUSE_PORT: '0' } });
const { app } = await createGateway(config);
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` })}\n`);
// The test's own safety net: never outlive it by long, whatever happens to the test.
setTimeout(() => process.exit(3), 120_000).unref();
process.on('SIGTERM', () => {
  void app.close().finally(() => process.exit(0));
});
