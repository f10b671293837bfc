/**
 * Which principals an event takes access from, so that what they hold open (2025-era sessions, listen
 * streams: `McpEndpoint.endAccessOf`) ends at once instead of at their next request:
 *
 * - a revoked token, and the OAuth grants of people who signed in with it;
 * - a person disabled or deleted: their own id (dashboard sessions), the tokens they own, and the OAuth grants
 *   of the person and of those tokens;
 * - a revoked OAuth grant (published as a `token.changed` revocation of the grant's id).
 */
import type { StreamEvent } from '../audit/stream.js';
import type { Store } from '../store/db.js';

export async function principalsEndedBy(store: Store, event: StreamEvent): Promise<string[]> {
  const id = event.data.id;
  if (typeof id !== 'string') return [];
  const { change } = event.data;
  if (event.type === 'token.changed' && change === 'revoked') return [id, ...(await grantsOf(store, [`token:${id}`]))];
  if (event.type !== 'user.changed' || (change !== 'deleted' && change !== 'updated')) return [];
  if (change === 'updated') {
    const user = await store.db.selectFrom('users').select('disabled').where('id', '=', id).executeTakeFirst();
    if (user && !user.disabled) return [];
  }
  const tokens = (await store.db.selectFrom('tokens').select('id').where('user_id', '=', id).execute()).map(
    (t) => t.id,
  );
  return [id, ...tokens, ...(await grantsOf(store, [`user:${id}`, ...tokens.map((t) => `token:${t}`)]))];
}

async function grantsOf(store: Store, subjects: string[]): Promise<string[]> {
  const rows = await store.db.selectFrom('oauth_grants').select('id').where('subject', 'in', subjects).execute();
  return rows.map((row) => row.id);
}
