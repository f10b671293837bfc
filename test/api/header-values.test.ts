/**
 * A header value with CR, LF or NUL is refused when it is given (install, config), as an import already refuses
 * it: before, it was stored and refused only when the server was connected, and an export carried it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway(sqliteTarget);
});
afterAll(async () => gw.close());

it('refuses CR, LF and NUL in literal header values on install and on config', async () => {
  const manifest = (value: string) => ({
    manifest: {
      id: 'h',
      name: 'h',
      transport: 'streamable-http',
      url: 'http://127.0.0.2:9/mcp',
      headers: { 'X-Key': value },
    },
  });
  for (const bad of ['a\r\nInjected: 1', 'a\nb', 'a\u0000b']) {
    const refused = await gw.request('POST', '/api/mcp/install', { body: manifest(bad) });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({ code: 'validation_error' });
    expect(JSON.stringify(refused.json())).not.toContain('Injected');
  }
  expect((await gw.request('POST', '/api/mcp/install', { body: manifest('fine value') })).statusCode).toBe(201);
  const config = await gw.request('PATCH', '/api/mcp/servers/h/config', { body: { headers: { 'X-Key': 'a\r\nb' } } });
  expect(config.statusCode).toBe(400);
  // An env reference is checked when it is read, not here.
  const reference = { headers: { 'X-Other': { env: 'MCP_SECRET_OTHER' } } };
  expect((await gw.request('PATCH', '/api/mcp/servers/h/config', { body: reference })).statusCode).toBe(200);
});
