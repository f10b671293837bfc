/**
 * A token acts within its owner's current role: an admin or operator token of a person since demoted acts
 * with the person's role (a member's: as a member), so a demotion reaches every token they hold at once, and
 * no token is made above its owner. Agent and ops tokens manage nothing and keep their role.
 */
import { GatehouseError } from '../errors.js';
import type { Role } from './principal.js';
import type { UserRole } from './users.js';

const MANAGING_RANK: Partial<Record<Role, number>> = { member: 0, operator: 1, admin: 2 };

/** The role a token of `role` acts with while its owner's role is `ownerRole`. */
export function roleWithinOwner(role: Role, ownerRole: UserRole): Role {
  const rank = MANAGING_RANK[role];
  if (rank === undefined) return role;
  return (MANAGING_RANK[ownerRole] ?? 0) < rank ? ownerRole : role;
}

/**
 * The role a dashboard session opened with a token of `role` acts with: a managing token's, within its owner's;
 * an agent or ops token's at most a member's (it is a credential an agent holds, not the person's sign-in).
 */
export function signInRoleOf(role: Role, ownerRole: UserRole): UserRole {
  return roleWithinOwner(MANAGING_RANK[role] === undefined ? 'member' : role, ownerRole) as UserRole;
}

/**
 * The groups a session (or an OAuth consent) opened with a token of `role` acts with: a managing token's, all of
 * its owner's; an agent or ops token's, only those of its owner's that the token holds too. Such a token is often
 * in an agent's hands: it must not open the person's wider view, nor mint a token or consent a grant for it.
 */
export function signInGroupsOf(role: Role, tokenGroups: readonly string[], ownerGroups: readonly string[]): string[] {
  if (MANAGING_RANK[role] !== undefined) return [...ownerGroups];
  return ownerGroups.filter((group) => tokenGroups.includes(group));
}

/** Refuses a new token above its owner's role (`field` names the role in the request, for the error). */
export function checkRoleWithinOwner(role: Role, owner: { name: string; role: UserRole }, field: string): void {
  if (roleWithinOwner(role, owner.role) === role) return;
  const message = `A token of ${owner.name} (${owner.role}) cannot be ${role}: a token acts within its owner's role.`;
  throw new GatehouseError('validation_error', message, { issues: [{ path: field, message }] });
}
