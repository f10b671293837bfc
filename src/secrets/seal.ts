/**
 * Sealing of upstream secrets at rest: AES-256-GCM with a fresh 96-bit nonce
 * per value and additional authenticated data binding the value to its record
 * (server id, URL or command, field), so a sealed value copied onto another
 * record — or left behind after the URL changed — does not open.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { GatehouseError } from '../errors.js';

const VERSION_PREFIX = 'v1:';

export interface SealKey {
  readonly key: Buffer;
  /** Safe to store and show: an HMAC of a fixed label, not the key. */
  readonly fingerprint: string;
}

export function sealKeyFrom(key: Buffer): SealKey {
  if (key.length !== 32) throw new GatehouseError('validation_error', 'The secret key must be 32 bytes.');
  const fingerprint = createHmac('sha256', key)
    .update('gatehouse secret key fingerprint v1')
    .digest('hex')
    .slice(0, 32);
  return { key, fingerprint };
}

export function aadFor(parts: readonly string[]): Buffer {
  // Length-prefixed so ("a", "bc") and ("ab", "c") differ.
  return Buffer.from(parts.map((p) => `${p.length}:${p}`).join('|'), 'utf8');
}

/** A key for another purpose (e.g. signing), derived from the sealing key so every replica derives the same one. */
export function deriveKey(key: SealKey, purpose: string): Buffer {
  return createHmac('sha256', key.key).update(`gatehouse derived key v1: ${purpose}`).digest();
}

export function seal(key: SealKey, plaintext: string, aad: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key.key, iv);
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return VERSION_PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64');
}

export function unseal(key: SealKey, sealed: string, aad: Buffer): string {
  if (!sealed.startsWith(VERSION_PREFIX)) throw new GatehouseError('internal_error', 'Unknown sealed value format.');
  const raw = Buffer.from(sealed.slice(VERSION_PREFIX.length), 'base64');
  if (raw.length < 28) throw new GatehouseError('internal_error', 'Sealed value is truncated.');
  const decipher = createDecipheriv('aes-256-gcm', key.key, raw.subarray(0, 12));
  decipher.setAAD(aad);
  decipher.setAuthTag(raw.subarray(raw.length - 16));
  try {
    return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
  } catch (error) {
    throw new GatehouseError('internal_error', 'A sealed value does not open with this key and record.', undefined, {
      cause: error,
    });
  }
}
