/**
 * Bad input gets the RFC's error code, is audited, and grants nothing: wrong code_verifier, reused
 * code, unregistered redirect URI, metadata documents on a private address / over the size bound /
 * naming another client, audience mismatch (a token for /mcp/admin on /mcp), expired and revoked
 * tokens, refresh-token replay. Also discovery answers JSON everywhere, consent is remembered and
 * deniable, grants are revocable, keys rotate without refusing live tokens, DCR can be switched off.
 * Driven over Fastify inject (the public URL is the configured port) with documents on real loopback HTTP,
 * on SQLite and PostgreSQL (replicas share grants, codes, families and keys through the store).
 */
import type http from 'node:http';
import type { LightMyRequestResponse } from 'fastify';
import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SigningKeys } from '../../src/oauth/keys.js';
import { sealKeyFrom } from '../../src/secrets/seal.js';
import { UserStore } from '../../src/store/users.js';
import { type Listening, listen } from '../fixtures/http.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_SECRET_KEY, type TestGateway } from '../helpers/gateway.js';
import { pkce } from '../helpers/oauth.js';
import { describeEachStore } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const BASE = 'http://127.0.0.1:8080';
const REDIRECT = 'http://127.0.0.1:7777/cb';

describeEachStore('OAuth: bad input and the edges of the flow', (target) => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let documents: Listening;
  let person: { id: string; token: string };

  beforeAll(async () => {
    gw = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } });
    person = (await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'grace' } })).json();
    documents = await listen((req: http.IncomingMessage, res: http.ServerResponse) => {
      const id = `${documents.origin}${req.url}`;
      if (req.url === '/big.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ client_id: id, redirect_uris: [REDIRECT], padding: 'x'.repeat(40_000) }));
      }
      if (req.url === '/moved.json') {
        res.writeHead(302, { location: `${documents.origin}/good.json` });
        return res.end();
      }
      const claimed = req.url === '/liar.json' ? 'https://someone-else.example/client.json' : id;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ client_id: claimed, client_name: 'Doc client', redirect_uris: [REDIRECT] }));
    }, PUBLIC_TEST_HOST);
  });
  afterAll(async () => {
    await documents.close();
    await upstream.close();
    await gw.close();
  });

  const form = (url: string, params: Record<string, string>, headers: Record<string, string> = {}) =>
    gw.gateway.app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      payload: new URLSearchParams(params).toString(),
    });

  const register = async (redirectUris = [REDIRECT]) => {
    const answer = await gw.request('POST', '/register', {
      token: null,
      body: { client_name: 'Bad-input client', redirect_uris: redirectUris },
    });
    expect(answer.statusCode).toBe(201);
    return answer.json().client_id as string;
  };

  const authorizeUrl = (clientId: string, challenge: string, extra: Record<string, string> = {}) =>
    `/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 's1',
      resource: `${BASE}/mcp`,
      ...extra,
    })}`;

  const cookiesOf = (answer: LightMyRequestResponse, jar = '') => {
    const set = answer.headers['set-cookie'];
    const lines = Array.isArray(set) ? set : set ? [set] : [];
    return [jar, ...lines.map((l) => l.split(';')[0])].filter(Boolean).join('; ');
  };

  /** Authorize and approve as the person: the redirect's parameters and the browser's cookies. */
  const approve = async (clientId: string, challenge: string, extra: Record<string, string> = {}, jar = '') => {
    const page = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(clientId, challenge, extra),
      headers: jar ? { cookie: jar } : {},
    });
    const cookies = cookiesOf(page, jar);
    if (page.statusCode === 302)
      return { params: new URL(page.headers.location as string).searchParams, cookies, page };
    expect(page.statusCode).toBe(200);
    const request = /name="request" value="([^"]+)"/
      .exec(page.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const answer = await form(
      '/authorize',
      { request: request as string, decision: 'approve', token: person.token },
      { cookie: cookies },
    );
    expect(answer.statusCode).toBe(302);
    return {
      params: new URL(answer.headers.location as string).searchParams,
      cookies: cookiesOf(answer, cookies),
      page,
    };
  };

  /** A full grant: client, code, tokens. */
  const tokensFor = async (resource = `${BASE}/mcp`) => {
    const clientId = await register();
    const { verifier, challenge } = pkce();
    const { params } = await approve(clientId, challenge, { resource });
    const exchanged = await form('/token', {
      grant_type: 'authorization_code',
      code: params.get('code') as string,
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
    });
    expect(exchanged.statusCode).toBe(200);
    return { clientId, ...(exchanged.json() as { access_token: string; refresh_token: string }) };
  };

  /** A 2025-era initialize: 200 when the token is accepted on `path`. */
  const listTools = (path: string, token: string) =>
    gw.gateway.app.inject({
      method: 'POST',
      url: path,
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
    });

  const oauthAudit = async () => {
    // Refusals are written by the audit's group commit: everything queued so far, committed.
    await gw.gateway.audit.flush();
    return (
      await gw.gateway.store.db
        .selectFrom('audit_events')
        .select(['action', 'outcome'])
        .where('kind', '=', 'oauth')
        .execute()
    ).map((r) => `${r.action}:${r.outcome}`);
  };

  it('answers discovery for every surface as JSON, and JSON for every OAuth path, never the dashboard', async () => {
    const as = (await gw.request('GET', '/.well-known/oauth-authorization-server', { token: null })).json();
    expect(as).toMatchObject({
      issuer: BASE,
      token_endpoint: `${BASE}/token`,
      registration_endpoint: `${BASE}/register`,
      code_challenge_methods_supported: ['S256'],
      client_id_metadata_document_supported: true,
    });
    expect((await gw.request('GET', '/.well-known/openid-configuration', { token: null })).json().issuer).toBe(BASE);
    for (const path of ['/mcp', '/mcp/admin', '/mcp/memory', '/mcp/s/files']) {
      const prm = await gw.request('GET', `/.well-known/oauth-protected-resource${path}`, { token: null });
      expect(prm.json()).toMatchObject({ resource: `${BASE}${path}`, authorization_servers: [BASE] });
      const refused = await gw.request('POST', path, {
        token: null,
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      });
      expect(refused.statusCode).toBe(path === '/mcp/admin' ? 404 : 401);
      if (refused.statusCode === 401) {
        expect(refused.headers['www-authenticate']).toBe(
          `Bearer resource_metadata="${BASE}/.well-known/oauth-protected-resource${path}", scope="mcp"`,
        );
      }
    }
    expect((await gw.request('GET', '/.well-known/oauth-protected-resource', { token: null })).json().resource).toBe(
      `${BASE}/mcp`,
    );
    for (const [method, path, status] of [
      ['GET', '/.well-known/nothing-here', 404],
      ['GET', '/.well-known/oauth-protected-resource/api/x', 404],
      ['GET', '/token', 404],
      ['GET', '/register', 404],
      ['GET', '/authorize', 400],
      ['GET', '/oauth/jwks', 200],
    ] as const) {
      const answer = await gw.request(method, path, { token: null });
      expect([path, answer.statusCode, String(answer.headers['content-type'])]).toEqual([
        path,
        status,
        expect.stringContaining('application/json'),
      ]);
      // A path that is not there is the request's fault, not the server's.
      expect({ path, body: answer.body }).not.toEqual({ path, body: expect.stringContaining('"server_error"') });
    }
    expect((await gw.request('GET', '/oauth/jwks', { token: null })).json().keys[0]).toMatchObject({
      kty: 'EC',
      alg: 'ES256',
      use: 'sig',
    });
  });

  it('refuses a wrong code_verifier (invalid_grant), then a reused code revokes what the first exchange issued', async () => {
    const clientId = await register();
    const { verifier, challenge } = pkce();
    const { params } = await approve(clientId, challenge);
    const code = params.get('code') as string;
    expect(params.get('state')).toBe('s1');
    const exchange = (v: string) =>
      form('/token', {
        grant_type: 'authorization_code',
        code,
        client_id: clientId,
        redirect_uri: REDIRECT,
        code_verifier: v,
      });
    const wrong = await exchange(pkce().verifier);
    expect([wrong.statusCode, wrong.json().error]).toEqual([400, 'invalid_grant']);
    const good = await exchange(verifier);
    expect(good.json()).toMatchObject({ token_type: 'Bearer' });
    const firstList = await listTools('/mcp', good.json().access_token);
    expect([firstList.statusCode, firstList.body]).toEqual([200, expect.anything()]);
    const reused = await exchange(verifier);
    expect([reused.statusCode, reused.json().error]).toEqual([400, 'invalid_grant']);
    expect((await listTools('/mcp', good.json().access_token)).statusCode).toBe(401);
    const refresh = await form('/token', {
      grant_type: 'refresh_token',
      refresh_token: good.json().refresh_token,
      client_id: clientId,
    });
    expect(refresh.json().error).toBe('invalid_grant');
    expect(await oauthAudit()).toEqual(
      expect.arrayContaining(['oauth.token.code:invalid_grant', 'oauth.family_revoked:code_reused']),
    );
  });

  it('never redirects to an unregistered redirect URI; a loopback one matches on any port; PKCE S256 is required', async () => {
    const clientId = await register();
    const { challenge } = pkce();
    const foreign = await gw.request(
      'GET',
      authorizeUrl(clientId, challenge, { redirect_uri: 'https://evil.example/cb' }),
      { token: null },
    );
    expect([foreign.statusCode, foreign.json().error, foreign.headers.location]).toEqual([
      400,
      'invalid_request',
      undefined,
    ]);
    const otherPort = await gw.request(
      'GET',
      authorizeUrl(clientId, challenge, { redirect_uri: 'http://127.0.0.1:50123/cb' }),
      { token: null },
    );
    expect(otherPort.statusCode).toBe(200);
    expect(otherPort.headers['content-security-policy']).toContain("default-src 'none'");
    // Only the port varies: credentials would show another host on the consent page.
    for (const redirect_uri of ['http://trusted.example:443@127.0.0.1:50123/cb', 'http://u:p@127.0.0.1/cb']) {
      const spoof = await gw.request('GET', authorizeUrl(clientId, challenge, { redirect_uri }), { token: null });
      expect([spoof.statusCode, spoof.json().error, spoof.headers.location]).toEqual([
        400,
        'invalid_request',
        undefined,
      ]);
    }
    // A mangled cookie is no cookie: the page is shown, with a fresh one.
    const mangled = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(clientId, challenge),
      headers: { cookie: 'gh_oauth_csrf=%E0%A4%A; gh_oauth_person=%' },
    });
    expect(mangled.statusCode).toBe(200);
    const plain = await gw.request('GET', authorizeUrl(clientId, challenge, { code_challenge_method: 'plain' }), {
      token: null,
    });
    expect(plain.statusCode).toBe(302);
    expect(new URL(plain.headers.location as string).searchParams.get('error')).toBe('invalid_request');
    const elsewhere = await gw.request(
      'GET',
      authorizeUrl(clientId, challenge, { resource: 'https://other.example/mcp' }),
      { token: null },
    );
    expect(new URL(elsewhere.headers.location as string).searchParams.get('error')).toBe('invalid_target');
    const unknown = await gw.request('GET', authorizeUrl('gh_dyn_nobody', challenge), { token: null });
    expect([unknown.statusCode, unknown.json().error]).toEqual([400, 'invalid_client']);
    const badRegistration = await gw.request('POST', '/register', {
      token: null,
      body: { redirect_uris: ['http://evil.example/cb'] },
    });
    expect([badRegistration.statusCode, badRegistration.json().error]).toEqual([400, 'invalid_redirect_uri']);
  });

  it('refuses metadata documents on a private address, over the size bound, or naming another client (invalid_client)', async () => {
    const { challenge } = pkce();
    const port = new URL(documents.origin).port;
    for (const clientId of [
      `http://127.0.0.1:${port}/client.json`, // loopback, not the test seam's public address
      `http://10.1.2.3:${port}/client.json`,
      `${documents.origin}/big.json`,
      `${documents.origin}/liar.json`,
    ]) {
      const answer = await gw.request('GET', authorizeUrl(clientId, challenge), { token: null });
      expect([clientId, answer.statusCode, answer.json().error]).toEqual([clientId, 400, 'invalid_client']);
    }
    // A redirect is not followed, and said so (not "too large").
    const moved = await gw.request('GET', authorizeUrl(`${documents.origin}/moved.json`, challenge), { token: null });
    expect([moved.statusCode, moved.json().error]).toEqual([400, 'invalid_client']);
    expect(moved.json().error_description).toContain('redirect');
    const ok = await gw.request('GET', authorizeUrl(`${documents.origin}/good.json`, challenge), { token: null });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain(`<code>${new URL(documents.origin).host}</code>`);
  });

  it('binds a token to one resource: a token for /mcp/admin is invalid_token on /mcp and on REST', async () => {
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.adminEnabled': true } });
    const admin = await tokensFor(`${BASE}/mcp/admin`);
    expect((await listTools('/mcp/admin', admin.access_token)).statusCode).toBe(200);
    const onHub = await listTools('/mcp', admin.access_token);
    expect(onHub.statusCode).toBe(401);
    expect(onHub.headers['www-authenticate']).toContain('error="invalid_token"');
    expect((await gw.request('GET', '/api/tokens', { token: admin.access_token })).statusCode).toBe(401);
    // Refreshing may not move it elsewhere either.
    const moved = await form('/token', {
      grant_type: 'refresh_token',
      refresh_token: admin.refresh_token,
      client_id: admin.clientId,
      resource: `${BASE}/mcp`,
    });
    expect(moved.json().error).toBe('invalid_target');
    expect(await oauthAudit()).toContain('oauth.token_refused:invalid_token:audience');
  });

  it('refuses an expired token and a revoked one; revoking the grant ends its refresh tokens', async () => {
    const live = await tokensFor();
    // The same claims, signed by the gateway's own key, an hour in the past.
    const keys = new SigningKeys(gw.gateway.store, sealKeyFrom(Buffer.from(TEST_SECRET_KEY, 'hex')));
    const { kid, key } = await keys.signing();
    const claims = decodeJwt(live.access_token);
    const expired = await new SignJWT({
      ...claims,
      exp: Math.floor(Date.now() / 1000) - 3600,
      iat: Math.floor(Date.now() / 1000) - 3700,
    })
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
      .sign(key);
    expect((await listTools('/mcp', expired)).statusCode).toBe(401);
    expect((await listTools('/mcp', live.access_token)).statusCode).toBe(200);

    const revoked = await form('/revoke', { token: live.access_token, client_id: live.clientId });
    expect(revoked.statusCode).toBe(200);
    expect((await listTools('/mcp', live.access_token)).statusCode).toBe(401);

    const other = await tokensFor();
    const grant = ((await gw.request('GET', '/api/oauth/grants')).json().grants as Json[]).find(
      (g) => g.clientId === other.clientId,
    );
    expect(grant?.subject).toBe(`token:${person.id}`);
    expect((await gw.request('DELETE', `/api/oauth/grants/${grant?.id}`)).statusCode).toBe(200);
    expect((await listTools('/mcp', other.access_token)).statusCode).toBe(401);
    const refreshed = await form('/token', {
      grant_type: 'refresh_token',
      refresh_token: other.refresh_token,
      client_id: other.clientId,
    });
    expect(refreshed.json().error).toBe('invalid_grant');
    expect(await oauthAudit()).toEqual(
      expect.arrayContaining([
        'oauth.token_refused:invalid_token:expired',
        'oauth.token_refused:invalid_token:revoked',
      ]),
    );
  });

  it('detects a refresh-token replay and revokes the whole family', async () => {
    const first = await tokensFor();
    const refresh = (token: string) =>
      form('/token', { grant_type: 'refresh_token', refresh_token: token, client_id: first.clientId });
    const second = await refresh(first.refresh_token);
    expect(second.statusCode).toBe(200);
    const { access_token: access2, refresh_token: refresh2 } = second.json();
    expect((await listTools('/mcp', access2)).statusCode).toBe(200);
    const replay = await refresh(first.refresh_token);
    expect([replay.statusCode, replay.json().error]).toEqual([400, 'invalid_grant']);
    // The thief's replay ends the legitimate holder's chain too: nothing of the family works.
    expect((await refresh(refresh2)).json().error).toBe('invalid_grant');
    expect((await listTools('/mcp', access2)).statusCode).toBe(401);
    expect(await oauthAudit()).toContain('oauth.family_revoked:refresh_replay');
  });

  it('remembers consent per person, client and scope, honours a denial, and keeps tokens valid across a key rotation', async () => {
    const clientId = await register();
    const { challenge } = pkce();
    const first = await approve(clientId, challenge);
    // The same browser (its remembered sign-in) asking again: straight back with a code, no page.
    const again = await approve(clientId, challenge, {}, first.cookies);
    expect(again.page.statusCode).toBe(302);
    expect(again.params.get('code')).toBeTruthy();
    // A different scope is a different consent: the page again.
    const wider = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(clientId, challenge, { scope: 'mcp group:default' }),
      headers: { cookie: first.cookies },
    });
    expect(wider.statusCode).toBe(200);
    const request = /name="request" value="([^"]+)"/
      .exec(wider.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const denied = await form(
      '/authorize',
      { request: request as string, decision: 'deny' },
      { cookie: cookiesOf(wider, first.cookies) },
    );
    expect(new URL(denied.headers.location as string).searchParams.get('error')).toBe('access_denied');
    // A forged or foreign consent form is refused.
    const forged = await form('/authorize', { request: request as string, decision: 'approve', token: person.token });
    expect(forged.json().error).toBe('invalid_request');

    const before = await tokensFor();
    const rotated = await gw.request('POST', '/api/oauth/keys/rotate');
    expect(rotated.statusCode).toBe(200);
    expect((await gw.request('GET', '/oauth/jwks', { token: null })).json().keys).toHaveLength(2);
    expect((await listTools('/mcp', before.access_token)).statusCode).toBe(200);
  });

  it("signs in a token's owner as the person: the user's groups, narrowed by scope; a disabled user's tokens stop", async () => {
    const users = new UserStore(gw.gateway.store);
    const ada = await users.create({ name: 'Ada', role: 'member', groups: ['default', 'research'], source: 'api' });
    const owned = await gw.gateway.tokens.create({
      name: 'ada-laptop',
      role: 'agent',
      source: 'api',
      userId: ada.id,
      groups: ['default', 'research'],
    });
    const clientId = await register();
    const { verifier, challenge } = pkce();
    const page = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(clientId, challenge, { scope: 'mcp group:research' }),
    });
    const request = /name="request" value="([^"]+)"/
      .exec(page.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const answer = await form(
      '/authorize',
      { request: request as string, decision: 'approve', token: owned.token as string },
      { cookie: cookiesOf(page) },
    );
    const code = new URL(answer.headers.location as string).searchParams.get('code') as string;
    const tokens = (
      await form('/token', {
        grant_type: 'authorization_code',
        code,
        client_id: clientId,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
      })
    ).json();
    expect(tokens.scope).toBe('group:research mcp');
    const grants = (await gw.request('GET', '/api/oauth/grants')).json().grants as Json[];
    expect(grants.find((g) => g.clientId === clientId)).toMatchObject({
      subject: `user:${ada.id}`,
      subjectName: 'Ada',
      groups: ['research'],
    });
    expect((await listTools('/mcp', tokens.access_token)).statusCode).toBe(200);

    // An agent token of hers that holds fewer groups than she does consents only those, typed on the page or
    // through the dashboard session it opened: its holder (often an agent) grants a client none of her others.
    const bot = await gw.gateway.tokens.create({
      name: 'ada-bot',
      role: 'agent',
      source: 'api',
      userId: ada.id,
      groups: ['default'],
    });
    const grantedGroups = async (scope: string, via: { token: string } | { session: string }) => {
      const narrowClient = await register();
      const { challenge: narrowChallenge } = pkce();
      const jar = 'session' in via ? via.session : '';
      const shown = await gw.gateway.app.inject({
        method: 'GET',
        url: authorizeUrl(narrowClient, narrowChallenge, { scope }),
        headers: jar ? { cookie: jar } : {},
      });
      const sealed = /name="request" value="([^"]+)"/
        .exec(shown.body)?.[1]
        ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
      const answered = await form(
        '/authorize',
        { request: sealed as string, decision: 'approve', ...('token' in via ? { token: via.token } : {}) },
        { cookie: cookiesOf(shown, jar) },
      );
      expect(answered.statusCode).toBe(302);
      const all = (await gw.request('GET', '/api/oauth/grants')).json().grants as Json[];
      return all.find((g) => g.clientId === narrowClient)?.groups as string[];
    };
    expect(await grantedGroups('mcp', { token: bot.token as string })).toEqual(['default']);
    expect(await grantedGroups('mcp group:research', { token: bot.token as string })).toEqual([]);
    const botSignIn = await gw.request('POST', '/auth/session', { token: null, body: { token: bot.token } });
    expect(botSignIn.json().principal).toMatchObject({ id: ada.id, role: 'member', groups: ['default'] });
    expect(await grantedGroups('mcp', { session: cookiesOf(botSignIn) })).toEqual(['default']);

    // A remembered consent never widens a grant silently: the client she consented through the bot's session
    // (default), asking again in a browser signed in with her full token, is shown the page, not sent a code.
    const lentClient = await register();
    const { challenge: lentChallenge } = pkce();
    const botCookies = cookiesOf(botSignIn);
    const firstPage = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(lentClient, lentChallenge),
      headers: { cookie: botCookies },
    });
    const firstRequest = /name="request" value="([^"]+)"/
      .exec(firstPage.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const firstAnswer = await form(
      '/authorize',
      { request: firstRequest as string, decision: 'approve' },
      { cookie: cookiesOf(firstPage, botCookies) },
    );
    expect(firstAnswer.statusCode).toBe(302);
    const fullSignIn = await gw.request('POST', '/auth/session', { token: null, body: { token: owned.token } });
    const widerPage = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(lentClient, lentChallenge),
      headers: { cookie: cookiesOf(fullSignIn) },
    });
    expect(widerPage.statusCode).toBe(200);
    expect(widerPage.body).toContain('name="request"');
    // The same lending again is remembered: straight back with a code.
    const samePage = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(lentClient, lentChallenge),
      headers: { cookie: botCookies },
    });
    expect(samePage.statusCode).toBe(302);
    const lent = (await gw.request('GET', '/api/oauth/grants')).json().grants as Json[];
    expect(lent.find((g) => g.clientId === lentClient)?.groups).toEqual(['default']);

    await users.update(ada.id, { disabled: true });
    expect((await listTools('/mcp', tokens.access_token)).statusCode).toBe(401);
    // A disabled user signs nobody in on the consent page either.
    const again = await gw.gateway.app.inject({ method: 'GET', url: authorizeUrl(clientId, challenge) });
    const request2 = /name="request" value="([^"]+)"/
      .exec(again.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const refused = await form(
      '/authorize',
      { request: request2 as string, decision: 'approve', token: owned.token as string },
      { cookie: cookiesOf(again) },
    );
    expect(refused.statusCode).toBe(401);
    expect(refused.body).toContain('does not sign in a person');
  });

  it('takes the person from a dashboard session: no token typed, the user named on the page and on the grant', async () => {
    const users = new UserStore(gw.gateway.store);
    const lin = await users.create({ name: 'Lin', role: 'operator', groups: ['default'], source: 'api' });
    const owned = await gw.gateway.tokens.create({ name: 'lin-cli', role: 'agent', source: 'api', userId: lin.id });
    const signIn = await gw.request('POST', '/auth/session', { token: null, body: { token: owned.token } });
    expect(signIn.statusCode).toBe(200);
    const session = cookiesOf(signIn);
    expect(session).toContain('gatehouse_session=');
    const clientId = await register();
    const { verifier, challenge } = pkce();
    const page = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(clientId, challenge),
      headers: { cookie: session },
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Signed in as <strong>Lin</strong>');
    expect(page.body).not.toContain('name="token"');
    const request = /name="request" value="([^"]+)"/
      .exec(page.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const answer = await form(
      '/authorize',
      { request: request as string, decision: 'approve' },
      { cookie: cookiesOf(page, session) },
    );
    expect(answer.statusCode).toBe(302);
    const code = new URL(answer.headers.location as string).searchParams.get('code') as string;
    // The same page answered after a logout is not signed in any more: no code, the sign-in asked again.
    const second = await gw.gateway.app.inject({
      method: 'GET',
      url: authorizeUrl(clientId, challenge, { scope: 'mcp group:default' }),
      headers: { cookie: session },
    });
    const again = /name="request" value="([^"]+)"/
      .exec(second.body)?.[1]
      ?.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    expect(again).toBeDefined();
    const csrf = /gatehouse_csrf=([^;]+)/.exec(session)?.[1] as string;
    const logout = await gw.gateway.app.inject({
      method: 'POST',
      url: '/auth/logout',
      headers: { cookie: session, 'x-gatehouse-csrf': csrf },
    });
    expect(logout.statusCode).toBe(200);
    const late = await form(
      '/authorize',
      { request: again as string, decision: 'approve' },
      { cookie: cookiesOf(second, session) },
    );
    expect(late.headers.location ?? '').not.toContain('code=');
    expect(late.body).toContain('name="token"');
    const tokens = await form('/token', {
      grant_type: 'authorization_code',
      code,
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
    });
    expect(tokens.statusCode).toBe(200);
    const grants = (await gw.request('GET', '/api/oauth/grants')).json().grants as Json[];
    expect(grants.find((g) => g.clientId === clientId)).toMatchObject({
      subject: `user:${lin.id}`,
      groups: ['default'],
    });
  });

  it('switches dynamic registration off by setting, and rate-limits /register', async () => {
    await gw.request('PATCH', '/api/settings', { body: { 'oauth.dynamicRegistration': false } });
    const off = await gw.request('POST', '/register', { token: null, body: { redirect_uris: [REDIRECT] } });
    expect([off.statusCode, off.json().error]).toEqual([403, 'registration_disabled']);
    expect(
      (await gw.request('GET', '/.well-known/oauth-authorization-server', { token: null })).json()
        .registration_endpoint,
    ).toBeUndefined();
    await gw.request('PATCH', '/api/settings', { body: { 'oauth.dynamicRegistration': true } });
    let status = 0;
    for (let i = 0; i < 25 && status !== 429; i++) {
      status = (await gw.request('POST', '/register', { token: null, body: { redirect_uris: [REDIRECT] } })).statusCode;
    }
    expect(status).toBe(429);
  });
});
