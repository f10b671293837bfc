/**
 * A Host header that is not `name[:port]` (userinfo, a path, spaces) is refused with a typed 400 and
 * logged, on every MCP surface, instead of slipping past the DNS-rebinding check (`evil.com@localhost`
 * parses as host `localhost`) and failing later with an unlogged 500.
 */
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

function rawPost(
  url: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent: false, headers: { connection: 'close', ...headers } });
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

describe('Host header hygiene', () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  it('answers 400 bad_host, logged, for a Host with userinfo or a path; a plain loopback Host still works', async () => {
    gw = await startTestGateway(sqliteTarget, {});
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true } });
    const agent = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent-one' } })).json();
    const base = await gw.listen();
    const port = new URL(base).port;
    const headers = (host: string) => ({
      host,
      authorization: `Bearer ${agent.token}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
    });
    const initialize = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    for (const path of ['/mcp', '/mcp/admin', '/mcp/memory']) {
      for (const host of [`evil.com@localhost:${port}`, `evil.com@127.0.0.1`, `evil.com@127.0.0.1:${port}`]) {
        const answer = await rawPost(`${base}${path}`, headers(host), initialize);
        expect({ path, host, status: answer.status }).toEqual({ path, host, status: 400 });
        expect({ path, host, body: `${host} ${JSON.parse(answer.body).error?.code ?? answer.body}` }).toEqual({
          path,
          host,
          body: `${host} bad_host`,
        });
      }
      // A Host with a path never reaches the surfaces: the HTTP server refuses it itself (a plain 400).
      expect((await rawPost(`${base}${path}`, headers(`localhost:${port}/x`), initialize)).status).toBe(400);
      expect((await rawPost(`${base}${path}`, headers(`localhost:${port}`), initialize)).status).toBe(200);
    }
    expect(gw.logs.some((line) => line.includes('"code":"bad_host"'))).toBe(true);
  });
});
