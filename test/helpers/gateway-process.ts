/**
 * `gatehouse serve` as its own process, for tests that must kill it (`kill -9`) and start it again on
 * the same store: the product's `createGateway`, configured from the environment by `loadConfig`,
 * listening on 127.0.0.1 — on `TEST_GATEWAY_PORT` when given (a replica restarted behind a balancer
 * comes back at its address), else on port 0; it exits by itself after `TEST_GATEWAY_LIFETIME_S` (180). Prints one JSON line `{"url"}` once listening. SIGTERM
 * drains as `serve` does (`/readyz` 503 for `GATEHOUSE_DRAIN_S`, default 0 here), then stops.
 *   node --import tsx test/helpers/gateway-process.ts
 */
import type { AddressInfo } from 'node:net';
import { closeOnSignals } from '../../src/cli/signals.js';
import { loadConfig } from '../../src/config.js';
import { createGateway } from '../../src/gateway.js';

const port = process.env.TEST_GATEWAY_PORT ?? '0';
const lifetimeS = Number(process.env.TEST_GATEWAY_LIFETIME_S ?? '180');
const { TEST_GATEWAY_PORT: _port, TEST_GATEWAY_LIFETIME_S: _lifetime, ...env } = process.env;
const config = loadConfig({
  env: { GATEHOUSE_DRAIN_S: '0', ...env, GATEHOUSE_HOST: '127.0.0.1', GATEHOUSE_PORT: port },
});
const gateway = await createGateway(config);
const { app } = gateway;
await app.listen({ host: '127.0.0.1', port: Number(port) });
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` })}\n`);
// The test's own safety net: never outlive it by long, whatever happens to the test.
setTimeout(() => process.exit(3), lifetimeS * 1000).unref();
closeOnSignals(app, { drain: () => gateway.drain(), drainMs: config.drainS * 1000 });
