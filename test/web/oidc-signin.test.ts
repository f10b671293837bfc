/**
 * The dashboard's sign-in through a real OpenID provider (`oidc-provider`, a certified implementation,
 * on 127.0.0.1) in Chromium: the "Sign in with …" button, the provider's login and consent, the
 * callback (code + PKCE, ID token verified against the provider's JWKS), a user provisioned with the
 * role its groups map to, the session cookie's flags, and logout revoking the session.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  OIDC_CLIENT_ID as CLIENT_ID,
  OIDC_CLIENT_SECRET as CLIENT_SECRET,
  HttpBrowser,
  type Idp,
  startIdp,
} from '../fixtures/oidc-idp.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { CHROMIUM_AVAILABLE, launchBrowser, openPage } from './harness.js';

/** Every account is Ada, in the provider's admins group (mapped) and one the gateway does not map. */
const ADA = (sub: string) => ({ name: `Ada ${sub}`, groups: ['idp-admins', 'unmapped'] });

const gatewayEnv = (issuer: string) => ({
  GATEHOUSE_OIDC_ISSUER: issuer,
  GATEHOUSE_OIDC_CLIENT_ID: CLIENT_ID,
  GATEHOUSE_OIDC_CLIENT_SECRET: CLIENT_SECRET,
  GATEHOUSE_OIDC_ROLE_MAP: JSON.stringify({ 'idp-admins': { role: 'admin', groups: ['platform'] } }),
  GATEHOUSE_OIDC_PRIVATE_NETWORK: 'true',
});

/** A sign-in over plain HTTP (`HttpBrowser`) up to the gateway's callback, and the callback's answer. */
async function signInOverHttp(start: string, login: string): Promise<{ location: string; setCookie: string[] }> {
  const browser = new HttpBrowser();
  const answer = await browser.open(await browser.signInUpToCallback(start, login));
  return { location: answer.headers.get('location') ?? '', setCookie: answer.headers.getSetCookie() };
}

describe('sign in with OpenID Connect (HTTP)', { timeout: 120_000 }, () => {
  let idp: Idp;
  let gw: TestGateway;
  let base: string;
  beforeAll(async () => {
    idp = await startIdp(ADA);
    gw = await startTestGateway(sqliteTarget, gatewayEnv(idp.issuer));
    base = await gw.listen();
    idp.configure(base);
  });
  afterAll(async () => {
    await gw?.close();
    await new Promise<void>((resolve) => idp?.server.close(() => resolve()));
  });

  it('provisions the user on first sign-in with the mapped role and opens a session; a second sign-in finds them', async () => {
    const info = (await gw.request('GET', '/auth/session', { token: null })).json();
    expect(info).toEqual({ signedIn: false, oidc: { issuer: idp.issuer, start: '/auth/oidc/start' } });

    const first = await signInOverHttp(`${base}/auth/oidc/start?returnTo=%2F%23activity`, 'grace');
    expect(first.location).toBe('/#activity');
    const secret = /gatehouse_session=([^;]+)/.exec(first.setCookie.join('\n'))?.[1] as string;
    expect(first.setCookie.find((c) => c.startsWith('gatehouse_session='))).toMatch(/HttpOnly; Path=\/; SameSite=Lax/);
    const me = (
      await gw.request('GET', '/api/users/me', { token: null, headers: { cookie: `gatehouse_session=${secret}` } })
    ).json();
    expect(me.principal).toMatchObject({ name: 'Ada grace', role: 'admin', groups: ['platform'] });
    expect(me.user).toMatchObject({ name: 'Ada grace', email: 'grace@example.com', role: 'admin', source: 'oidc' });

    const again = await signInOverHttp(`${base}/auth/oidc/start`, 'grace');
    expect(again.location).toBe('/');
    expect((await gw.request('GET', '/api/users')).json().total).toBe(1);

    // With a role map the provider decides role and groups at every sign-in: an edit it would undo is refused.
    for (const body of [{ role: 'member' }, { groups: ['other'] }]) {
      const edit = await gw.request('PATCH', `/api/users/${me.user.id}`, { body });
      expect(edit.statusCode).toBe(409);
      expect(edit.json().error.code).toBe('user.provider_managed');
    }
    expect((await gw.request('PATCH', `/api/users/${me.user.id}`, { body: { name: 'Ada G.' } })).statusCode).toBe(200);

    // Disabled at Gatehouse: the provider still vouches for them, the gateway lets nobody in.
    await gw.request('PATCH', `/api/users/${me.user.id}`, { body: { disabled: true } });
    const refused = await signInOverHttp(`${base}/auth/oidc/start`, 'grace');
    expect(refused.location).toBe('/?signin_error=user.disabled');
    expect(refused.setCookie.some((c) => c.startsWith('gatehouse_session='))).toBe(false);
  });

  it('refuses an unknown or replayed state, a foreign returnTo, and says when OIDC is not configured', async () => {
    const replay = await gw.request('GET', '/auth/oidc/callback?code=x&state=never-issued', { token: null });
    expect(replay.statusCode).toBe(302);
    expect(replay.headers.location).toBe('/?signin_error=oidc.failed');
    const open = await gw.request('GET', '/auth/oidc/start?returnTo=https://evil.example/', { token: null });
    expect(open.statusCode).toBe(400);
    const protocolRelative = await gw.request('GET', '/auth/oidc/start?returnTo=//evil.example/', { token: null });
    expect(protocolRelative.statusCode).toBe(400);
    const start = await gw.request('GET', '/auth/oidc/start', { token: null });
    expect(start.statusCode).toBe(302);
    const authorize = new URL(start.headers.location as string);
    expect(authorize.origin).toBe(idp.issuer);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${base}/auth/oidc/callback`);
    expect(authorize.searchParams.get('nonce')).toBeTruthy();

    const plain = await startTestGateway(sqliteTarget);
    try {
      const answer = await plain.request('GET', '/auth/oidc/start', { token: null });
      expect(answer.statusCode).toBe(404);
      expect(answer.json().error.code).toBe('oidc.not_configured');
    } finally {
      await plain.close();
    }
  });
});

describe.skipIf(!CHROMIUM_AVAILABLE)('dashboard: sign in with OpenID Connect', { timeout: 180_000 }, () => {
  let idp: Idp['server'];
  let issuer: string;
  let gw: TestGateway;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    const started = await startIdp(ADA);
    idp = started.server;
    issuer = started.issuer;
    gw = await startTestGateway(sqliteTarget, gatewayEnv(issuer));
    base = await gw.listen();
    started.configure(base);

    browser = await launchBrowser();
    ({ context, page } = await openPage(browser, { width: 1280, height: 900 }, browserErrors));
  });

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await gw?.close();
    await new Promise<void>((resolve) => idp?.close(() => resolve()));
  });

  it('signs in through the provider, provisions the user with the mapped role, and signs out', async () => {
    await page.goto(base);
    const button = page.getByRole('link', { name: `Sign in with ${new URL(issuer).host}` });
    await button.waitFor();
    await button.click();

    // The provider's own (development) login and consent pages.
    await page.waitForURL((url) => url.origin === issuer);
    await page.locator('input[name="login"]').fill('ada');
    await page.locator('input[name="password"]').fill('any');
    await page.locator('button[type="submit"]').click();
    await page.locator('button[type="submit"]').click(); // consent: "Continue"

    // Back on the gateway, signed in as the provisioned user, on the landing page.
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page.getByText('Ada ada (admin)').waitFor();

    const cookies = await context.cookies(base);
    const session = cookies.find((c) => c.name === 'gatehouse_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: false, path: '/' });
    expect(cookies.find((c) => c.name === 'gatehouse_csrf')?.httpOnly).toBe(false);

    const users = (await gw.request('GET', '/api/users')).json().users;
    expect(users).toEqual([
      expect.objectContaining({
        name: 'Ada ada',
        email: 'ada@example.com',
        role: 'admin',
        groups: ['platform'],
        source: 'oidc',
        disabled: false,
      }),
    ]);
    expect(users[0].lastSeenAt).not.toBeNull();

    // A state change by cookie from the dashboard carries the CSRF header: an approval-free write works.
    const secret = session?.value as string;
    const refused = await gw.request('POST', '/api/users', {
      token: null,
      body: { name: 'from-elsewhere' },
      headers: { cookie: `gatehouse_session=${secret}` },
    });
    expect(refused.json().error.code).toBe('auth.csrf_failed');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('link', { name: `Sign in with ${new URL(issuer).host}` }).waitFor();
    // The session is revoked in the store, not only forgotten by the browser.
    const after = await gw.request('GET', '/api/users/me', {
      token: null,
      headers: { cookie: `gatehouse_session=${secret}` },
    });
    expect(after.statusCode).toBe(401);

    // A replayed callback (state already used) signs nobody in.
    const replay = await gw.request('GET', '/auth/oidc/callback?code=x&state=used-or-unknown', { token: null });
    expect(replay.statusCode).toBe(302);
    expect(replay.headers.location).toBe('/?signin_error=oidc.failed');
    expect(browserErrors).toEqual([]);
  });
});
