/** Identity: principals, roles, token hashing and constant-time comparison (see principal.ts, tokens.ts). */

export { conduitAuthenticator } from './conduit-authenticator.js';
export { type Authenticator, bearerToken, type Principal, type Role, type TokenPrincipal } from './principal.js';
export { tokenAuthenticator } from './token-authenticator.js';
export { generateToken, hashToken, safeEqual } from './tokens.js';
export { isUserRole, type PrincipalUser, USER_ROLES, type User, type UserRole } from './users.js';
