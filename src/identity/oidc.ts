/**
 * Sign-in with an external OpenID Connect provider: authorization code + PKCE S256, state and nonce
 * checked, the ID token verified with `jose` against the provider's JWKS. Discovery, JWKS and the token
 * exchange go through the egress guard's fetch with a deadline and a size cap; discovery and keys are
 * cached for a few minutes (keys re-read once when a token names an unknown key, for rotation).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { createLocalJWKSet, JSONWebKeySet, JWTPayload } from 'jose';
import { GatehouseError } from '../errors.js';
import { readCapped } from '../upstream-auth/fetch.js';
import { jose } from './jose.js';
import type { UserRole } from './users.js';

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret?: string | undefined;
  roleMap: Readonly<Record<string, { role?: UserRole | undefined; groups?: readonly string[] | undefined }>>;
  groupsClaim: string;
}

export interface OidcDiscovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
}

const CACHE_MS = 5 * 60 * 1000;
const TIMEOUT_MS = 10_000;
const MAX_DOCUMENT_BYTES = 256 * 1024;
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export const pkceChallenge = (verifier: string): string => createHash('sha256').update(verifier).digest('base64url');
export const randomSecret = (): string => randomBytes(32).toString('base64url');

function unreachable(message: string, reason: string): GatehouseError {
  return new GatehouseError('oidc.provider_unreachable', message, { reason });
}

export class OidcClient {
  private discovery: { at: number; value: OidcDiscovery } | undefined;
  private keys: { at: number; set: ReturnType<typeof createLocalJWKSet> } | undefined;

  constructor(
    readonly settings: OidcSettings,
    private readonly fetch: FetchLike,
  ) {}

  /** GET (or POST a form) through the guard; the answer must be JSON within the size bound. */
  private async json(url: string, init: RequestInit = {}): Promise<Record<string, unknown>> {
    let response: Response;
    const deadline = AbortSignal.timeout(TIMEOUT_MS);
    try {
      response = await this.fetch(url, {
        ...init,
        headers: { accept: 'application/json', ...(init.headers as Record<string, string> | undefined) },
        signal: deadline,
        redirect: 'error',
      });
    } catch (error) {
      const known = error instanceof GatehouseError ? `: ${error.message}` : '.';
      throw unreachable(`${new URL(url).origin} could not be reached${known}`, 'unreachable');
    }
    let text: string;
    try {
      // Refused as the cap is passed, the rest never read (not buffered whole, then measured).
      const raw = await readCapped(response, MAX_DOCUMENT_BYTES, deadline);
      text = raw ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8') : '';
    } catch {
      throw unreachable(`${new URL(url).origin} answered something unreadable or too large.`, 'response');
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw unreachable(`${new URL(url).origin} did not answer JSON (HTTP ${response.status}).`, 'not_json');
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw unreachable(`${new URL(url).origin} answered JSON that is not an object.`, 'shape');
    }
    if (!response.ok) {
      const code = (parsed as { error?: unknown }).error;
      throw new GatehouseError(
        'oidc.failed',
        `The provider refused: ${typeof code === 'string' ? code : response.status}.`,
        {
          reason: typeof code === 'string' ? code : `http_${response.status}`,
        },
      );
    }
    return parsed as Record<string, unknown>;
  }

  /** The provider's discovery document; its `issuer` must be exactly the configured one. */
  async discover(): Promise<OidcDiscovery> {
    if (this.discovery && Date.now() - this.discovery.at < CACHE_MS) return this.discovery.value;
    const doc = await this.json(`${this.settings.issuer}/.well-known/openid-configuration`);
    for (const field of ['issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
      if (typeof doc[field] !== 'string') throw unreachable(`The discovery document has no ${field}.`, 'shape');
    }
    const value = doc as unknown as OidcDiscovery;
    if (value.issuer.replace(/\/+$/, '') !== this.settings.issuer) {
      throw unreachable(`The discovery document names issuer ${value.issuer}, not ${this.settings.issuer}.`, 'issuer');
    }
    this.discovery = { at: Date.now(), value };
    return value;
  }

  /** The provider's keys as a jose key set; `fresh` re-reads them (a key rotated in since the last read). */
  async keySet(fresh = false): Promise<{ set: ReturnType<typeof createLocalJWKSet>; count: number }> {
    if (!fresh && this.keys && Date.now() - this.keys.at < CACHE_MS) return { set: this.keys.set, count: -1 };
    const { jwks_uri } = await this.discover();
    const doc = await this.json(jwks_uri);
    if (!Array.isArray(doc.keys)) throw unreachable('The JWKS document has no keys array.', 'shape');
    let set: ReturnType<typeof createLocalJWKSet>;
    try {
      set = (await jose()).createLocalJWKSet(doc as unknown as JSONWebKeySet);
    } catch {
      throw unreachable('The JWKS document could not be parsed.', 'jwks');
    }
    this.keys = { at: Date.now(), set };
    return { set, count: doc.keys.length };
  }

  async authorizationUrl(input: {
    state: string;
    nonce: string;
    verifier: string;
    redirectUri: string;
  }): Promise<string> {
    const { authorization_endpoint } = await this.discover();
    const url = new URL(authorization_endpoint);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', this.settings.clientId);
    url.searchParams.set('redirect_uri', input.redirectUri);
    url.searchParams.set('scope', 'openid profile email');
    url.searchParams.set('state', input.state);
    url.searchParams.set('nonce', input.nonce);
    url.searchParams.set('code_challenge', pkceChallenge(input.verifier));
    url.searchParams.set('code_challenge_method', 'S256');
    return url.toString();
  }

  /** Trades the code for tokens and verifies the ID token (signature, issuer, audience, expiry, nonce). */
  async signIn(input: { code: string; verifier: string; nonce: string; redirectUri: string }): Promise<JWTPayload> {
    const { token_endpoint } = await this.discover();
    const form = new URLSearchParams({
      grant_type: 'authorization_code',
      code: input.code,
      redirect_uri: input.redirectUri,
      code_verifier: input.verifier,
    });
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (this.settings.clientSecret) {
      const basic = `${encodeURIComponent(this.settings.clientId)}:${encodeURIComponent(this.settings.clientSecret)}`;
      headers.authorization = `Basic ${Buffer.from(basic).toString('base64')}`;
    } else {
      form.set('client_id', this.settings.clientId);
    }
    const answer = await this.json(token_endpoint, { method: 'POST', headers, body: form.toString() });
    if (typeof answer.id_token !== 'string') {
      throw new GatehouseError('oidc.failed', 'The provider answered no id_token.', { reason: 'no_id_token' });
    }
    const claims = await this.verify(answer.id_token);
    if (claims.nonce !== input.nonce) {
      throw new GatehouseError('oidc.failed', 'The ID token’s nonce does not match this sign-in.', { reason: 'nonce' });
    }
    if (typeof claims.sub !== 'string' || claims.sub.length === 0) {
      throw new GatehouseError('oidc.failed', 'The ID token has no subject.', { reason: 'sub' });
    }
    return claims;
  }

  private async verify(idToken: string, retried = false): Promise<JWTPayload> {
    const { set } = await this.keySet(retried);
    try {
      const { jwtVerify } = await jose();
      const { payload } = await jwtVerify(idToken, set, {
        issuer: this.settings.issuer,
        audience: this.settings.clientId,
        algorithms: ALGORITHMS,
        clockTolerance: 30,
      });
      return payload;
    } catch (error) {
      if (!retried && error instanceof (await jose()).errors.JWKSNoMatchingKey) return this.verify(idToken, true);
      const code = (error as { code?: string }).code ?? 'invalid';
      throw new GatehouseError('oidc.failed', 'The ID token did not verify.', { reason: code });
    }
  }
}

const RANK: Record<UserRole, number> = { member: 0, operator: 1, admin: 2 };

/** The provider's groups claim through the role map: the highest mapped role (default member), the union of groups. */
export function mapClaims(
  claims: JWTPayload,
  settings: Pick<OidcSettings, 'roleMap' | 'groupsClaim'>,
): { role: UserRole; groups: string[] } {
  const raw = claims[settings.groupsClaim];
  const theirs = Array.isArray(raw) ? raw.filter((g): g is string => typeof g === 'string') : [];
  let role: UserRole = 'member';
  const groups = new Set<string>();
  for (const group of theirs) {
    const mapped = settings.roleMap[group];
    if (!mapped) continue;
    if (mapped.role && RANK[mapped.role] > RANK[role]) role = mapped.role;
    for (const g of mapped.groups ?? []) groups.add(g);
  }
  return { role, groups: [...groups].sort() };
}
