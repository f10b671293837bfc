/**
 * A person's upstream OAuth grants end with them: deleting a user revokes each grant at its authorization
 * server (RFC 7009) and drops every grant and pending flow of theirs, and a user disabled while a connect
 * is under way never gets it completed (the callback refuses a flow whose person is disabled or gone).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { connectIn, installPerUser, person, signedIn } from './browser.js';

const PUBLIC_URL = 'http://127.0.0.1:7';

describe('upstream OAuth grants when a user is deleted or disabled', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;

  beforeAll(async () => {
    as = await startAuthServer();
    mcp = await startProtectedServer(as.issuer);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    for (const id of ['team', 'wiki']) await installPerUser(gw, id, mcp.url);
  });
  afterAll(async () => {
    await gw.close();
    await mcp.close();
    await as.close();
  });

  const rowsOf = async (subject: string) => ({
    grants: await gw.gateway.store.db
      .selectFrom('upstream_oauth_grants')
      .select('server_id')
      .where('subject', '=', subject)
      .execute(),
    flows: await gw.gateway.store.db
      .selectFrom('upstream_oauth_flows')
      .select('server_id')
      .where('subject', '=', subject)
      .execute(),
  });
  const connectUrl = async (token: string, id: string) => {
    const started = await gw.request('POST', `/api/users/me/grants/${id}/connect`, { token });
    expect(started.statusCode).toBe(200);
    return String(started.json().authorizationUrl);
  };

  it('deleting a user revokes their grants upstream and drops their grants and flows', async () => {
    const dana = await person(gw, 'dana');
    const browser = await signedIn(gw, dana.token);
    expect((await connectIn(browser, as, await connectUrl(dana.token, 'team'), 'dana-upstream')).statusCode).toBe(200);
    await connectUrl(dana.token, 'wiki'); // a connect under way
    const kept = await person(gw, 'kept');
    const keptBrowser = await signedIn(gw, kept.token);
    expect((await connectIn(keptBrowser, as, await connectUrl(kept.token, 'team'), 'kept-upstream')).statusCode).toBe(
      200,
    );
    expect(await rowsOf(`user:${dana.id}`)).toEqual({
      grants: [{ server_id: 'team' }],
      flows: [{ server_id: 'wiki' }],
    });

    let destroyed = 0;
    const count = () => {
      destroyed += 1;
    };
    as.provider.on('refresh_token.destroyed', count);
    try {
      const deleted = await gw.request('DELETE', `/api/users/${dana.id}`);
      expect(deleted.statusCode, deleted.body).toBe(200);
    } finally {
      as.provider.off('refresh_token.destroyed', count);
    }
    expect(destroyed).toBe(1); // revoked at the authorization server, not only forgotten
    expect(await rowsOf(`user:${dana.id}`)).toEqual({ grants: [], flows: [] });
    // Someone else's grant is untouched.
    expect((await rowsOf(`user:${kept.id}`)).grants).toEqual([{ server_id: 'team' }]);
  });

  it('a user disabled while connecting never gets the connect completed', async () => {
    const erin = await person(gw, 'erin');
    const browser = await signedIn(gw, erin.token);
    // Erin's browser is bound to the flow and sent to the authorization server ...
    const opened = await browser.get(await connectUrl(erin.token, 'team'));
    expect(opened.statusCode).toBe(302);
    // ... then an admin disables her before she comes back.
    expect((await gw.request('PATCH', `/api/users/${erin.id}`, { body: { disabled: true } })).statusCode).toBe(200);
    const answer = await as.consent(String(opened.headers.location), 'erin-upstream');
    const back = await browser.get(answer.href);
    expect(back.statusCode).toBe(403);
    expect(back.body).toContain('forbidden');
    expect(await rowsOf(`user:${erin.id}`)).toEqual({ grants: [], flows: [] });
  });
});
