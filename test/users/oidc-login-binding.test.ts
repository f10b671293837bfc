/**
 * An OpenID Connect sign-in completes only in the browser that started it (login CSRF). Someone who starts a
 * sign-in, logs in at the provider as themself and stops before the gateway's callback must not be able to
 * hand that callback URL to someone else and have their browser signed in to Gatehouse as them. A real
 * provider (`oidc-provider`) on 127.0.0.1; each "browser" is a cookie jar that honours Path and Max-Age.
 *
 * Also: the small HTML pages of the upstream connect link and callback carry the dashboard's framing and
 * sniffing headers.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../src/web-serve.js';
import {
  HttpBrowser as Browser,
  type BrowserCookie,
  OIDC_CLIENT_ID as CLIENT_ID,
  OIDC_CLIENT_SECRET as CLIENT_SECRET,
  type Idp,
  startIdp,
} from '../fixtures/oidc-idp.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, sqliteTarget } from '../helpers/stores.js';

const sessionCookieOf = (response: Response) =>
  response.headers.getSetCookie().find((line) => line.startsWith('gatehouse_session=') && !/Max-Age=0/.test(line));

describeEachStore('an OIDC sign-in is bound to the browser that started it', (target) => {
  let idp: Idp;
  let gw: TestGateway;
  let base: string;
  beforeAll(async () => {
    idp = await startIdp();
    gw = await startTestGateway(target, {
      GATEHOUSE_OIDC_ISSUER: idp.issuer,
      GATEHOUSE_OIDC_CLIENT_ID: CLIENT_ID,
      GATEHOUSE_OIDC_CLIENT_SECRET: CLIENT_SECRET,
      GATEHOUSE_OIDC_PRIVATE_NETWORK: 'true',
    });
    base = await gw.listen();
    idp.configure(base);
  });
  afterAll(async () => {
    await gw?.close();
    await new Promise<void>((resolve) => idp?.server.close(() => resolve()));
  });

  const signedIn = async (browser: Browser) =>
    (await (await browser.open(`${base}/auth/session`)).json()) as { signedIn: boolean; principal?: { name: string } };
  const userCount = async () => (await gw.request('GET', '/api/users')).json().total as number;
  const sessionCount = async () =>
    Number(
      (
        await gw.gateway.store.db
          .selectFrom('user_sessions')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it("refuses the callback in a browser that did not start the sign-in (the starter's login is never pinned on it)", async () => {
    const attacker = new Browser();
    const callback = await attacker.signInUpToCallback(`${base}/auth/oidc/start?returnTo=%2Fsettings`, 'mallory');

    // The start bound the attacker's browser: a per-flow nonce cookie only `/auth/oidc` sees, for ten minutes.
    const state = callback.searchParams.get('state') as string;
    const name = `gatehouse_oidc_${createHash('sha256').update(state).digest('hex').slice(0, 16)}`;
    const bound = attacker.cookiesFor(new URL(base)).get(name);
    expect(bound?.path).toBe('/auth/oidc');
    expect(bound?.attributes).toBe('Path=/auth/oidc; Max-Age=600; HttpOnly; SameSite=Lax');
    const stored = await gw.gateway.store.db
      .selectFrom('oidc_logins')
      .select('browser_hash')
      .where('state_hash', '=', createHash('sha256').update(state).digest('hex'))
      .executeTakeFirstOrThrow();
    expect(stored.browser_hash).toBe(
      createHash('sha256')
        .update(bound?.value as string)
        .digest('hex'),
    );
    expect(stored.browser_hash).not.toBe(bound?.value);

    // The victim opens the link the attacker sent: no session, nobody provisioned, nobody signed in.
    const victim = new Browser();
    const replayed = await victim.open(callback);
    expect(replayed.status).toBe(302);
    expect(replayed.headers.get('location')).toBe('/?signin_error=oidc.browser_mismatch');
    expect(sessionCookieOf(replayed)).toBeUndefined();
    expect((await signedIn(victim)).signedIn).toBe(false);
    expect(await userCount()).toBe(0);
    expect(await sessionCount()).toBe(0);

    // The flow is used up by the refusal (single-use state): not even its starter completes it now.
    const late = await attacker.open(callback);
    expect(late.headers.get('location')).toBe('/?signin_error=oidc.failed');
    expect(sessionCookieOf(late)).toBeUndefined();
    expect(await userCount()).toBe(0);
  });

  it('refuses a browser that holds a cookie of that name with another value', async () => {
    const attacker = new Browser();
    const callback = await attacker.signInUpToCallback(`${base}/auth/oidc/start`, 'mallory');
    const victim = new Browser();
    const [name, cookie] = [...attacker.cookiesFor(new URL(base)).entries()].find(([n]) =>
      n.startsWith('gatehouse_oidc_'),
    ) as [string, BrowserCookie];
    victim.cookiesFor(new URL(base)).set(name, { ...cookie, value: `${cookie.value.slice(0, -2)}AA` });
    const answer = await victim.open(callback);
    expect(answer.headers.get('location')).toBe('/?signin_error=oidc.browser_mismatch');
    expect(sessionCookieOf(answer)).toBeUndefined();
    expect(await sessionCount()).toBe(0);
  });

  it('refuses a sign-in whose row has no binding (started by the previous release)', async () => {
    const browser = new Browser();
    const callback = await browser.signInUpToCallback(`${base}/auth/oidc/start`, 'ada');
    const state = callback.searchParams.get('state') as string;
    await gw.gateway.store.db
      .updateTable('oidc_logins')
      .set({ browser_hash: null })
      .where('state_hash', '=', createHash('sha256').update(state).digest('hex'))
      .execute();
    const answer = await browser.open(callback);
    expect(answer.headers.get('location')).toBe('/?signin_error=oidc.browser_mismatch');
    expect(sessionCookieOf(answer)).toBeUndefined();
  });

  it('signs in the browser that started it, clears its cookie; two sign-ins under way in one browser both complete', async () => {
    const browser = new Browser();
    const first = await browser.signInUpToCallback(`${base}/auth/oidc/start?returnTo=%2Fsettings`, 'ada');
    const second = await browser.signInUpToCallback(`${base}/auth/oidc/start`, 'ada');
    const flowCookies = () =>
      [...browser.cookiesFor(new URL(base)).keys()].filter((n) => n.startsWith('gatehouse_oidc_')).length;
    expect(flowCookies()).toBe(2);

    const done = await browser.open(second);
    expect(done.status).toBe(302);
    expect(done.headers.get('location')).toBe('/');
    expect(sessionCookieOf(done)).toMatch(/HttpOnly; Path=\/; SameSite=Lax/);
    // Its cookie is cleared on the same path; the other flow's stays.
    expect(done.headers.getSetCookie().find((l) => l.startsWith('gatehouse_oidc_'))).toMatch(
      /^gatehouse_oidc_[0-9a-f]{16}=; Path=\/auth\/oidc; Max-Age=0; HttpOnly; SameSite=Lax$/,
    );
    expect(flowCookies()).toBe(1);
    expect(await signedIn(browser)).toMatchObject({ signedIn: true, principal: { name: 'Person ada' } });

    const alsoDone = await browser.open(first);
    expect(alsoDone.headers.get('location')).toBe('/settings');
    expect(sessionCookieOf(alsoDone)).toBeDefined();
    expect(flowCookies()).toBe(0);
    expect(await userCount()).toBe(1);
  });
});

describe('the upstream connect link and callback pages', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
  });
  afterAll(async () => gw?.close());

  it('carry the dashboard CSP (frame-ancestors none), X-Frame-Options and nosniff', async () => {
    const pages = [
      await gw.request('GET', `/oauth/connect?flow=${'ab'.repeat(32)}`, { token: null }),
      await gw.request('GET', '/oauth/callback?state=never-issued&code=x', { token: null }),
    ];
    for (const answer of pages) {
      expect(answer.statusCode).toBeGreaterThanOrEqual(400);
      expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(answer.headers['content-security-policy']).toBe(DASHBOARD_CSP);
      expect(answer.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(answer.headers['x-frame-options']).toBe('DENY');
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
      expect(answer.headers['referrer-policy']).toBe('no-referrer');
      expect(answer.headers['cache-control']).toBe('no-store');
    }
  });
});
