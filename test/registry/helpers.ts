/** Small helpers for the registry tests: loopback HTTP servers that clean up after themselves, and catching errors. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { GatehouseError } from '../../src/errors.js';

/** The egress guard's test seam treats this loopback address as public; 127.0.0.1 stays private. */
export const PUBLIC_HOST = '127.0.0.2';
export const PRIVATE_HOST = '127.0.0.1';

export interface TestServer {
  origin: string;
  requests: IncomingMessage[];
  close(): Promise<void>;
}

export async function startServer(
  host: string,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestServer> {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    handler(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://${host}:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Serves one JSON (or raw string) body at every path. */
export function serveBody(body: unknown, status = 200): (req: IncomingMessage, res: ServerResponse) => void {
  return (_req, res) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(text);
  };
}

/** Awaits a promise that must reject with a GatehouseError and returns it. */
export async function rejection(promise: Promise<unknown>): Promise<GatehouseError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, 'expected a GatehouseError rejection').toBeInstanceOf(GatehouseError);
  return caught as GatehouseError;
}

/** Calls a function that must throw a GatehouseError and returns it. */
export function thrown(fn: () => unknown): GatehouseError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught, 'expected a GatehouseError').toBeInstanceOf(GatehouseError);
  return caught as GatehouseError;
}
