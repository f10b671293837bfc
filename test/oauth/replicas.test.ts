/**
 * Two replicas on one PostgreSQL store agree on everything OAuth: a token issued by one is honoured by
 * the other, a key rotated on one is used there at once and verified by the other without a refusal
 * (the other reloads on the unknown kid), a refresh token spent on one is a replay on the other, and
 * the per-address limit of /register is one count for both, and a metadata document is fetched once for both.
 */
import type http from 'node:http';
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen } from '../fixtures/http.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { pkce } from '../helpers/oauth.js';
import { POSTGRES_AVAILABLE, postgresTarget } from '../helpers/stores.js';

const REDIRECT = 'http://127.0.0.1:7777/cb';

describe.skipIf(!POSTGRES_AVAILABLE)('OAuth across replicas [postgres]', () => {
  let place: Awaited<ReturnType<typeof postgresTarget.fresh>>;
  let a: TestGateway;
  let b: TestGateway;
  let person: { token: string };

  beforeAll(async () => {
    place = await postgresTarget.fresh();
    a = await startTestGateway(postgresTarget, {}, {}, place);
    b = await startTestGateway(postgresTarget, {}, {}, place);
    person = (await a.request('POST', '/api/tokens', { body: { role: 'operator', name: 'ops' } })).json();
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await place?.cleanup();
  });

  const form = (gw: TestGateway, url: string, params: Record<string, string>, cookie = '') =>
    gw.gateway.app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
      payload: new URLSearchParams(params).toString(),
    });

  const accepted = async (gw: TestGateway, token: string) =>
    (
      await gw.gateway.app.inject({
        method: 'POST',
        url: '/mcp',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        payload: {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
        },
      })
    ).statusCode;

  /** Registers, consents and exchanges on `gw`. */
  const grant = async (gw: TestGateway) => {
    const clientId = (
      await gw.request('POST', '/register', { token: null, body: { redirect_uris: [REDIRECT] } })
    ).json().client_id;
    const { verifier, challenge } = pkce();
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: 'http://127.0.0.1:8080/mcp',
    });
    const page = await gw.gateway.app.inject({ method: 'GET', url: `/authorize?${query}` });
    const request = /name="request" value="([^"]+)"/
      .exec(page.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const setCookie = page.headers['set-cookie'];
    const cookie = (Array.isArray(setCookie) ? setCookie : [String(setCookie)]).map((c) => c.split(';')[0]).join('; ');
    const answer = await form(
      gw,
      '/authorize',
      { request: request as string, decision: 'approve', token: person.token },
      cookie,
    );
    const code = new URL(answer.headers.location as string).searchParams.get('code') as string;
    const tokens = (
      await form(gw, '/token', {
        grant_type: 'authorization_code',
        code,
        client_id: clientId,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
      })
    ).json();
    return { clientId, ...(tokens as { access_token: string; refresh_token: string }) };
  };

  it('honours each other’s tokens, rotations and refresh-token spending', async () => {
    const first = await grant(a);
    expect(await accepted(b, first.access_token)).toBe(200);
    const oldKid = decodeProtectedHeader(first.access_token).kid;

    // Rotate on B: B signs with the new key at once; A, which cached the old set, verifies it too.
    const rotated = (await b.request('POST', '/api/oauth/keys/rotate')).json().kid;
    const refreshed = await form(b, '/token', {
      grant_type: 'refresh_token',
      refresh_token: first.refresh_token,
      client_id: first.clientId,
    });
    expect(refreshed.statusCode).toBe(200);
    const renewed = refreshed.json() as { access_token: string; refresh_token: string };
    expect(decodeProtectedHeader(renewed.access_token).kid).toBe(rotated);
    expect(rotated).not.toBe(oldKid);
    expect(await accepted(a, renewed.access_token)).toBe(200);
    expect(await accepted(a, first.access_token)).toBe(200);
    expect(
      (await a.request('GET', '/oauth/jwks', { token: null })).json().keys.map((k: { kid: string }) => k.kid),
    ).toEqual(expect.arrayContaining([oldKid, rotated]));

    // The refresh token B spent is a replay on A: the family ends on both.
    const replay = await form(a, '/token', {
      grant_type: 'refresh_token',
      refresh_token: first.refresh_token,
      client_id: first.clientId,
    });
    expect(replay.json().error).toBe('invalid_grant');
    expect(await accepted(b, renewed.access_token)).toBe(401);
    expect(await accepted(a, renewed.access_token)).toBe(401);
  });

  it('holds the /register limit (20 a minute per address) across replicas, counted in the store', async () => {
    // A fixed window: an attempt that straddles a minute boundary proves nothing and is made again.
    for (let attempt = 0; attempt < 3; attempt++) {
      const address = `10.17.0.${attempt + 1}`;
      const minute = Math.floor(Date.now() / 60_000);
      const statuses: number[] = [];
      for (let i = 0; i < 24; i++) {
        const answer = await (i % 2 === 0 ? a : b).gateway.app.inject({
          method: 'POST',
          url: '/register',
          remoteAddress: address,
          payload: { client_name: `limited ${i}`, redirect_uris: [REDIRECT] },
        });
        statuses.push(answer.statusCode);
      }
      if (Math.floor(Date.now() / 60_000) !== minute) continue;
      // Each replica alone would have let 12 of its 12 through; together they admit exactly 20.
      expect(statuses.filter((s) => s === 201)).toHaveLength(20);
      expect(statuses.slice(20)).toEqual([429, 429, 429, 429]);
      // Another address has its own allowance.
      const other = await b.gateway.app.inject({
        method: 'POST',
        url: '/register',
        remoteAddress: '10.17.1.1',
        payload: { client_name: 'elsewhere', redirect_uris: [REDIRECT] },
      });
      expect(other.statusCode).toBe(201);
      return;
    }
    throw new Error('every attempt straddled a minute boundary');
  });

  it('fetches a Client ID Metadata Document once for both replicas, while it lasts', async () => {
    let fetched = 0;
    const documents = await listen((req: http.IncomingMessage, res: http.ServerResponse) => {
      fetched += 1;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=600' }).end(
        JSON.stringify({
          client_id: `${documents.origin}${req.url}`,
          client_name: 'Shared doc',
          redirect_uris: [REDIRECT],
        }),
      );
    }, PUBLIC_TEST_HOST);
    try {
      const clientId = `${documents.origin}/client.json`;
      const authorize = (gw: TestGateway) =>
        gw.gateway.app.inject({
          method: 'GET',
          url: `/authorize?${new URLSearchParams({
            response_type: 'code',
            client_id: clientId,
            redirect_uri: REDIRECT,
            code_challenge: pkce().challenge,
            code_challenge_method: 'S256',
            resource: 'http://127.0.0.1:8080/mcp',
          })}`,
        });
      const onA = await authorize(a);
      expect(onA.statusCode).toBe(200);
      expect(onA.body).toContain('Shared doc');
      expect(fetched).toBe(1);
      const onB = await authorize(b);
      expect(onB.statusCode).toBe(200);
      expect(onB.body).toContain('Shared doc');
      expect(fetched).toBe(1);
    } finally {
      await documents.close();
    }
  });
});
