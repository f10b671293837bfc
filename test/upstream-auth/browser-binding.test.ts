/**
 * Grant injection / login CSRF on the upstream OAuth callback: the connect link is Gatehouse's own page,
 * which only a browser signed in to the dashboard as the flow's person passes (it sets an HttpOnly,
 * SameSite=Lax cookie on /oauth and sends that browser to the authorization server), and the callback
 * completes the flow only in that browser. Mallory sending his link (or the authorization server URL it
 * led to) to Victor, who signs in upstream, never stores Victor's upstream account as Mallory's grant.
 * A shared flow is bound to the operator who started it the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthServer, type ProtectedServer, startAuthServer, startProtectedServer } from '../fixtures/oauth.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { Browser, connectIn, person, signedIn } from './browser.js';

const PUBLIC_URL = 'http://127.0.0.1:7';

describe('upstream OAuth, the callback is bound to the browser of the person who started it', () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;

  beforeAll(async () => {
    as = await startAuthServer();
    mcp = await startProtectedServer(as.issuer);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    for (const [id, mode] of [
      ['team', 'per-user'],
      ['docs', 'shared'],
    ] as const) {
      const installed = await gw.request('POST', '/api/mcp/install', {
        body: {
          manifest: {
            id,
            name: id,
            transport: 'streamable-http',
            url: mcp.url,
            privateNetwork: true,
            auth: { type: 'oauth', mode },
          },
        },
      });
      expect(installed.statusCode).toBe(201);
    }
  });
  afterAll(async () => {
    await gw.close();
    await mcp.close();
    await as.close();
  });

  const grantsOf = (subject: string) => gw.gateway.upstreamAuth.grants.ofSubject(subject as `user:${string}`);
  const flowCookie = (answer: { headers: Record<string, unknown> }) =>
    [answer.headers['set-cookie']].flat().find((line) => String(line).startsWith('gatehouse_oauth_'));

  it("a forwarded link or authorization URL never makes a colleague's upstream account the starter's grant", async () => {
    const mallory = await person(gw, 'mallory');
    const victor = await person(gw, 'victor');
    const malloryBrowser = await signedIn(gw, mallory.token);
    const victorBrowser = await signedIn(gw, victor.token);
    const connect = async () => {
      const started = await gw.request('POST', '/api/users/me/grants/team/connect', { token: mallory.token });
      expect(started.statusCode).toBe(200);
      return String(started.json().authorizationUrl);
    };

    // The link handed out is Gatehouse's page naming the flow; the state stays out of it.
    const link = await connect();
    const parsed = new URL(link);
    expect(`${parsed.origin}${parsed.pathname}`).toBe(`${PUBLIC_URL}/oauth/connect`);
    expect([...parsed.searchParams.keys()]).toEqual(['flow']);

    // Not signed in: a page saying to sign in, no redirect, no cookie.
    const anonymous = await new Browser(gw).get(link);
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['content-type']).toContain('text/html');
    expect(anonymous.body).toContain('Sign in to the Gatehouse dashboard');
    expect(anonymous.headers.location).toBeUndefined();
    expect(flowCookie(anonymous)).toBeUndefined();
    // A bearer token proves no browser: the same.
    const bearer = await gw.request('GET', `${parsed.pathname}${parsed.search}`, { token: mallory.token });
    expect(bearer.statusCode).toBe(401);

    // Victor, signed in as himself, opens Mallory's link: refused, nothing bound.
    const forwarded = await victorBrowser.get(link);
    expect(forwarded.statusCode).toBe(403);
    expect(forwarded.headers.location).toBeUndefined();
    expect(flowCookie(forwarded)).toBeUndefined();

    // Mallory opens it: his browser is bound (an HttpOnly, SameSite=Lax cookie on /oauth), then sent upstream.
    const opened = await malloryBrowser.get(link);
    expect(opened.statusCode).toBe(302);
    const authorizationUrl = new URL(String(opened.headers.location));
    expect(authorizationUrl.origin).toBe(as.issuer);
    expect(authorizationUrl.searchParams.get('state')).toBeTruthy();
    const cookie = String(flowCookie(opened));
    expect(cookie).toMatch(/; Path=\/oauth;/);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Lax');

    // Mallory forwards the authorization URL itself: Victor signs in upstream, and his browser comes back
    // without Mallory's cookie. Refused; the flow is spent, not completed.
    const victorsAnswer = await as.consent(authorizationUrl.href, 'victor-upstream');
    const injected = await victorBrowser.get(victorsAnswer.href);
    expect(injected.statusCode).toBe(403);
    expect(injected.body).toContain('oauth.browser_mismatch');
    expect(await grantsOf(`user:${mallory.id}`)).toEqual([]);
    expect(await grantsOf(`user:${victor.id}`)).toEqual([]);
    expect((await malloryBrowser.get(victorsAnswer.href)).statusCode).toBe(400); // used up

    // A cookie of the right name with another value is no better.
    const again = await connect();
    const bound = await malloryBrowser.get(again);
    expect(bound.statusCode).toBe(302);
    const forged = new Browser(gw);
    for (const [name] of malloryBrowser.jar)
      if (name.startsWith('gatehouse_oauth_')) forged.jar.set(name, 'x'.repeat(43));
    const forgedAnswer = await forged.get((await as.consent(String(bound.headers.location), 'victor-upstream')).href);
    expect(forgedAnswer.statusCode).toBe(403);
    expect(forgedAnswer.body).toContain('oauth.browser_mismatch');
    expect(await grantsOf(`user:${mallory.id}`)).toEqual([]);

    // Mallory's own round trip in his own browser connects his own upstream account; its cookie is cleared.
    const before = [...malloryBrowser.jar.keys()];
    expect((await connectIn(malloryBrowser, as, await connect(), 'mallory-upstream')).statusCode).toBe(200);
    expect((await grantsOf(`user:${mallory.id}`)).map((g) => g.serverId)).toEqual(['team']);
    expect([...malloryBrowser.jar.keys()]).toEqual(before);
    expect(await grantsOf(`user:${victor.id}`)).toEqual([]);
  });

  it('a shared flow opens only in the browser of the operator who started it', async () => {
    const otherAdmin = await gw.request('POST', '/api/tokens', { body: { role: 'admin', name: 'other-admin' } });
    expect(otherAdmin.statusCode).toBe(201);
    const starter = await signedIn(gw, TEST_ADMIN_TOKEN);
    const other = await signedIn(gw, otherAdmin.json().token);
    const connect = async () =>
      String((await gw.request('POST', '/api/mcp/servers/docs/auth/connect')).json().authorizationUrl);

    const link = await connect();
    expect((await other.get(link)).statusCode).toBe(403);
    const opened = await starter.get(link);
    expect(opened.statusCode).toBe(302);
    // The answer delivered in another browser (no cookie) is refused; the shared grant stays unconnected.
    const answer = await as.consent(String(opened.headers.location), 'someone-else');
    expect((await other.get(answer.href)).statusCode).toBe(403);
    expect((await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth.state).toBe('not_connected');

    expect((await connectIn(starter, as, await connect(), 'ops-upstream')).statusCode).toBe(200);
    expect((await gw.request('GET', '/api/mcp/servers/docs/auth')).json().auth.state).toBe('connected');
  });
});
