/** Loopback servers for the egress tests: each counts the TCP connections it accepted. */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server } from 'node:net';
import { afterEach } from 'vitest';
import { createEgressGuard, type EgressGuard, type EgressOptions } from '../../src/egress/index.js';
import { noDns } from './helpers.js';

export interface TestServer {
  readonly host: string;
  readonly port: number;
  /** `http://host:port` */
  readonly origin: string;
  connections: number;
  requests: number;
  close(): Promise<void>;
}

async function listen(server: Server, host: string, port = 0): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

function closer(server: Server & { closeAllConnections?: () => void }): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections?.();
      server.close(() => resolve());
    });
}

export async function startHttpServer(
  host: string,
  handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end('ok'),
): Promise<TestServer> {
  const server = createHttpServer((req, res) => {
    state.requests++;
    handler(req, res);
  });
  const state = { connections: 0, requests: 0 };
  server.on('connection', () => state.connections++);
  const port = await listen(server, host);
  return Object.assign(state, { host, port, origin: `http://${host}:${port}`, close: closer(server) });
}

/** A bare TCP listener (also stands in for an https port): it only counts and drops connections. */
export async function startTcpServer(host: string, port = 0): Promise<TestServer> {
  const state = { connections: 0, requests: 0 };
  const server = createNetServer((socket) => {
    state.connections++;
    socket.destroy();
  });
  const bound = await listen(server, host, port);
  return Object.assign(state, { host, port: bound, origin: `http://${host}:${bound}`, close: closer(server) });
}

/** A port on `host` that nothing listens on (bound once, then released). */
export async function closedPort(host: string): Promise<number> {
  const server = createNetServer();
  const port = await listen(server, host);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Guards and servers for one test file, all closed after each test: guards treat `publicHost` as
 * public (the test seam), allow http and never ask DNS unless given a resolver.
 */
export function egressTestBed(publicHost: string) {
  const open: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  const kept = <T extends { close(): Promise<void> }>(thing: T): T => {
    open.push(thing);
    return thing;
  };
  return {
    guard: (options: EgressOptions = {}): EgressGuard =>
      kept(createEgressGuard({ testPublicAddresses: [publicHost], allowHttp: true, resolver: noDns, ...options })),
    server: async (...args: Parameters<typeof startHttpServer>): Promise<TestServer> =>
      kept(await startHttpServer(...args)),
    tcpServer: async (host: string, port?: number): Promise<TestServer> => kept(await startTcpServer(host, port)),
  };
}
