/**
 * Which principals an event takes access from, so that what they hold open (2025-era sessions, streams:
 * `McpEndpoint.endAccessOf`) ends at once instead of at their next request:
 *
 * - a revoked token, and the OAuth grants of people who signed in with it;
 * - a person disabled or deleted: their own id (dashboard sessions), the tokens they own, and the OAuth grants
 *   of the person and of those tokens;
 * - a revoked OAuth grant (published as a `token.changed` revocation of the grant's id);
 * - a token given other groups: its 2025-era sessions were opened with the old view, which no replica may keep
 *   serving (the agent initializes again and sees the new one); a person given other groups or another role:
 *   the tokens they own and the OAuth grants of the person and of those tokens, likewise;
 * - one OAuth access token revoked (RFC 7009), or a refresh family ended (revoked, or a replayed refresh token or
 *   code): not the grant, whose other tokens still hold, but the streams opened with that token or family
 *   (`credentialKeysOf`).
 */
import type { StreamEvent } from '../audit/stream.js';
import type { Store } from '../store/db.js';
import type { TokenPrincipal } from './principal.js';

/** The `token.changed` kinds of one OAuth access token and of one refresh family revoked. */
export const OAUTH_ACCESS_TOKEN = 'oauth_access_token';
export const OAUTH_FAMILY = 'oauth_family';

const accessKey = (jti: string) => `oauth-access:${jti}`;
const familyKey = (family: string) => `oauth-family:${family}`;

/**
 * What a stream opened by `principal` is ended by: the principal itself, and for an OAuth access token also
 * that token and its refresh family (which end without the grant).
 */
export function credentialKeysOf(principal: TokenPrincipal): string[] {
  const oauth = (principal as { oauth?: { familyId?: unknown; accessTokenId?: unknown } }).oauth;
  if (typeof oauth?.familyId !== 'string' || typeof oauth.accessTokenId !== 'string') return [principal.id];
  return [principal.id, familyKey(oauth.familyId), accessKey(oauth.accessTokenId)];
}

export async function principalsEndedBy(store: Store, event: StreamEvent): Promise<string[]> {
  const id = event.data.id;
  if (typeof id !== 'string') return [];
  const { change, kind } = event.data;
  if (event.type === 'token.changed' && change === 'revoked') {
    if (kind === OAUTH_ACCESS_TOKEN) return [accessKey(id)];
    if (kind === OAUTH_FAMILY) return [familyKey(id)];
    return [id, ...(await grantsOf(store, [`token:${id}`]))];
  }
  if (event.type === 'token.changed' && change === 'updated') {
    return Array.isArray(event.data.fields) && event.data.fields.includes('groups') ? [id] : [];
  }
  if (event.type !== 'user.changed' || (change !== 'deleted' && change !== 'updated')) return [];
  let ofAgentsOnly = false;
  if (change === 'updated') {
    const user = await store.db.selectFrom('users').select('disabled').where('id', '=', id).executeTakeFirst();
    if (user && !user.disabled) {
      // Still active, given other groups or another role: what their tokens and grants hold open was opened
      // with the old view (their dashboard sessions read the person afresh on every request).
      const fields = Array.isArray(event.data.fields) ? event.data.fields : [];
      if (!fields.includes('groups') && !fields.includes('role')) return [];
      ofAgentsOnly = true;
    }
  }
  const tokens = (await store.db.selectFrom('tokens').select('id').where('user_id', '=', id).execute()).map(
    (t) => t.id,
  );
  const grants = await grantsOf(store, [`user:${id}`, ...tokens.map((t) => `token:${t}`)]);
  return ofAgentsOnly ? [...tokens, ...grants] : [id, ...tokens, ...grants];
}

async function grantsOf(store: Store, subjects: string[]): Promise<string[]> {
  const rows = await store.db.selectFrom('oauth_grants').select('id').where('subject', 'in', subjects).execute();
  return rows.map((row) => row.id);
}
