/** Bearer tokens: high-entropy random strings, stored only as their SHA-256. */
import { createHash, randomBytes } from 'node:crypto';

const TOKEN_PREFIX = 'gh_';

export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

/** A fast hash is right here: tokens carry 256 bits of entropy, so there is nothing to brute-force. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
