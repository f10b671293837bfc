/**
 * The one rule for a principal that is no longer active — a revoked token today; a disabled user or a
 * revoked OAuth grant later: what it asked for and has not run yet never runs. Every revocation goes
 * through `revokePrincipal`; every approved call checks `principalActive` right before it runs.
 */
import type { Kysely } from 'kysely';
import type { Principal } from '../identity/index.js';
import type { Database } from '../store/schema.js';
import type { ApprovalQueue } from './queue.js';

export interface RevocationDeps {
  approvals: Pick<ApprovalQueue, 'cancelForRequester'>;
}

/**
 * Call after a principal stopped being active (its token revoked, …): its pending and approved-but-not-
 * running approvals end `cancelled` with `reason`, each audited (`approval.cancel`, by `actor`).
 */
export async function revokePrincipal(
  deps: RevocationDeps,
  principalId: string,
  actor: Principal | undefined,
  reason: string,
): Promise<{ cancelledApprovals: string[] }> {
  return { cancelledApprovals: await deps.approvals.cancelForRequester(principalId, actor, reason) };
}

/**
 * Whether a requester may still have its calls run. A token principal is active until revoked; a
 * principal no token row backs (the loopback `local` caller of an unauthenticated hub) has nothing to
 * revoke. Later principal kinds (users, OAuth grants) add their rule here.
 */
export async function principalActive(db: Kysely<Database>, principalId: string): Promise<boolean> {
  // An OAuth grant (`og_…`, see src/oauth) is active until the person or an admin revokes it.
  if (principalId.startsWith('og_')) {
    const grant = await db
      .selectFrom('oauth_grants')
      .select('revoked_at')
      .where('id', '=', principalId)
      .executeTakeFirst();
    return grant !== undefined && grant.revoked_at === null;
  }
  const token = await db.selectFrom('tokens').select('revoked_at').where('id', '=', principalId).executeTakeFirst();
  return token === undefined || token.revoked_at === null;
}
