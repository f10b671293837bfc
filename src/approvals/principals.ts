/**
 * The one rule for a principal that is no longer active — a revoked token today; a disabled user or a
 * revoked OAuth grant later: what it asked for and has not run yet never runs. Every revocation goes
 * through `revokePrincipal`; every approved call checks `principalActive` right before it runs.
 */
import type { Kysely } from 'kysely';
import type { Principal } from '../identity/index.js';
import { parseJson } from '../store/json.js';
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
 * The token an OAuth grant acts for when that token is its person (subject `token:<id>`: an admin or
 * operator token nobody owns consented it as itself, see src/oauth/routes.ts); undefined for any other
 * principal. Read from the grant, whose subject never changes, so approvals recorded before this rule
 * was kept are covered too.
 */
export async function grantPersonToken(db: Kysely<Database>, principalId: string): Promise<string | undefined> {
  if (!principalId.startsWith('og_')) return undefined;
  const grant = await db.selectFrom('oauth_grants').select('subject').where('id', '=', principalId).executeTakeFirst();
  return grant?.subject.startsWith('token:') ? grant.subject.slice(6) : undefined;
}

/**
 * The groups a requester reaches servers through now: a token's, or an OAuth grant's consented groups that its
 * person still holds (as the OAuth authenticator computes them per request); undefined for a requester no row
 * backs (the loopback caller of an unauthenticated hub), which exposure does not bound.
 */
export async function requesterGroups(db: Kysely<Database>, principalId: string): Promise<string[] | undefined> {
  if (principalId.startsWith('og_')) {
    const grant = await db
      .selectFrom('oauth_grants')
      .select(['groups', 'subject'])
      .where('id', '=', principalId)
      .executeTakeFirst();
    if (!grant) return [];
    const consented = parseJson<string[]>(grant.groups, []);
    if (!grant.subject.startsWith('user:')) return consented;
    const person = await db
      .selectFrom('users')
      .select('groups')
      .where('id', '=', grant.subject.slice(5))
      .executeTakeFirst();
    const current = person ? parseJson<string[]>(person.groups, []) : [];
    return consented.filter((group) => current.includes(group));
  }
  const token = await db.selectFrom('tokens').select('groups').where('id', '=', principalId).executeTakeFirst();
  return token ? parseJson<string[]>(token.groups, []) : undefined;
}

/**
 * Whether a requester may still have its calls run. A token principal is active until revoked; a
 * principal no token row backs (the loopback `local` caller of an unauthenticated hub) has nothing to
 * revoke. A user (the requester itself, or the person its token acts for) is active until disabled or
 * deleted; a token whose owner is disabled is not active either. An OAuth grant whose person is a token
 * is active only while that token is.
 */
export async function principalActive(
  db: Kysely<Database>,
  principalId: string,
  userId?: string | null,
): Promise<boolean> {
  // An OAuth grant (`og_…`, see src/oauth) is active until the person or an admin revokes it (then its person's rule).
  if (principalId.startsWith('og_')) {
    const grant = await db
      .selectFrom('oauth_grants')
      .select(['revoked_at', 'subject'])
      .where('id', '=', principalId)
      .executeTakeFirst();
    if (!grant || grant.revoked_at !== null) return false;
    if (grant.subject.startsWith('token:')) {
      // Its person is the token: revoked or gone, the grant is no one's (as the OAuth authenticator refuses it).
      const person = await db
        .selectFrom('tokens')
        .select(['revoked_at', 'user_id'])
        .where('id', '=', grant.subject.slice(6))
        .executeTakeFirst();
      if (!person || person.revoked_at !== null) return false;
      userId ??= person.user_id;
    } else {
      userId ??= grant.subject.startsWith('user:') ? grant.subject.slice(5) : null;
    }
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
