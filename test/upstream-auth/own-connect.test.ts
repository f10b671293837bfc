/**
 * `POST /api/users/me/grants/{id}/connect` is a person's connect to a per-user server they can see: a server
 * outside their groups answers exactly as an unknown id does (`mcp.not_found`, nothing discovered, nothing
 * started), and a shared server refuses (`oauth.not_configured`) without starting a flow or fetching a
 * client_credentials token under the caller's name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AuthServer,
  type ProtectedServer,
  SCOPE,
  startAuthServer,
  startProtectedServer,
} from '../fixtures/oauth.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { person } from './browser.js';

const PUBLIC_URL = 'http://127.0.0.1:7';
const SECRET = 'own-connect-secret-0123456789abcdef';

describe('upstream OAuth, a person connecting their own account', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;

  beforeAll(async () => {
    as = await startAuthServer({
      clients: [
        {
          client_id: 'machine',
          client_secret: SECRET,
          redirect_uris: [`${PUBLIC_URL}/oauth/callback`],
          grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
          response_types: ['code'],
          scope: `openid offline_access ${SCOPE}`,
        },
      ],
    });
    mcp = await startProtectedServer(as.issuer);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    for (const [id, auth, exposure] of [
      ['eng-only', { type: 'oauth', mode: 'per-user' }, ['eng']],
      ['docs', { type: 'oauth', mode: 'shared' }, ['default']],
      [
        'm2m',
        { type: 'oauth', mode: 'shared', grant: 'client_credentials', clientId: 'machine', clientSecret: SECRET },
        ['default'],
      ],
    ] as const) {
      const installed = await gw.request('POST', '/api/mcp/install', {
        body: {
          manifest: {
            id,
            name: id,
            transport: 'streamable-http',
            url: mcp.url,
            privateNetwork: true,
            auth,
            exposure,
          },
        },
      });
      expect(installed.statusCode, installed.body).toBe(201);
    }
  });
  afterAll(async () => {
    await gw.close();
    await mcp.close();
    await as.close();
  });

  const rows = async () => ({
    flows: await gw.gateway.store.db.selectFrom('upstream_oauth_flows').selectAll().execute(),
    grants: await gw.gateway.store.db.selectFrom('upstream_oauth_grants').selectAll().execute(),
  });

  it('refuses servers outside the caller’s groups like unknown ids, and shared servers, starting nothing', async () => {
    const mia = await person(gw, 'mia'); // groups: default
    const connect = (id: string, token = mia.token) =>
      gw.request('POST', `/api/users/me/grants/${id}/connect`, { token });
    const seen = mcp.unauthorized;
    const tokenRequests = JSON.stringify(as.tokenRequests);

    const unknown = await connect('nope');
    const unexposed = await connect('eng-only');
    expect(unknown.statusCode).toBe(404);
    expect(unexposed.statusCode).toBe(404);
    expect(unknown.json()).toEqual({
      error: { code: 'mcp.not_found', message: 'No MCP server "nope" is installed.', id: 'nope' },
    });
    // Word for word the same answer, but for the id the caller gave.
    expect(unexposed.body).toBe(unknown.body.replaceAll('nope', 'eng-only'));

    for (const shared of ['docs', 'm2m']) {
      const refused = await connect(shared);
      expect(refused.statusCode).toBe(409);
      expect(refused.json().error.code).toBe('oauth.not_configured');
    }

    // Nothing was discovered, started or fetched for any of them.
    expect(mcp.unauthorized).toBe(seen);
    expect(JSON.stringify(as.tokenRequests)).toBe(tokenRequests);
    expect(await rows()).toEqual({ flows: [], grants: [] });

    // A person in the server's group connects as before.
    const erik = await person(gw, 'erik', { groups: ['eng'] });
    const started = await connect('eng-only', erik.token);
    expect(started.statusCode, started.body).toBe(200);
    expect(new URL(started.json().authorizationUrl).pathname).toBe('/oauth/connect');
    expect((await rows()).flows.map((f) => f.subject)).toEqual([`user:${erik.id}`]);
  });

  it('answers a disconnect of a grant the person does not hold as an unknown id, whatever the server', async () => {
    const nina = await person(gw, 'nina'); // groups: default
    const disconnect = (id: string) => gw.request('DELETE', `/api/users/me/grants/${id}`, { token: nina.token });
    const unknown = await disconnect('nope');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.code).toBe('mcp.not_found');
    // Not exposed to her, shared (hers to see, not to disconnect), machine to machine: the same words.
    for (const id of ['eng-only', 'docs', 'm2m']) {
      const answer = await disconnect(id);
      expect(answer.statusCode).toBe(404);
      expect(answer.body).toBe(unknown.body.replaceAll('nope', id));
    }
  });
});
