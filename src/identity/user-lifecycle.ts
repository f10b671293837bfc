/**
 * What disabling or deleting a person does, in one place: their dashboard sessions end, their tokens
 * stop working (the authenticators refuse a token whose owner is disabled), and what they or their
 * agents asked for and has not run is cancelled through the one revocation path. Disabling leaves their
 * upstream OAuth grants (no call can use them: every way in is closed, and a connect under way never
 * completes for a disabled person); deleting disconnects them.
 */
import { type RevocationDeps, revokePrincipal } from '../approvals/principals.js';
import type { SessionStore } from '../store/sessions.js';
import type { TokenStore } from '../store/tokens.js';
import type { UserStore } from '../store/users.js';
import type { Principal } from './principal.js';

export interface LifecycleDeps extends RevocationDeps {
  users: UserStore;
  sessions: SessionStore;
  tokens: TokenStore;
  /**
   * A deleted person's upstream OAuth grants and flows: revoked where the authorization server offers it,
   * then dropped (`UpstreamAuth.disconnectUser`; the CLI, with no egress, drops them). Answers how many grants.
   */
  upstreamGrants: { disconnectUser(userId: string): Promise<number> };
}

/** Ends a person's access now (disable). Returns the approvals it cancelled and the sessions it ended. */
export async function endUserAccess(
  deps: LifecycleDeps,
  userId: string,
  actor: Principal | undefined,
  reason: string,
): Promise<{ cancelledApprovals: string[]; endedSessions: number }> {
  const endedSessions = await deps.sessions.revokeFor({ userId });
  const { cancelledApprovals } = await revokePrincipal(deps, userId, actor, reason);
  // Approvals asked by tokens the user owns but recorded before the owner was set reach here too.
  for (const token of await deps.tokens.ownedBy(userId)) {
    cancelledApprovals.push(...(await revokePrincipal(deps, token.id, actor, reason)).cancelledApprovals);
  }
  return { cancelledApprovals, endedSessions };
}

/** Deletes a person: access ended as for disabling, the tokens they own revoked, their upstream grants disconnected. */
export async function deleteUser(
  deps: LifecycleDeps,
  userId: string,
  actor: Principal | undefined,
): Promise<{ revokedTokens: string[]; disconnectedGrants: number } | undefined> {
  const user = await deps.users.update(userId, { disabled: true });
  if (!user) return undefined;
  await endUserAccess(deps, userId, actor, 'The user was deleted.');
  const revokedTokens: string[] = [];
  for (const token of await deps.tokens.ownedBy(userId)) {
    if (await deps.tokens.revoke(token.id)) revokedTokens.push(token.id);
  }
  // Sealed refresh tokens must not outlive their person, nor a flow complete for an id that may be reused.
  const disconnectedGrants = await deps.upstreamGrants.disconnectUser(userId);
  await deps.users.delete(userId);
  return { revokedTokens, disconnectedGrants };
}

/**
 * A person who left groups takes them from the tokens they own, at once (a member mints tokens within its
 * groups, and an agent must not keep what its person lost). Only the groups the person left: a group a token was
 * given that its owner never held (an admin's choice) stays. Answers the tokens narrowed, for their
 * `token.changed` (which ends their 2025-era sessions on every replica).
 */
export async function takeLeftGroups(
  tokens: Pick<TokenStore, 'ownedBy' | 'update'>,
  userId: string,
  before: readonly string[],
  after: readonly string[],
): Promise<string[]> {
  const left = before.filter((group) => !after.includes(group));
  if (left.length === 0) return [];
  const narrowed: string[] = [];
  for (const token of await tokens.ownedBy(userId)) {
    if (!token.groups.some((group) => left.includes(group))) continue;
    await tokens.update(token.id, { groups: token.groups.filter((group) => !left.includes(group)) });
    narrowed.push(token.id);
  }
  return narrowed;
}
