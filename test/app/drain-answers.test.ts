/**
 * While a replica drains, every answer carries `Connection: close` — those Fastify sends and those written on
 * the raw response alike: a 2025-era session's fast-path answer and its SDK-path event stream, a 2026-07-28
 * fast-path answer, a REST answer, a refusal — and the server ends the connection after it, so a keep-alive
 * client opens its next one elsewhere. Every answer carries its `x-request-id` too. Real HTTP on loopback.
 */
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterEach, expect, it } from 'vitest';
import { type LegacyFixture, startLegacyServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

let gw: TestGateway | undefined;
let upstream: LegacyFixture | undefined;
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await gw?.close();
  gw = undefined;
  await upstream?.close();
  upstream = undefined;
});

const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'probe', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

it('closes the connection of every kind of answer while draining, and carries the request id on each', async () => {
  upstream = await startLegacyServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
  gw = await startTestGateway(sqliteTarget);
  const base = await gw.listen();
  const api = async (method: 'POST' | 'PATCH', path: string, body?: unknown) =>
    (await gw!.request(method, path, { body })).json();
  await api('POST', '/api/mcp/install', { url: upstream.url, id: 'files' });
  await api('PATCH', '/api/mcp/servers/files/tools', { allow: ['echo'] });
  expect((await api('POST', '/api/mcp/servers/files/test')).ok).toBe(true);
  const agent = await api('POST', '/api/tokens', { role: 'agent', name: 'a' });
  const mcp = {
    authorization: `Bearer ${agent.token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  const post = async (headers: Record<string, string>, body: unknown) =>
    request(`${base}/mcp`, { method: 'POST', headers, body: JSON.stringify(body) });

  const initialized = await post(mcp, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
  });
  await initialized.body.text();
  const session = {
    ...mcp,
    'mcp-session-id': String(initialized.headers['mcp-session-id']),
    'mcp-protocol-version': '2025-06-18',
  };
  await (await post(session, { jsonrpc: '2.0', method: 'notifications/initialized' })).body.text();
  const modern = {
    ...mcp,
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': 'files__echo',
  };
  const call = { name: 'files__echo', arguments: { text: 'hi' } };
  const answers = [
    [
      'a 2025 session fast-path call',
      () => post(session, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: call }),
    ],
    ['a 2025 session SDK-path event stream', () => post(session, { jsonrpc: '2.0', id: 3, method: 'prompts/list' })],
    [
      'a 2026-07-28 fast-path call',
      () => post(modern, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { ...call, _meta: MODERN_META } }),
    ],
    [
      'a REST answer',
      () => request(`${base}/api/mcp/servers`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } }),
    ],
    ['a refusal', () => request(`${base}/api/mcp/servers`, { headers: { authorization: 'Bearer gh_not_a_token' } })],
  ] as const;

  const seen = async () => {
    const found: Record<string, string> = {};
    for (const [what, send] of answers) {
      const answer = await send();
      await answer.body.text();
      expect(answer.headers['x-request-id'], what).toMatch(/^[0-9a-f-]{36}$/);
      found[what] = String(answer.headers.connection);
    }
    return found;
  };
  const keptAlive = Object.fromEntries(answers.map(([what]) => [what, 'keep-alive']));
  expect(await seen()).toEqual(keptAlive);

  gw.gateway.readiness.drain();
  expect(await seen()).toEqual(Object.fromEntries(answers.map(([what]) => [what, 'close'])));

  // And the server ends the connection after such an answer (a session's fast-path call, written raw).
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  sockets.push(socket);
  socket.on('error', () => {});
  await once(socket, 'connect');
  const body = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: call });
  const head = Object.entries({ ...session, host: `${hostname}:${port}`, 'content-length': String(body.length) });
  socket.write(`POST /mcp HTTP/1.1\r\n${head.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`);
  let received = '';
  socket.on('data', (chunk) => {
    received += String(chunk);
  });
  const ended = await Promise.race([
    once(socket, 'close').then(() => 'closed' as const),
    sleep(5_000, 'open' as const),
  ]);
  expect(ended).toBe('closed');
  expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(received.toLowerCase()).toContain('connection: close');
  expect(received).toContain('"text":"hi"');
});
