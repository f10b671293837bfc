/** The users table and store, and tokens' optional owner, on both databases. */
import { afterEach, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.js';
import { TokenStore } from '../../src/store/tokens.js';
import { UserStore } from '../../src/store/users.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('users store', (target) => {
  let store: Store | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await store?.close();
    await cleanup?.();
    store = undefined;
    cleanup = undefined;
  });

  it('creates, finds, updates, disables and deletes users; tokens carry an owner', async () => {
    const place = await target.fresh();
    cleanup = place.cleanup;
    store = await openStore(place);
    const users = new UserStore(store);
    const tokens = new TokenStore(store);

    const before = store.version('users');
    const alice = await users.create({ name: 'alice', email: 'a@example.com', role: 'member', source: 'api' });
    expect(store.version('users')).not.toBe(before);
    expect(alice).toMatchObject({ name: 'alice', role: 'member', groups: [], disabled: false, lastSeenAt: null });
    expect(alice.id).toMatch(/^usr_/);
    const bob = await users.create({
      name: 'bob',
      role: 'operator',
      groups: ['eng'],
      source: 'oidc',
      externalId: 'https://idp#42',
    });

    expect((await users.find('alice'))?.id).toBe(alice.id);
    expect((await users.find(alice.id))?.name).toBe('alice');
    expect(await users.find('nobody')).toBeUndefined();
    expect((await users.findByExternalId('https://idp#42'))?.id).toBe(bob.id);
    // One provider identity is one user.
    await expect(
      users.create({ name: 'bob2', role: 'member', source: 'oidc', externalId: 'https://idp#42' }),
    ).rejects.toThrow();

    const page = await users.list({ limit: 1, offset: 0 });
    expect(page.total).toBe(2);
    expect(page.users.map((u) => u.name)).toEqual(['alice']);

    const changed = await users.update(alice.id, { disabled: true, groups: ['ops'], email: null });
    expect(changed).toMatchObject({ disabled: true, groups: ['ops'], email: null });
    await users.touch(alice.id);
    expect((await users.get(alice.id))?.lastSeenAt).not.toBeNull();

    const owned = await tokens.create({ name: 'alice-agent', role: 'agent', source: 'api', userId: alice.id });
    await tokens.create({ name: 'unowned', role: 'agent', source: 'api' });
    expect(owned.record.userId).toBe(alice.id);
    expect((await tokens.ownedBy(alice.id)).map((t) => t.name)).toEqual(['alice-agent']);
    expect((await tokens.get(owned.record.id))?.userId).toBe(alice.id);

    expect(await users.delete(bob.id)).toBe(true);
    expect(await users.delete(bob.id)).toBe(false);
    expect(await users.get(bob.id)).toBeUndefined();
  });
});
