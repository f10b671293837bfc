/**
 * A real `gatehouse serve` app on a fresh store, for tests: upstream fixtures
 * listen on 127.0.0.2, which the egress guard's test seam treats as public.
 */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { onTestFailed } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createGateway, type Gateway, type GatewayDeps } from '../../src/gateway.js';
import { createLogger } from '../../src/logging.js';
import type { StoreTarget } from './stores.js';

export const PUBLIC_TEST_HOST = '127.0.0.2';
export const TEST_ADMIN_TOKEN = 'gh_test-admin-token-0123456789abcdef';
export const TEST_SECRET_KEY = 'a1'.repeat(32);

export interface TestGateway {
  gateway: Gateway;
  /** Every log line the gateway wrote. */
  logs: string[];
  request(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT',
    url: string,
    options?: { body?: unknown; token?: string | null; headers?: Record<string, string> },
  ): Promise<LightMyRequestResponse>;
  /** Listens on 127.0.0.1, any free port; answers the base URL (`http://127.0.0.1:PORT`). */
  listen(): Promise<string>;
  close(): Promise<void>;
  dataDir: string;
  databaseUrl: string | undefined;
}

export async function startTestGateway(
  target: StoreTarget,
  env: Record<string, string> = {},
  deps: Omit<GatewayDeps, 'logger'> = {},
  /** A place another test gateway uses too (replicas on one store): left for its owner to clean up. */
  shared?: Awaited<ReturnType<StoreTarget['fresh']>>,
): Promise<TestGateway> {
  const place = shared ?? (await target.fresh());
  const config = loadConfig({
    env: {
      NODE_ENV: 'test',
      GATEHOUSE_DATA_DIR: place.dataDir,
      ...(place.databaseUrl ? { GATEHOUSE_DATABASE_URL: place.databaseUrl } : {}),
      GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
      GATEHOUSE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      GATEHOUSE_ALLOW_HTTP: 'true',
      GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST,
      GATEHOUSE_LOG_LEVEL: 'debug',
      GATEHOUSE_LIST_TIMEOUT_MS: '5000',
      GATEHOUSE_CALL_TIMEOUT_MS: '5000',
      // Watches add background requests to every upstream a test counts; the tests of watching turn it on.
      GATEHOUSE_LIST_WATCH: 'false',
      ...env,
    },
  });
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(String(chunk));
      done();
    },
  });
  const gateway = await createGateway(config, { ...deps, logger: createLogger(config, sink) });
  reportLogsOnFailure(logs);
  return {
    gateway,
    logs,
    dataDir: place.dataDir,
    databaseUrl: place.databaseUrl,
    request(method, url, options = {}) {
      const token = options.token === undefined ? TEST_ADMIN_TOKEN : options.token;
      return gateway.app.inject({
        method,
        url,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...options.headers },
        ...(options.body !== undefined ? { payload: options.body as object } : {}),
      });
    },
    async listen() {
      await gateway.app.listen({ host: '127.0.0.1', port: 0 });
      return `http://127.0.0.1:${(gateway.app.server.address() as AddressInfo).port}`;
    },
    async close() {
      await gateway.app.close();
      if (!shared) await place.cleanup();
    },
  };
}

/** How many of the gateway's last log lines a failed test prints: a CI timeout says nothing else of what it did. */
const LOG_LINES_ON_FAILURE = 40;

function reportLogsOnFailure(logs: string[]): void {
  try {
    onTestFailed(() => {
      const last = logs.slice(-LOG_LINES_ON_FAILURE).map((line) => line.trimEnd().slice(0, 600));
      process.stderr.write(`[test gateway] its last ${last.length} of ${logs.length} log lines:\n${last.join('\n')}\n`);
    });
  } catch {
    // Started outside a test (a beforeAll): there is no one test to report to.
  }
}
