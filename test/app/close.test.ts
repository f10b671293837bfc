/**
 * Closing the gateway does not wait on connections that carry nothing: a socket a client opened ahead of
 * need and never used (undici does this) is dropped at once, where Node's `server.close()` would wait for
 * the client to drop it or for the headers timeout (10 s). A socket that has sent part of a request is
 * left to its request. Real sockets against a real gateway on loopback.
 */
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

let gw: TestGateway | undefined;
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await gw?.close();
  gw = undefined;
});

async function connect(base: string): Promise<net.Socket> {
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  sockets.push(socket);
  socket.on('error', () => {});
  await once(socket, 'connect');
  return socket;
}

it('drops a connection that never sent a byte, and leaves one with a request under way to it', async () => {
  gw = await startTestGateway(sqliteTarget);
  const base = await gw.listen();
  const serverSide: net.Socket[] = [];
  gw.gateway.app.server.on('connection', (socket: net.Socket) => serverSide.push(socket));
  const unused = await connect(base);
  const started = await connect(base);
  started.write(`GET /healthz HTTP/1.1\r\nHost: ${new URL(base).host}\r\n`);
  // The server has read the partial request before the close begins.
  await eventually(() => expect(serverSide.some((socket) => socket.bytesRead > 0)).toBe(true));
  const startedClosed = once(started, 'close').then(() => 'closed' as const);

  const closing = gw.close();
  gw = undefined;
  const unusedClosed = await Promise.race([
    once(unused, 'close').then(() => 'closed' as const),
    sleep(5_000, 'still open' as const),
  ]);
  expect(unusedClosed).toBe('closed');
  // The request under way is not cut by the close; ending it from the client lets the close finish.
  expect(await Promise.race([startedClosed, sleep(200, 'open' as const)])).toBe('open');
  started.destroy();
  await closing;
});
