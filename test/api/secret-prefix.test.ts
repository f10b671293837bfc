/**
 * Env references name only variables of the secret prefix, and never one of Gatehouse's own settings, however
 * broad an operator makes the prefix: with GATEHOUSE_SECRET_ENV_PREFIX=G, a header `{"env": "GATEHOUSE_SECRET_KEY"}`
 * would have sent the sealing key to the operator's own server.
 */
import { afterEach, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

let gw: TestGateway | undefined;
afterEach(async () => gw?.close());

it("refuses references to Gatehouse's own settings whatever the prefix", async () => {
  gw = await startTestGateway(sqliteTarget, { GATEHOUSE_SECRET_ENV_PREFIX: 'G' });
  const install = (name: string) =>
    (gw as TestGateway).request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: `s-${name.toLowerCase().replaceAll('_', '-')}`,
          name: 's',
          transport: 'streamable-http',
          url: 'http://127.0.0.2:9/mcp',
          headers: { 'X-Key': { env: name } },
        },
      },
    });
  for (const own of ['GATEHOUSE_SECRET_KEY', 'GATEHOUSE_ADMIN_TOKEN']) {
    const refused = await install(own);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({ code: 'mcp.secret_ref_refused', issues: [{ path: 'headers.X-Key' }] });
  }
  expect((await install('GITHUB_TOKEN')).statusCode).toBe(201);
});

it('refuses a secret prefix inside GATEHOUSE_', () => {
  expect(() => loadConfig({ env: { GATEHOUSE_SECRET_ENV_PREFIX: 'GATEHOUSE_' } })).toThrow(/GATEHOUSE_\* settings/);
});
