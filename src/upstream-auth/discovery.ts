/**
 * Discovery as a client: the upstream's 401 and its `WWW-Authenticate` → RFC 9728 protected-resource
 * metadata → RFC 8414 / OpenID Connect authorization-server metadata (its `issuer` checked against
 * the address it was found at, by the SDK). Every URL goes through the egress guard (bounded fetch);
 * every endpoint the metadata names is checked before use, so a document pointing at a private or
 * metadata-service address, or an authorization endpoint that is not https, is refused. Gatehouse
 * never opens or executes anything a document names: the authorization URL goes to a person.
 */
import {
  type AuthorizationServerMetadata,
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  discoverOAuthServerInfo,
  extractWWWAuthenticateParams,
  type FetchLike,
  LATEST_PROTOCOL_VERSION,
  type OAuthProtectedResourceMetadata,
} from '@modelcontextprotocol/client';
import { findGatehouseError, type GatehouseError } from '../errors.js';
import { refused } from './fetch.js';

export interface DiscoveryPorts {
  /** Bounded, egress-guarded fetch (the server's policy: public, or private with `privateNetwork`). */
  fetch: FetchLike;
  /** The guard's address and scheme check, for URLs Gatehouse hands on without fetching. */
  check(url: string | URL): Promise<URL>;
  privateNetwork: boolean;
}

export interface Discovered {
  issuer: string;
  /** The authorization server's metadata, its endpoints checked. */
  metadata: AuthorizationServerMetadata;
  /**
   * The RFC 8707 `resource`: exactly as the upstream's protected-resource metadata names it (its origin, say),
   * else the upstream's URL.
   */
  resource: string;
  /** Scopes the upstream advertises (protected-resource metadata), or its 401 asked for. */
  scopes: string[];
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\]|localhost)$/i;

/** Runs discovery for the upstream at `serverUrl`. Failures are `oauth.metadata_refused` (or the guard's own code). */
export async function discover(serverUrl: string, ports: DiscoveryPorts): Promise<Discovered> {
  const challenge = await probe(serverUrl, ports.fetch);
  if (challenge.resourceMetadataUrl) await ports.check(challenge.resourceMetadataUrl);
  let resourceMetadata: OAuthProtectedResourceMetadata | undefined;
  let metadata: AuthorizationServerMetadata | undefined;
  try {
    if (challenge.resourceMetadataUrl) {
      // The upstream named its metadata: that document or nothing (no fallback past a refused one).
      resourceMetadata = await discoverOAuthProtectedResourceMetadata(
        serverUrl,
        { resourceMetadataUrl: challenge.resourceMetadataUrl },
        ports.fetch,
      );
      const issuer = resourceMetadata.authorization_servers?.[0];
      if (!issuer) throw refused('the protected-resource metadata names no authorization server');
      metadata = await discoverAuthorizationServerMetadata(issuer, { fetchFn: ports.fetch });
    } else {
      // RFC 9728 well-known locations, else the upstream's origin as its own authorization server.
      const info = await discoverOAuthServerInfo(serverUrl, { fetchFn: ports.fetch });
      resourceMetadata = info.resourceMetadata;
      metadata = info.authorizationServerMetadata;
    }
  } catch (error) {
    throw asRefusal(error, 'discovery failed');
  }
  if (resourceMetadata?.resource !== undefined && !sameResource(resourceMetadata.resource, serverUrl)) {
    throw refused('the protected-resource metadata names another resource');
  }
  if (!metadata) throw refused('no authorization server metadata was found');
  await checkEndpoints(metadata, ports);
  const scopes = [
    ...(challenge.scope?.split(' ').filter(Boolean) ?? []),
    ...(resourceMetadata?.scopes_supported ?? []),
  ];
  return {
    issuer: metadata.issuer,
    metadata,
    resource: resourceMetadata?.resource ?? serverUrl,
    scopes: [...new Set(scopes)],
  };
}

/** An unauthenticated request to the upstream: its 401's `WWW-Authenticate` says where the metadata is. */
async function probe(serverUrl: string, fetch: FetchLike): Promise<ReturnType<typeof extractWWWAuthenticateParams>> {
  const response = await fetch(serverUrl, {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'ping' }),
  });
  if (response.status !== 401 && response.status !== 403) return {};
  try {
    return extractWWWAuthenticateParams(response);
  } catch {
    return {};
  }
}

function sameResource(resource: string, serverUrl: string): boolean {
  try {
    const a = new URL(resource);
    const b = new URL(serverUrl);
    // RFC 9728 §3.3: the resource must be the one asked about; a path prefix of it is the same server.
    return a.origin === b.origin && b.pathname.startsWith(a.pathname.replace(/\/$/, ''));
  } catch {
    return false;
  }
}

/**
 * Every endpoint Gatehouse uses: the ones it fetches must pass the guard (they are fetched through
 * it too); the authorization endpoint, which only a person's browser opens, must be https — plain
 * http only on loopback for a server an admin marked `privateNetwork` — and pass the guard's address
 * rules, so a sign-in link never points at an internal address.
 */
async function checkEndpoints(metadata: AuthorizationServerMetadata, ports: DiscoveryPorts): Promise<void> {
  const named: Array<[string, string | undefined]> = [
    ['authorization_endpoint', metadata.authorization_endpoint],
    ['token_endpoint', metadata.token_endpoint],
    ['registration_endpoint', metadata.registration_endpoint],
    ['revocation_endpoint', (metadata as { revocation_endpoint?: string }).revocation_endpoint],
  ];
  if (!metadata.token_endpoint) throw refused('the metadata names no token_endpoint');
  for (const [field, value] of named) {
    if (value === undefined) continue;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw refused(`${field} is not a URL`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw refused(`${field} must be https`);
    if (url.username || url.password) throw refused(`${field} must not carry credentials`);
    if (field === 'authorization_endpoint' && url.protocol === 'http:') {
      if (!ports.privateNetwork || !LOOPBACK.test(url.hostname)) {
        throw refused('authorization_endpoint must be https (plain http only on loopback with privateNetwork)');
      }
    }
    try {
      await ports.check(url);
    } catch (error) {
      const code = findGatehouseError(error)?.code ?? 'refused';
      throw refused(`${field} points at an address Gatehouse may not reach (${code})`, error);
    }
  }
}

/** A failure of the SDK's discovery, as Gatehouse reports it: the guard's own refusal kept as the cause. */
export function asRefusal(error: unknown, what: string): GatehouseError {
  const inner = findGatehouseError(error);
  if (inner?.code === 'oauth.metadata_refused') return inner;
  // The SDK's own schema refused a document (a non-URL endpoint, a javascript: or file: scheme, …).
  if (error instanceof Error && error.name === 'ZodError')
    return refused(`${what}: the metadata document is invalid`, error);
  const reason = inner?.code ?? (error instanceof Error ? (error.name === 'Error' ? 'error' : error.name) : 'error');
  return refused(`${what} (${reason})`, error);
}
