/**
 * OAuth in tests: an `OAuthClientProvider` for the SDK's own auth flow that keeps everything in
 * memory and records the authorization URL instead of opening a browser, and a headless consent:
 * the test loads the consent page and posts its form as a person (signed in with a token) would.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { OAuthClientProvider } from '@modelcontextprotocol/client';

type Stored<K extends keyof OAuthClientProvider> = OAuthClientProvider[K] extends (...args: never[]) => infer R
  ? Awaited<R>
  : never;

export class TestOAuthProvider implements OAuthClientProvider {
  info: Stored<'clientInformation'>;
  saved: Stored<'tokens'>;
  verifier: string | undefined;
  authorizationUrl: URL | undefined;

  constructor(
    readonly redirect: string,
    /** A metadata-document client: its URL is the client_id, nothing is registered. */
    readonly documentUrl?: string,
  ) {}

  get redirectUrl() {
    return this.redirect;
  }
  get clientMetadata() {
    return {
      client_name: 'Test agent',
      redirect_uris: [this.redirect],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.documentUrl ? { client_id: this.documentUrl } : this.info;
  }
  saveClientInformation(info: NonNullable<Stored<'clientInformation'>>) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: NonNullable<Stored<'tokens'>>) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    if (!this.verifier) throw new Error('no code verifier saved');
    return this.verifier;
  }
}

const unescapeHtml = (s: string) => s.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));

export interface ConsentAnswer {
  status: number;
  location: string | undefined;
  /** The code (or error) the redirect carries. */
  params: URLSearchParams | undefined;
  page: string | undefined;
  cookies: string;
}

/** Loads the consent page of `authorizationUrl` (following nothing) and returns its form's hidden request and cookies. */
export async function openConsent(authorizationUrl: URL | string, cookies = '') {
  const page = await fetch(authorizationUrl, { redirect: 'manual', headers: cookies ? { cookie: cookies } : {} });
  const set = page.headers.getSetCookie().map((c) => c.split(';')[0]);
  const jar = [cookies, ...set].filter(Boolean).join('; ');
  const html = await page.text();
  const request = /name="request" value="([^"]+)"/.exec(html)?.[1];
  return { status: page.status, html, request: request && unescapeHtml(request), cookies: jar, headers: page.headers };
}

/** Posts the consent form: `decision` by the person `token` signs in (none: the remembered sign-in cookie). */
export async function postConsent(
  base: string,
  request: string,
  cookies: string,
  decision: 'approve' | 'deny',
  token?: string,
): Promise<ConsentAnswer> {
  const form = new URLSearchParams({ request, decision, ...(token ? { token } : {}) });
  const answer = await fetch(`${base}/authorize`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookies, origin: new URL(base).origin },
    body: form,
  });
  const location = answer.headers.get('location') ?? undefined;
  const set = answer.headers.getSetCookie().map((c) => c.split(';')[0]);
  return {
    status: answer.status,
    location,
    params: location ? new URL(location).searchParams : undefined,
    page: answer.status === 302 ? undefined : await answer.text(),
    cookies: [cookies, ...set].filter(Boolean).join('; '),
  };
}

/** A whole headless consent: open, approve as `token`'s person, answer the callback's parameters (`code`, `state`, `iss`). */
export async function consent(base: string, authorizationUrl: URL | string, token: string): Promise<URLSearchParams> {
  const opened = await openConsent(authorizationUrl);
  if (!opened.request) throw new Error(`no consent form (HTTP ${opened.status}): ${opened.html.slice(0, 300)}`);
  const answer = await postConsent(base, opened.request, opened.cookies, 'approve', token);
  const code = answer.params?.get('code');
  if (!code) throw new Error(`consent gave no code (HTTP ${answer.status}): ${answer.location ?? answer.page}`);
  return answer.params as URLSearchParams;
}

/** A PKCE pair. */
export function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** POSTs form parameters (the token and revocation endpoints). */
export async function postForm(url: string, params: Record<string, string>) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params),
  });
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as Record<string, unknown>,
  };
}
