/** Bearer tokens: high-entropy random strings, stored only as their SHA-256, compared in constant time. */
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

const TOKEN_PREFIX = 'gh_';

export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

/** A fast hash is right here: tokens carry 256 bits of entropy, so there is nothing to brute-force. */
export function hashToken(token: string): string {
  // The one-shot form: every request hashes its bearer, and a Hash object costs several times the digest.
  return hash('sha256', token, 'hex');
}

/** Compares two secrets in constant time (hashing first so lengths leak nothing either). */
export function safeEqual(a: string, b: string): boolean {
  const ha = hash('sha256', a, 'buffer');
  const hb = hash('sha256', b, 'buffer');
  return timingSafeEqual(ha, hb);
}
