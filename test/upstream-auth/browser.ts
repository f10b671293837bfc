/**
 * A person's browser against a test gateway, for the upstream OAuth tests: a cookie jar that signs in to
 * the dashboard with a token (`POST /auth/session`), opens Gatehouse's connect link (which binds the
 * browser to the flow and redirects to the authorization server), and brings the authorization server's
 * answer back to `/oauth/callback` with the cookies it holds. The authorization server's own pages are
 * played by the fixture's `consent` (no browser there).
 */
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { AuthServer } from '../fixtures/oauth.js';
import type { TestGateway } from '../helpers/gateway.js';

export class Browser {
  readonly jar = new Map<string, string>();

  constructor(private readonly gw: TestGateway) {}

  get cookie(): string {
    return [...this.jar].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /** A GET of a gateway URL (absolute or a path), no bearer header; Set-Cookie lands in the jar. */
  async get(url: string): Promise<LightMyRequestResponse> {
    const target = new URL(url, 'http://gateway.invalid');
    const answer = await this.gw.request('GET', `${target.pathname}${target.search}`, {
      token: null,
      headers: this.jar.size > 0 ? { cookie: this.cookie } : {},
    });
    this.keep(answer);
    return answer;
  }

  keep(answer: LightMyRequestResponse): void {
    const set = answer.headers['set-cookie'];
    for (const line of Array.isArray(set) ? set : set ? [set] : []) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (/max-age=0(;|$)/i.test(line) || value === '') this.jar.delete(name);
      else this.jar.set(name, value);
    }
  }
}

/** A browser signed in to the dashboard with `token` (its owner's session, or the ownerless token's own). */
export async function signedIn(gw: TestGateway, token: string): Promise<Browser> {
  const browser = new Browser(gw);
  const answer = await gw.request('POST', '/auth/session', { token: null, body: { token } });
  expect(answer.statusCode, answer.body).toBe(200);
  browser.keep(answer);
  expect(browser.jar.has('gatehouse_session')).toBe(true);
  return browser;
}

/**
 * The person's whole part: opens the connect link in `browser`, consents at the authorization server as
 * `account`, and brings the answer back in the same browser. Answers the callback's response.
 */
export async function connectIn(
  browser: Browser,
  as: Pick<AuthServer, 'consent'>,
  link: string,
  account = 'alice',
): Promise<LightMyRequestResponse> {
  const opened = await browser.get(link);
  expect(opened.statusCode, opened.body).toBe(302);
  const callback = await as.consent(String(opened.headers.location), account);
  expect(callback.pathname).toBe('/oauth/callback');
  return browser.get(callback.href);
}

/** A user with a token of `role` they own (member users get an agent token). */
export async function person(
  gw: TestGateway,
  name: string,
  options: { role?: string; tokenRole?: string; groups?: string[] } = {},
): Promise<{ id: string; token: string }> {
  const created = await gw.request('POST', '/api/users', {
    body: { name, role: options.role ?? 'member', ...(options.groups && { groups: options.groups }) },
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().id as string;
  const token = await gw.request('POST', '/api/tokens', {
    body: {
      role: options.tokenRole ?? 'agent',
      name: `${name}-${options.tokenRole ?? 'agent'}`,
      userId: id,
      ...(options.groups && { groups: options.groups }),
    },
  });
  expect(token.statusCode, token.body).toBe(201);
  return { id, token: token.json().token as string };
}

/** Installs an OAuth server `id` at `url` (loopback, so `privateNetwork`) with `auth`, and `extra` manifest fields. */
export async function installOAuth(
  gw: TestGateway,
  id: string,
  url: string,
  auth: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const installed = await gw.request('POST', '/api/mcp/install', {
    body: {
      manifest: {
        id,
        name: id,
        transport: 'streamable-http',
        url,
        privateNetwork: true,
        auth: { type: 'oauth', ...auth },
        ...extra,
      },
    },
  });
  expect(installed.statusCode, installed.body).toBe(201);
}

/** Installs a per-user OAuth server `id` at `url` (`installOAuth`). */
export function installPerUser(
  gw: TestGateway,
  id: string,
  url: string,
  extra: Record<string, unknown> = {},
): Promise<void> {
  return installOAuth(gw, id, url, { mode: 'per-user' }, extra);
}
