/** Identity: principals, roles, token hashing and constant-time comparison (see principal.ts, tokens.ts). */

export { conduitAuthenticator } from './conduit-authenticator.js';
export {
  eitherAuthenticator,
  type OAuthPrincipal,
  type OAuthTokenVerifier,
  oauthAuthenticator,
} from './oauth-authenticator.js';
export { checkRoleWithinOwner, roleWithinOwner, signInGroupsOf, signInRoleOf } from './owner-role.js';
export { type Authenticator, bearerToken, type Principal, type Role, type TokenPrincipal } from './principal.js';
export {
  CSRF_COOKIE,
  CSRF_HEADER,
  combinedAuthenticator,
  readCookie,
  SESSION_COOKIE,
  sessionAuthenticator,
  tokenSignInPrincipal,
  userPrincipal,
} from './session-authenticator.js';
export { tokenAuthenticator } from './token-authenticator.js';
export { generateToken, hashToken, safeEqual } from './tokens.js';
export { parseToolView, type ToolView, toolViewFor, toolViewValue } from './tool-view.js';
export { isUserRole, type PrincipalUser, USER_ROLES, type User, type UserRole } from './users.js';
