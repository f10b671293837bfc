/**
 * The grant store's parts of the upstream-OAuth fixes, on SQLite and PostgreSQL: marking a refused access token
 * stale is a conditional update on that very token (a refresh that replaced it is never undone), and the issuer
 * pin of a configured client (its own, else its oldest grant's; dropped with the server's grants).
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { sealKeyFrom } from '../../src/secrets/seal.js';
import type { Store } from '../../src/store/db.js';
import { dropServerGrants, type GrantKey, GrantStore, type OpenedGrant } from '../../src/upstream-auth/grants.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';

const ISSUER = 'https://as.example';
const METADATA = { issuer: ISSUER, authorization_endpoint: `${ISSUER}/a`, token_endpoint: `${ISSUER}/t` } as never;
const KEY: GrantKey = { serverId: 'docs', serverUrl: 'https://mcp.example/mcp', subject: 'shared' };
const GRANT = { issuer: ISSUER, clientId: 'c', metadata: METADATA, resource: KEY.serverUrl };

describeEachStore('upstream OAuth grant store', (target) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let grants: GrantStore;

  beforeEach(async () => {
    ({ store, cleanup } = await freshStore(target));
    grants = new GrantStore(store, sealKeyFrom(randomBytes(32)));
  });
  afterEach(async () => cleanup());

  it('marks the refused access token due, only while it is still the grant’s', async () => {
    await grants.save(KEY, GRANT, { accessToken: 'access-1', refreshToken: 'refresh-1', scopes: [] });
    expect((await grants.view(KEY))?.expiresAt).toBeNull();

    expect(await grants.markStale(KEY, 'some-other-token')).toBe(false);
    expect((await grants.view(KEY))?.expiresAt).toBeNull();

    expect(await grants.markStale(KEY, 'access-1')).toBe(true);
    const due = (await grants.view(KEY))?.expiresAt;
    expect(due).not.toBeNull();
    expect(Date.parse(due as string)).toBeLessThanOrEqual(Date.now());
    expect((await grants.view(KEY))?.state).toBe('connected');

    // A refresh replaced it: a late 401 to the old token leaves the fresh one alone.
    const opened = await grants.open(KEY);
    expect(
      await grants.saveRefreshed(KEY, opened as OpenedGrant, { accessToken: 'access-2', expiresIn: 3600, scopes: [] }),
    ).toBe(true);
    const fresh = (await grants.view(KEY))?.expiresAt;
    expect(await grants.markStale(KEY, 'access-1')).toBe(false);
    expect((await grants.view(KEY))?.expiresAt).toBe(fresh);
    expect((await grants.open(KEY))?.refreshToken).toBe('refresh-1');
  });

  it('writes a refresh only over the grant it was read from: a disconnect or reconnect meanwhile stands', async () => {
    const tokens = { accessToken: 'access-refreshed', refreshToken: 'refresh-refreshed', scopes: [] };
    await grants.save(KEY, GRANT, { accessToken: 'access-1', refreshToken: 'refresh-1', scopes: [] });
    const beforeDisconnect = (await grants.open(KEY)) as OpenedGrant;
    expect(await grants.remove(KEY)).toBe(true);
    expect(await grants.saveRefreshed(KEY, beforeDisconnect, tokens)).toBe(false);
    expect(await grants.view(KEY)).toBeUndefined();

    await grants.save(KEY, GRANT, { accessToken: 'access-2', refreshToken: 'refresh-2', scopes: [] });
    const beforeReconnect = (await grants.open(KEY)) as OpenedGrant;
    await grants.save(KEY, GRANT, { accessToken: 'access-3', refreshToken: 'refresh-3', scopes: [] });
    expect(await grants.saveRefreshed(KEY, beforeReconnect, tokens)).toBe(false);
    expect(await grants.open(KEY)).toMatchObject({ accessToken: 'access-3', refreshToken: 'refresh-3' });

    // Still the grant as read: written, the refresh token kept when the answer brought none.
    const current = (await grants.open(KEY)) as OpenedGrant;
    expect(await grants.saveRefreshed(KEY, current, { accessToken: 'access-4', scopes: [] })).toBe(true);
    expect(await grants.open(KEY)).toMatchObject({ accessToken: 'access-4', refreshToken: 'refresh-3' });
  });

  it('pins a configured client’s issuer; a grant made before pins counts; the server’s drop takes the pin', async () => {
    expect(await grants.pinnedIssuer('docs', 'c')).toBeUndefined();
    await grants.save(KEY, GRANT, { accessToken: 'access-1', scopes: [] });
    expect(await grants.pinnedIssuer('docs', 'c')).toBe(ISSUER); // from its grant
    expect(await grants.pinnedIssuer('docs', 'another-client')).toBeUndefined();

    await grants.pinIssuer('docs', 'c', 'https://moved.example');
    expect(await grants.pinnedIssuer('docs', 'c')).toBe('https://moved.example');
    await grants.pinIssuer('docs', 'c', ISSUER);
    expect(await grants.pinnedIssuer('docs', 'c')).toBe(ISSUER);

    await dropServerGrants(store.db, 'docs');
    expect(await grants.pinnedIssuer('docs', 'c')).toBeUndefined();
    expect(await store.db.selectFrom('upstream_oauth_pins').selectAll().execute()).toEqual([]);
  });
});
