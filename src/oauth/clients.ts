/**
 * OAuth clients: registered ones (RFC 7591 dynamic registration, or pre-registered by an admin) live in
 * the store; a client whose id is an https URL is described by its Client ID Metadata Document, fetched
 * through the egress guard (public addresses only, a deadline and a size cap) and cached.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { EgressGuard } from '../egress/index.js';
import { findGatehouseError } from '../errors.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import { oauthError } from './errors.js';
import { redirectUriProblem } from './redirects.js';

export interface OAuthClient {
  clientId: string;
  kind: 'dynamic' | 'static' | 'metadata';
  name: string;
  redirectUris: string[];
  /** A metadata-document client: the host its document was fetched from (what the consent screen shows). */
  documentHost?: string;
  clientUri?: string;
}

/** How long a fetched document is used without fetching it again (bounded by its Cache-Control). */
const DOCUMENT_TTL_MS = { default: 5 * 60_000, min: 60_000, max: 24 * 3_600_000 };
const DOCUMENT_DEADLINE_MS = 5_000;
/** The largest metadata document read (the draft suggests 5 KiB; a few more for long redirect lists). */
export const DOCUMENT_MAX_BYTES = 16 * 1024;
const CACHE_ENTRIES = 1_000;

export const clientMetadataSchema = z
  .object({
    redirect_uris: z.array(z.string().max(2_000)).min(1).max(20),
    client_name: z.string().trim().min(1).max(200).optional(),
    client_uri: z.string().url().max(2_000).optional(),
    logo_uri: z.string().url().max(2_000).optional(),
    token_endpoint_auth_method: z.string().max(100).optional(),
    grant_types: z.array(z.string().max(100)).max(10).optional(),
    response_types: z.array(z.string().max(100)).max(10).optional(),
    scope: z.string().max(2_000).optional(),
    software_id: z.string().max(200).optional(),
    software_version: z.string().max(200).optional(),
  })
  .passthrough();
export type ClientMetadata = z.infer<typeof clientMetadataSchema>;

/** Validates metadata a client gives about itself (registration or document); throws the RFC 7591 error. */
export function checkClientMetadata(metadata: unknown): ClientMetadata {
  const parsed = clientMetadataSchema.safeParse(metadata);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw oauthError('oauth.invalid_client_metadata', `${issue?.path.join('.') || 'metadata'}: ${issue?.message}`);
  }
  for (const uri of parsed.data.redirect_uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw oauthError('oauth.invalid_redirect_uri', problem);
  }
  const method = parsed.data.token_endpoint_auth_method;
  if (method !== undefined && method !== 'none') {
    throw oauthError(
      'oauth.invalid_client_metadata',
      'Only public clients are supported (token_endpoint_auth_method "none").',
    );
  }
  const grants = parsed.data.grant_types;
  if (grants?.some((g) => g !== 'authorization_code' && g !== 'refresh_token')) {
    throw oauthError(
      'oauth.invalid_client_metadata',
      'Only the authorization_code and refresh_token grants are supported.',
    );
  }
  if (parsed.data.response_types?.some((r) => r !== 'code')) {
    throw oauthError('oauth.invalid_client_metadata', 'Only response_type "code" is supported.');
  }
  return parsed.data;
}

/** Whether a client_id is a metadata-document URL (an https URL; http only where plain http is allowed). */
export function isDocumentClientId(clientId: string, allowHttp: boolean): boolean {
  return clientId.startsWith('https://') || (allowHttp && clientId.startsWith('http://'));
}

export class ClientDirectory {
  private readonly documents = new Map<string, { client: OAuthClient; until: number }>();

  constructor(
    private readonly store: Store,
    /** The guard documents are fetched through (public addresses only; a small response cap). */
    private readonly guard: EgressGuard,
    private readonly allowHttp: boolean,
    private readonly now: () => number = Date.now,
  ) {}

  /** The client of a client_id; throws `invalid_client` when there is none (or its document is unusable). */
  async find(clientId: string, documentsAllowed: boolean): Promise<OAuthClient> {
    if (clientId.length === 0 || clientId.length > 2_000)
      throw oauthError('oauth.invalid_client', 'Unknown client_id.');
    if (isDocumentClientId(clientId, this.allowHttp)) {
      if (!documentsAllowed) {
        throw oauthError(
          'oauth.invalid_client',
          'Client ID Metadata Documents are switched off (oauth.clientMetadataDocuments).',
        );
      }
      return this.document(clientId);
    }
    const row = await this.store.db
      .selectFrom('oauth_clients')
      .selectAll()
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    if (!row) throw oauthError('oauth.invalid_client', 'Unknown client_id.');
    const metadata = parseJson<ClientMetadata>(row.metadata, { redirect_uris: [] });
    return {
      clientId: row.client_id,
      kind: row.kind === 'static' ? 'static' : 'dynamic',
      name: row.name,
      redirectUris: parseJson<string[]>(row.redirect_uris, []),
      ...(metadata.client_uri ? { clientUri: metadata.client_uri } : {}),
    };
  }

  /** RFC 7591 registration (or an admin's): stores the client and answers its id. */
  async register(metadata: ClientMetadata, kind: 'dynamic' | 'static', createdBy?: string): Promise<OAuthClient> {
    const clientId = `${kind === 'static' ? 'gh_client_' : 'gh_dyn_'}${randomBytes(16).toString('base64url')}`;
    const name = metadata.client_name ?? 'Unnamed client';
    await this.store.db
      .insertInto('oauth_clients')
      .values({
        client_id: clientId,
        kind,
        name,
        redirect_uris: JSON.stringify(metadata.redirect_uris),
        metadata: JSON.stringify(metadata),
        created_at: nowIso(),
        created_by: createdBy ?? null,
      })
      .execute();
    return { clientId, kind, name, redirectUris: metadata.redirect_uris };
  }

  private async document(clientId: string): Promise<OAuthClient> {
    const held = this.documents.get(clientId);
    const cached = held && held.until > this.now() ? held : await this.storedDocument(clientId);
    if (cached && cached.until > this.now()) {
      this.remember(clientId, cached);
      return cached.client;
    }
    const url = documentUrl(clientId);
    let response: Response;
    let text: string;
    try {
      response = await this.guard.fetch(url, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(DOCUMENT_DEADLINE_MS),
      });
      text = await response.text();
    } catch (error) {
      const refused = findGatehouseError(error);
      const reason = refused?.details?.reason;
      const why =
        refused?.code === 'private_network_blocked'
          ? 'is on a private or loopback address'
          : reason === 'redirect_refused'
            ? 'answered with a redirect, which is not followed (serve it at its client_id URL)'
            : refused?.code === 'upstream_protocol_error' || refused?.code === 'payload_too_large'
              ? `is larger than ${DOCUMENT_MAX_BYTES} bytes or unreadable`
              : 'could not be fetched';
      throw oauthError('oauth.invalid_client', `The client metadata document ${why}.`);
    }
    if (response.status !== 200) {
      throw oauthError('oauth.invalid_client', `The client metadata document answered HTTP ${response.status}.`);
    }
    if (Buffer.byteLength(text) > DOCUMENT_MAX_BYTES) {
      throw oauthError(
        'oauth.invalid_client',
        `The client metadata document is larger than ${DOCUMENT_MAX_BYTES} bytes.`,
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw oauthError('oauth.invalid_client', 'The client metadata document is not JSON.');
    }
    if ((body as { client_id?: unknown })?.client_id !== clientId) {
      throw oauthError('oauth.invalid_client', 'The client metadata document names another client_id.');
    }
    let metadata: ClientMetadata;
    try {
      metadata = checkClientMetadata(body);
    } catch (error) {
      throw oauthError('oauth.invalid_client', `The client metadata document is invalid: ${(error as Error).message}`);
    }
    const client: OAuthClient = {
      clientId,
      kind: 'metadata',
      name: metadata.client_name ?? url.host,
      redirectUris: metadata.redirect_uris,
      documentHost: url.host,
      ...(metadata.client_uri ? { clientUri: metadata.client_uri } : {}),
    };
    const entry = { client, until: this.now() + ttlOf(response.headers.get('cache-control')) };
    this.remember(clientId, entry);
    await this.storeDocument(clientId, entry);
    return client;
  }

  private remember(clientId: string, entry: { client: OAuthClient; until: number }): void {
    if (!this.documents.has(clientId) && this.documents.size >= CACHE_ENTRIES)
      this.documents.delete(this.documents.keys().next().value as string);
    this.documents.set(clientId, entry);
  }

  /** The document another replica (or this one, earlier) fetched and checked, while it lasts. */
  private async storedDocument(clientId: string): Promise<{ client: OAuthClient; until: number } | undefined> {
    const row = await this.store.db
      .selectFrom('oauth_client_documents')
      .select(['client', 'until_ms'])
      .where('client_id', '=', clientId)
      .where('until_ms', '>', this.now())
      .executeTakeFirst();
    return row ? { client: JSON.parse(row.client) as OAuthClient, until: Number(row.until_ms) } : undefined;
  }

  /** Shares a checked document with every replica until it expires; expired ones are dropped on the way. */
  private async storeDocument(clientId: string, entry: { client: OAuthClient; until: number }): Promise<void> {
    const db = this.store.db;
    await db.deleteFrom('oauth_client_documents').where('until_ms', '<=', this.now()).execute();
    await db
      .insertInto('oauth_client_documents')
      .values({ client_id: clientId, client: JSON.stringify(entry.client), until_ms: entry.until })
      .onConflict((oc) =>
        oc.column('client_id').doUpdateSet({ client: JSON.stringify(entry.client), until_ms: entry.until }),
      )
      .execute();
  }
}

/** A metadata-document client_id: a URL with a path, no fragment, credentials or dot segments. */
function documentUrl(clientId: string): URL {
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    throw oauthError('oauth.invalid_client', 'The client_id is not a valid URL.');
  }
  if (
    url.hash ||
    url.username ||
    url.password ||
    url.pathname === '/' ||
    /(^|\/)\.\.?(\/|$)/.test(clientId.split('?')[0] ?? '') ||
    url.href !== clientId
  ) {
    throw oauthError('oauth.invalid_client', 'A metadata-document client_id must be a plain URL with a path.');
  }
  return url;
}

function ttlOf(cacheControl: string | null): number {
  if (cacheControl && /no-store|no-cache/.test(cacheControl)) return DOCUMENT_TTL_MS.min;
  const maxAge = cacheControl ? /max-age=(\d+)/.exec(cacheControl)?.[1] : undefined;
  const ms = maxAge === undefined ? DOCUMENT_TTL_MS.default : Number(maxAge) * 1000;
  return Math.min(DOCUMENT_TTL_MS.max, Math.max(DOCUMENT_TTL_MS.min, ms));
}
