/**
 * People. A user is a person (admin, operator or member) who signs in to the dashboard and owns agent
 * tokens; an agent (a token, later an OAuth client) is what acts for them. A member signs in, owns
 * tokens and sees its own activity, but decides no approvals.
 */
export const USER_ROLES = ['admin', 'operator', 'member'] as const;
export type UserRole = (typeof USER_ROLES)[number];

export interface User {
  id: string;
  name: string;
  email: string | null;
  role: UserRole;
  groups: string[];
  disabled: boolean;
  /** `api`, `cli` or `oidc` (provisioned on first sign-in). */
  source: string;
  /** `issuer#subject` for a user an OIDC provider vouches for. */
  externalId: string | null;
  createdAt: string;
  updatedAt: string;
  lastSeenAt: string | null;
}

/** What a principal says about the person behind it (absent: nobody in particular). */
export interface PrincipalUser {
  id: string;
  name: string;
  role: UserRole;
  groups: readonly string[];
}

export const isUserRole = (value: string): value is UserRole => (USER_ROLES as readonly string[]).includes(value);
