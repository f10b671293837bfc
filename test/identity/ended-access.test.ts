/**
 * Which principals an event takes access from (`identity/ended-access.ts`): the ids whose open sessions and
 * streams the gateway ends at once. A real SQLite store with the rows written as the product writes them.
 */
import { afterEach, expect, it } from 'vitest';
import type { StreamEvent } from '../../src/audit/stream.js';
import {
  credentialKeysOf,
  OAUTH_ACCESS_TOKEN,
  OAUTH_FAMILY,
  principalsEndedBy,
} from '../../src/identity/ended-access.js';
import type { Store } from '../../src/store/db.js';
import { freshStore, sqliteTarget } from '../helpers/stores.js';

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

const at = '2026-12-01T00:00:00.000Z';
const event = (type: StreamEvent['type'], data: Record<string, unknown>): StreamEvent => ({ id: 1, type, at, data });

async function seed(store: Store): Promise<void> {
  await store.db
    .insertInto('users')
    .values(
      ['dana', 'eli'].map((id) => ({
        id,
        name: id,
        email: null,
        role: 'member',
        groups: '[]',
        disabled: 0,
        source: 'api',
        external_id: null,
        created_at: at,
        updated_at: at,
        last_seen_at: null,
      })),
    )
    .execute();
  const token = (id: string, userId: string | null) => ({
    id,
    name: id,
    role: 'agent',
    groups: '[]',
    hash: `hash-${id}`,
    rate_limit: null,
    max_concurrent: null,
    source: 'api',
    created_at: at,
    last_used_at: null,
    revoked_at: null,
    max_sessions: null,
    user_id: userId,
    tool_view: null,
  });
  await store.db
    .insertInto('tokens')
    .values([token('tok_dana', 'dana'), token('tok_other', 'eli'), token('tok_free', null)])
    .execute();
  const grant = (id: string, subject: string) => ({
    id,
    subject,
    subject_name: subject,
    client_id: 'client',
    client_name: 'Client',
    resource: 'http://127.0.0.1/mcp',
    scope: 'mcp',
    groups: '[]',
    created_at: at,
    last_used_at: null,
    revoked_at: null,
  });
  await store.db
    .insertInto('oauth_grants')
    .values([
      grant('g_dana', 'user:dana'),
      grant('g_dana_token', 'token:tok_dana'),
      grant('g_free_token', 'token:tok_free'),
      grant('g_eli', 'user:eli'),
    ])
    .execute();
}

it('a revoked token takes its own access and its signed-in grants; a disabled person theirs and their tokens’', async () => {
  const opened = await freshStore(sqliteTarget);
  cleanup = opened.cleanup;
  const { store } = opened;
  await seed(store);

  expect(await principalsEndedBy(store, event('token.changed', { id: 'tok_free', change: 'revoked' }))).toEqual([
    'tok_free',
    'g_free_token',
  ]);
  // Created or updated tokens take nothing, except new groups: the token's 2025 sessions were opened with the old.
  expect(await principalsEndedBy(store, event('token.changed', { id: 'tok_free', change: 'updated' }))).toEqual([]);
  const updated = (fields: string[]) => event('token.changed', { id: 'tok_free', change: 'updated', fields });
  expect(await principalsEndedBy(store, updated(['rateLimit', 'maxSessions']))).toEqual([]);
  expect(await principalsEndedBy(store, updated(['rateLimit', 'groups']))).toEqual(['tok_free']);

  // A person still enabled after an update keeps everything; disabled or deleted, they lose it all.
  expect(await principalsEndedBy(store, event('user.changed', { id: 'dana', change: 'updated' }))).toEqual([]);
  await store.db.updateTable('users').set({ disabled: 1 }).where('id', '=', 'dana').execute();
  const ended = await principalsEndedBy(store, event('user.changed', { id: 'dana', change: 'updated' }));
  expect([...ended].sort()).toEqual(['dana', 'g_dana', 'g_dana_token', 'tok_dana']);
  await store.db.deleteFrom('users').where('id', '=', 'dana').execute();
  const deleted = await principalsEndedBy(store, event('user.changed', { id: 'dana', change: 'deleted' }));
  expect([...deleted].sort()).toEqual(['dana', 'g_dana', 'g_dana_token', 'tok_dana']);

  // Nothing else is an ending.
  expect(await principalsEndedBy(store, event('settings.changed', { id: 'dana' }))).toEqual([]);
  expect(await principalsEndedBy(store, event('user.changed', { id: 'eli', change: 'created' }))).toEqual([]);
});

it('one OAuth access token or family revoked ends what was opened with it, never the grant', async () => {
  const opened = await freshStore(sqliteTarget);
  cleanup = opened.cleanup;
  const { store } = opened;
  await seed(store);
  const oauthAgent = {
    id: 'g_free_token',
    name: 'agent for free',
    role: 'agent' as const,
    groups: [],
    rateLimit: null,
    maxConcurrent: null,
    oauth: {
      grantId: 'g_free_token',
      clientId: 'c',
      subject: 'token:tok_free',
      familyId: 'fam_1',
      accessTokenId: 'jti_1',
    },
  };
  const keys = credentialKeysOf(oauthAgent);
  expect(keys).toEqual(['g_free_token', expect.any(String), expect.any(String)]);

  const byAccess = await principalsEndedBy(
    store,
    event('token.changed', { id: 'jti_1', change: 'revoked', kind: OAUTH_ACCESS_TOKEN }),
  );
  const byFamily = await principalsEndedBy(
    store,
    event('token.changed', { id: 'fam_1', change: 'revoked', kind: OAUTH_FAMILY }),
  );
  // Each names exactly one of the agent's keys, and not its grant (whose other tokens still hold).
  expect(byAccess).toHaveLength(1);
  expect(byFamily).toHaveLength(1);
  expect(keys).toContain(byAccess[0]);
  expect(keys).toContain(byFamily[0]);
  expect(byAccess[0]).not.toBe(byFamily[0]);
  expect([...byAccess, ...byFamily]).not.toContain('g_free_token');
  // Another access token of the family is not named.
  expect(
    await principalsEndedBy(
      store,
      event('token.changed', { id: 'jti_2', change: 'revoked', kind: OAUTH_ACCESS_TOKEN }),
    ),
  ).not.toContain(keys[2]);

  // A plain token's streams end with the token alone.
  expect(credentialKeysOf({ ...oauthAgent, id: 'tok_free', oauth: undefined } as never)).toEqual(['tok_free']);
});
