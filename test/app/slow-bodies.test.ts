/**
 * Slow clients are bounded: a body trickled past GATEHOUSE_REQUEST_TIMEOUT_MS is cut with a typed 408
 * (counted on /metrics), and a body without a valid token is refused with 401 before it is read. Real
 * sockets against a real gateway on loopback.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

/** Opens a socket, writes `head`, then one byte of body every `everyMs` until the server answers or closes. */
function trickle(base: string, head: string, everyMs: number): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let answer = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      socket.write(head);
      timer = setInterval(() => {
        if (socket.writable) socket.write('x');
      }, everyMs);
    });
    socket.on('data', (chunk) => {
      answer += chunk.toString('utf8');
      // A complete JSON answer is enough: the socket is closed from this side too.
      if (/\r\n\r\n\{.*\}$/s.test(answer)) socket.destroy();
    });
    socket.on('close', () => {
      clearInterval(timer);
      resolve(answer);
    });
    socket.on('error', (error) => {
      clearInterval(timer);
      if (answer) resolve(answer);
      else reject(error);
    });
  });
}

describe('slow bodies', () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  it('answers 408 request_timeout to a body trickled past the request timeout, and counts it', async () => {
    gw = await startTestGateway(sqliteTarget, {
      GATEHOUSE_REQUEST_TIMEOUT_MS: '1500',
      GATEHOUSE_HEADERS_TIMEOUT_MS: '1000',
    });
    const base = await gw.listen();
    const head = [
      'POST /api/tokens HTTP/1.1',
      `Host: 127.0.0.1:${new URL(base).port}`,
      'Authorization: Bearer gh_test-admin-token-0123456789abcdef',
      'Content-Type: application/json',
      'Content-Length: 100000',
      '',
      '',
    ].join('\r\n');
    const answer = await trickle(base, head, 100);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(answer).toContain('"code":"request_timeout"');
    const metrics = (await gw.request('GET', '/metrics')).body;
    expect(metrics).toMatch(/gatehouse_http_request_timeouts_total 1/);
  }, 20_000);

  it('refuses a body without a valid token before reading it (401 while the body is still coming)', async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_REQUEST_TIMEOUT_MS: '600000' });
    const base = await gw.listen();
    const port = new URL(base).port;
    for (const [path, auth] of [
      ['/api/tokens', ''],
      ['/api/tokens', 'Authorization: Bearer not-a-token\r\n'],
      ['/mcp', 'Authorization: Bearer not-a-token\r\n'],
    ] as const) {
      const head = `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n`;
      const answer = await trickle(base, head, 200);
      expect({ path, auth, status: answer.slice(0, 12) }).toEqual({ path, auth, status: 'HTTP/1.1 401' });
      expect(answer).toContain('"code":"unauthorized"');
    }
  }, 20_000);
});
