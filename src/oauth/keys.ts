/**
 * Access-token signing keys (ES256). The private key is held sealed in the store (AES-256-GCM with the
 * store's sealing key, bound to its kid), so every replica signs and verifies with the same keys and a
 * database dump alone signs nothing. Rotation adds a newer key: each replica switches to it on its next
 * reload (at most a minute), and every replica verifies a kid it has not seen by reloading at once, so
 * no token is refused while the fleet switches. A superseded key stays published until every token it
 * signed has expired.
 */
import { randomUUID } from 'node:crypto';
import type { JWK } from 'jose';
import { jose } from '../identity/jose.js';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';
import type { Store } from '../store/db.js';
import { nowIso } from '../store/json.js';

export const SIGNING_ALG = 'ES256';
/** How long a replica keeps signing with the key it loaded before it looks for a newer one. */
const RELOAD_MS = 60_000;
/** A superseded key is published this long after its successor appeared (> token lifetime + reload). */
const SUPERSEDED_KEPT_MS = 15 * 60_000;
/** Unknown kids reload at most this often (a forged kid must not turn into a query per request). */
const MISS_RELOAD_MS = 1_000;

type Key = CryptoKey | Uint8Array;

interface LoadedKey {
  kid: string;
  createdAt: string;
  publicJwk: JWK;
  publicKey: Key;
  sealed: string;
  privateKey?: Key;
}

export class SigningKeys {
  private loaded: { at: number; keys: LoadedKey[] } | undefined;
  private loading: Promise<LoadedKey[]> | undefined;
  private lastMissReload = 0;

  constructor(
    private readonly store: Store,
    private readonly sealKey: SealKey,
    private readonly now: () => number = Date.now,
  ) {}

  /** The key to sign with: the newest; created on first use. */
  async signing(): Promise<{ kid: string; key: Key }> {
    let keys = await this.keys();
    if (keys.length === 0) {
      await this.rotate();
      keys = await this.reload();
    }
    const newest = keys[0] as LoadedKey;
    newest.privateKey ??= await (await jose()).importJWK(
      JSON.parse(unseal(this.sealKey, newest.sealed, aadFor(['oauth-signing-key', newest.kid]))) as JWK,
      SIGNING_ALG,
    );
    return { kid: newest.kid, key: newest.privateKey };
  }

  /** The public key of a kid, reloading once when it is not known here (another replica rotated). */
  async verifying(kid: string | undefined): Promise<Key | undefined> {
    if (!kid) return undefined;
    const found = (await this.keys()).find((k) => k.kid === kid);
    if (found) return found.publicKey;
    if (this.now() - this.lastMissReload < MISS_RELOAD_MS) return undefined;
    this.lastMissReload = this.now();
    return (await this.reload()).find((k) => k.kid === kid)?.publicKey;
  }

  /** The JWKS document: every key still published. */
  async jwks(): Promise<{ keys: JWK[] }> {
    let keys = await this.keys();
    if (keys.length === 0) {
      await this.signing();
      keys = await this.keys();
    }
    return { keys: keys.map((k) => ({ ...k.publicJwk, kid: k.kid, alg: SIGNING_ALG, use: 'sig' })) };
  }

  /** Adds a new signing key (and forgets keys superseded long enough ago). Returns its kid. */
  async rotate(): Promise<string> {
    const { exportJWK, generateKeyPair } = await jose();
    const { publicKey, privateKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
    const kid = randomUUID();
    const privateJwk = await exportJWK(privateKey);
    await this.store.db
      .insertInto('oauth_signing_keys')
      .values({
        kid,
        alg: SIGNING_ALG,
        public_jwk: JSON.stringify(await exportJWK(publicKey)),
        private_sealed: seal(this.sealKey, JSON.stringify(privateJwk), aadFor(['oauth-signing-key', kid])),
        created_at: nowIso(),
      })
      .execute();
    const published = publishedOf(await this.rows(), this.now());
    const keep = new Set([kid, ...published.map((r) => r.kid)]);
    const all = await this.rows();
    const drop = all.filter((r) => !keep.has(r.kid)).map((r) => r.kid);
    if (drop.length > 0) await this.store.db.deleteFrom('oauth_signing_keys').where('kid', 'in', drop).execute();
    this.loaded = undefined;
    return kid;
  }

  /** For `doctor`: how many keys are published and whether the newest opens with this sealing key. */
  async check(): Promise<{ keys: number; newestOpens: boolean | undefined }> {
    const keys = await this.reload();
    const newest = keys[0];
    if (!newest) return { keys: 0, newestOpens: undefined };
    try {
      unseal(this.sealKey, newest.sealed, aadFor(['oauth-signing-key', newest.kid]));
      return { keys: keys.length, newestOpens: true };
    } catch {
      return { keys: keys.length, newestOpens: false };
    }
  }

  private async keys(): Promise<LoadedKey[]> {
    if (this.loaded && this.now() - this.loaded.at < RELOAD_MS) return this.loaded.keys;
    return this.reload();
  }

  private reload(): Promise<LoadedKey[]> {
    this.loading ??= (async () => {
      try {
        const rows = publishedOf(await this.rows(), this.now());
        const previous = new Map((this.loaded?.keys ?? []).map((k) => [k.kid, k]));
        const keys: LoadedKey[] = [];
        for (const row of rows) {
          const known = previous.get(row.kid);
          if (known) {
            keys.push(known);
            continue;
          }
          const publicJwk = JSON.parse(row.public_jwk) as JWK;
          keys.push({
            kid: row.kid,
            createdAt: row.created_at,
            publicJwk,
            publicKey: await (await jose()).importJWK(publicJwk, SIGNING_ALG),
            sealed: row.private_sealed,
          });
        }
        this.loaded = { at: this.now(), keys };
        return keys;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  private rows() {
    return this.store.db
      .selectFrom('oauth_signing_keys')
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('kid', 'desc')
      .execute();
  }
}

/** The newest key, and each older one while its successor is younger than the keep period. */
function publishedOf<T extends { created_at: string }>(rows: T[], now: number): T[] {
  return rows.filter((_row, i) => i === 0 || now - Date.parse((rows[i - 1] as T).created_at) < SUPERSEDED_KEPT_MS);
}
