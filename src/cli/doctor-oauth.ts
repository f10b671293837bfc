/**
 * `doctor`'s OAuth rows: the issuer clients will be told (GATEHOUSE_PUBLIC_URL, which must be https
 * and reachable by them beyond this machine), and the access-token signing keys (present, and the
 * newest opens with this secret key ring — every replica must hold the same one).
 */
import type { Kysely } from 'kysely';
import { type Config, isLoopbackHost, publicBaseUrl } from '../config.js';
import { configuredSealKey } from '../secrets/key.js';
import { aadFor, unseal } from '../secrets/seal.js';
import type { Database } from '../store/schema.js';

interface Row {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  hint?: string;
}

export function issuerCheck(config: Config): Row {
  const issuer = publicBaseUrl(config, config.port);
  const local = isLoopbackHost(new URL(issuer).hostname);
  if (!config.publicUrl && !isLoopbackHost(config.host)) {
    return {
      name: 'oauth issuer',
      status: 'warn',
      detail: `${issuer} (from the bind address)`,
      hint: 'Set GATEHOUSE_PUBLIC_URL to the https address clients use; OAuth metadata, tokens and redirects name it.',
    };
  }
  if (issuer.startsWith('http:') && !local) {
    return {
      name: 'oauth issuer',
      status: 'warn',
      detail: `${issuer} is plain http`,
      hint: 'MCP clients refuse a non-https authorization server off loopback; put TLS in front and set GATEHOUSE_PUBLIC_URL.',
    };
  }
  return { name: 'oauth issuer', status: 'ok', detail: `${issuer}${local ? ' (this machine only)' : ''}` };
}

export async function signingKeysCheck(db: Kysely<Database>, config: Config): Promise<Row> {
  const rows = await db
    .selectFrom('oauth_signing_keys')
    .select(['kid', 'private_sealed', 'created_at'])
    .orderBy('created_at', 'desc')
    .execute();
  const newest = rows[0];
  if (!newest) {
    return {
      name: 'oauth signing keys',
      status: 'ok',
      detail: 'none yet (one is made, sealed, at the first OAuth token)',
    };
  }
  const ring = configuredSealKey(config);
  try {
    if (!ring) throw new Error('no key');
    unseal(ring, newest.private_sealed, aadFor(['oauth-signing-key', newest.kid]));
  } catch {
    return {
      name: 'oauth signing keys',
      status: 'fail',
      detail: `the newest key (${newest.kid.slice(0, 8)}…) does not open with this secret key`,
      hint: 'Start every replica with the secret key the store was sealed with, or rotate: POST /api/oauth/keys/rotate.',
    };
  }
  const ageDays = Math.floor((Date.now() - Date.parse(newest.created_at)) / 86_400_000);
  return {
    name: 'oauth signing keys',
    status: 'ok',
    detail: `${rows.length} stored, newest ${newest.kid.slice(0, 8)}… (${ageDays} days old) opens with this key`,
    ...(ageDays > 180 ? { hint: 'Consider rotating it: POST /api/oauth/keys/rotate (no downtime).' } : {}),
  };
}
