/**
 * Revoking a token, the one path for REST (`DELETE /api/tokens/:id`) and the CLI (`gatehouse token revoke`):
 * the token is refused from the next request on, the revocation is audited, what it asked for and has not
 * run is cancelled (`revokePrincipal`), and every replica and dashboard hears of it.
 */
import { type RevocationDeps, revokePrincipal } from '../approvals/principals.js';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import type { TokenStore } from '../store/tokens.js';
import type { Principal } from './index.js';

export interface TokenRevocationDeps extends RevocationDeps {
  tokens: Pick<TokenStore, 'revoke'>;
  audit: Pick<AuditLog, 'recordAdmin'>;
  events: Pick<EventHub, 'publish'>;
}

/** False when no live token has this id (nothing changed); otherwise the approvals it cancelled. */
export async function revokeToken(
  deps: TokenRevocationDeps,
  id: string,
  actor: Principal | undefined,
  via?: 'cli',
): Promise<false | { cancelledApprovals: string[] }> {
  if (!(await deps.tokens.revoke(id))) return false;
  await deps.audit.recordAdmin({ action: 'token.revoke', actor, data: via ? { id, via } : { id } });
  const result = await revokePrincipal(deps, id, actor, 'The token was revoked.');
  await deps.events.publish('token.changed', { id, change: 'revoked' });
  return result;
}
