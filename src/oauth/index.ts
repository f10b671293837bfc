/**
 * Gatehouse as an OAuth 2.1 authorization server and protected resource for its MCP endpoints,
 * assembled: signing keys, client directory (with its own egress guard for metadata documents),
 * the authorization server, the access-token authenticator, the endpoints and the REST routes.
 */
import type { FastifyInstance } from 'fastify';
import { revokePrincipal } from '../approvals/principals.js';
import type { ApprovalQueue } from '../approvals/queue.js';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { type Config, publicBaseUrl } from '../config.js';
import { createEgressGuard, type Resolver } from '../egress/index.js';
import { OAUTH_ACCESS_TOKEN, OAUTH_FAMILY } from '../identity/ended-access.js';
import { oauthAuthenticator } from '../identity/index.js';
import type { SealKey } from '../secrets/seal.js';
import type { SettingsService } from '../settings/service.js';
import type { Store } from '../store/db.js';
import type { TokenStore } from '../store/tokens.js';
import { oauthAuditor } from './audit.js';
import { ClientDirectory, DOCUMENT_MAX_BYTES } from './clients.js';
import { SigningKeys } from './keys.js';
import { EndpointLimiter } from './rate.js';
import { mcpChallenge, oauthPlugin, oauthRestRoutes } from './routes.js';
import { AuthorizationServer } from './server.js';

export interface OAuthParts {
  config: Config;
  store: Store;
  sealKey: SealKey;
  settings: SettingsService;
  audit: AuditLog;
  tokens: TokenStore;
  /** Where revocations are announced, so every replica ends what the revoked credential holds open. */
  events: Pick<EventHub, 'publish'>;
  resolver?: Resolver | undefined;
  /** The port actually bound (differs from the setting when that is 0), read per request. */
  port(): number;
}

export function createOAuth(parts: OAuthParts) {
  const { config, store, sealKey, settings, tokens, events } = parts;
  const base = () => publicBaseUrl(config, parts.port());
  const audit = oauthAuditor(parts.audit);
  const keys = new SigningKeys(store, sealKey);
  // Metadata documents are small and fetched from the public internet only (the test seam aside).
  const guard = createEgressGuard({
    policy: config.allowPrivateNetworks ? 'any' : 'public',
    allowHttp: config.allowHttp,
    maxResponseBytes: DOCUMENT_MAX_BYTES,
    connectTimeoutMs: 5_000,
    ...(config.nodeEnv === 'test' ? { testPublicAddresses: config.testPublicAddresses } : {}),
    ...(parts.resolver ? { resolver: parts.resolver } : {}),
  });
  const clients = new ClientDirectory(store, guard, config.allowHttp || config.allowPrivateNetworks);
  const server = new AuthorizationServer({
    store,
    sealKey,
    keys,
    clients,
    settings,
    audit,
    base,
    revoked: async (ended) => {
      await store.changed('tokens');
      if (!ended) return;
      // Its streams end on every replica: the grant's other tokens and families keep theirs.
      await events.publish(
        'token.changed',
        'family' in ended
          ? { id: ended.family, change: 'revoked', kind: OAUTH_FAMILY }
          : { id: ended.accessToken, change: 'revoked', kind: OAUTH_ACCESS_TOKEN },
      );
    },
  });
  const verifier = oauthAuthenticator({
    store,
    keys,
    base,
    onRefused: (reason, detail) =>
      audit({
        action: 'oauth.token_refused',
        outcome: reason === 'invalid' ? 'invalid_token' : `invalid_token:${reason}`,
        subject: detail.subject,
        clientId: detail.clientId,
        resource: detail.audience,
      }),
  });
  const limits = new EndpointLimiter(store, config);
  const deps = { server, clients, keys, tokens, store, settings, verifier, sealKey, audit, limits, base };
  return {
    keys,
    base,
    authenticate: verifier.authenticate,
    challenge: mcpChallenge(base),
    plugin: oauthPlugin(deps),
    restRoutes: (approvals: ApprovalQueue) =>
      oauthRestRoutes({
        ...deps,
        onGrantRevoked: async (id) => {
          await revokePrincipal({ approvals }, id, undefined, 'the OAuth grant was revoked');
          // Its agents' open sessions and streams end on every replica (`identity/ended-access.ts`).
          await events.publish('token.changed', { id, change: 'revoked', kind: 'oauth_grant' });
        },
      }),
    register: (app: FastifyInstance) => app.register(oauthPlugin(deps)),
    close: () => guard.close(),
  };
}

export type OAuth = ReturnType<typeof createOAuth>;
