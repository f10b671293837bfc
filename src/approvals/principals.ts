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
 * revoke. A user (the requester itself, or the person its token acts for) is active until disabled or
 * deleted; a token whose owner is disabled is not active either.
 */
export async function principalActive(
  db: Kysely<Database>,
  principalId: string,
  userId?: string | null,
): Promise<boolean> {
  // An OAuth grant (`og_…`, see src/oauth) is active until the person or an admin revokes it (then its user's rule).
  if (principalId.startsWith('og_')) {
    const grant = await db
      .selectFrom('oauth_grants')
      .select(['revoked_at', 'subject'])
      .where('id', '=', principalId)
      .executeTakeFirst();
    if (!grant || grant.revoked_at !== null) return false;
    userId ??= grant.subject.startsWith('user:') ? grant.subject.slice(5) : null;
  }
  const token = await db
    .selectFrom('tokens')
    .select(['revoked_at', 'user_id'])
    .where('id', '=', principalId)
    .executeTakeFirst();
  if (token && token.revoked_at !== null) return false;
  const owner =
    userId ?? token?.user_id ?? (token === undefined && principalId.startsWith('usr_') ? principalId : null);
  if (!owner) return true;
  const user = await db.selectFrom('users').select('disabled').where('id', '=', owner).executeTakeFirst();
  return user !== undefined && Number(user.disabled) === 0;
}
