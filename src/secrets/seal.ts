/**
 * Sealing of upstream secrets at rest: AES-256-GCM with a fresh 96-bit nonce
 * per value and additional authenticated data binding the value to its record
 * (server id, URL or command, field), so a sealed value copied onto another
 * record — or left behind after the URL changed — does not open.
 *
 * Keys rotate: a `SealKey` is the current key (it seals) and the previous keys
 * (they only open). Every value names the key that sealed it (`v2:<kid>:…`, the
 * kid being a prefix of the key's fingerprint, never the key), so `reseal.ts`
 * can move every value to the current key and count what is left under each old
 * one before it is retired. Values sealed before key ids (`v1:`) open with any
 * key of the ring.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { GatehouseError } from '../errors.js';

const V1 = 'v1:';
const V2 = 'v2:';

export interface SealKey {
  readonly key: Buffer;
  /** Safe to store and show: an HMAC of a fixed label, not the key. */
  readonly fingerprint: string;
  /** The id written into every value this key seals: the fingerprint's first 16 hex digits. */
  readonly kid: string;
  /** Older keys: they open what they sealed and never seal. Empty outside a rotation. */
  readonly previous: readonly SealKey[];
}

/** A key (the current one) and the previous keys that still open what they sealed. */
export function sealKeyFrom(key: Buffer, previous: readonly Buffer[] = []): SealKey {
  if (key.length !== 32) throw new GatehouseError('validation_error', 'The secret key must be 32 bytes.');
  const fingerprint = createHmac('sha256', key)
    .update('gatehouse secret key fingerprint v1')
    .digest('hex')
    .slice(0, 32);
  const kid = fingerprint.slice(0, 16);
  const older = previous.map((p) => sealKeyFrom(p)).filter((p) => p.kid !== kid);
  const unique = older.filter((p, i) => older.findIndex((q) => q.kid === p.kid) === i);
  return { key, fingerprint, kid, previous: unique };
}

/** Every key of the ring, the current one first. */
export function ringOf(key: SealKey): readonly SealKey[] {
  return [key, ...key.previous];
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
  return `${V2}${key.kid}:${Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64')}`;
}

/** The kid of the key that sealed a value; `undefined` for a value sealed before key ids (`v1:`). */
export function sealedKid(sealed: string): string | undefined {
  if (!sealed.startsWith(V2)) return undefined;
  const end = sealed.indexOf(':', V2.length);
  return end > V2.length ? sealed.slice(V2.length, end) : undefined;
}

export function unseal(key: SealKey, sealed: string, aad: Buffer): string {
  if (sealed.startsWith(V2)) {
    const kid = sealedKid(sealed);
    const by = ringOf(key).find((k) => k.kid === kid);
    if (!by) {
      throw new GatehouseError(
        'secrets.key_missing',
        `A sealed value was sealed with the secret key ${kid ?? '(unnamed)'}, which this gateway does not have ` +
          '(retired too early?). Give it in GATEHOUSE_SECRET_KEY_PREVIOUS, or set the value again.',
        { kid },
      );
    }
    return open(by, sealed.slice(V2.length + (kid as string).length + 1), aad);
  }
  if (!sealed.startsWith(V1)) throw new GatehouseError('internal_error', 'Unknown sealed value format.');
  // Sealed before key ids: whichever key of the ring opens it (GCM's tag tells a wrong key from a right one).
  let failure: unknown;
  for (const k of ringOf(key)) {
    try {
      return open(k, sealed.slice(V1.length), aad);
    } catch (error) {
      failure = error;
    }
  }
  throw failure;
}

function open(key: SealKey, body: string, aad: Buffer): string {
  const raw = Buffer.from(body, 'base64');
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
