import { afterEach, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('token lastUsedAt', (target) => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  const listed = async (g: TestGateway) => {
    const { tokens } = (await g.request('GET', '/api/tokens')).json() as {
      tokens: Array<{ id: string; name: string; lastUsedAt: string | null }>;
    };
    return Object.fromEntries(tokens.map((t) => [t.name, t.lastUsedAt]));
  };

  it('is written in the background, at most once a minute per token, and at close', async () => {
    gw = await startTestGateway(target);
    const created = (await gw.request('POST', '/api/tokens', { body: { name: 'claude', role: 'agent' } })).json() as {
      token: string;
    };
    expect((await listed(gw)).claude).toBeNull();

    const before = new Date().toISOString();
    expect((await gw.request('GET', '/info', { token: created.token })).statusCode).toBe(200);
    await gw.gateway.tokenUsage.flush();
    const first = (await listed(gw)).claude as string;
    expect(first >= before).toBe(true);

    // Used again within the minute: not written again.
    for (let i = 0; i < 5; i++) await gw.request('GET', '/info', { token: created.token });
    await gw.gateway.tokenUsage.flush();
    const after = await listed(gw);
    expect(after.claude).toBe(first);
    // The admin's own requests above were noted and written too.
    expect(after.admin).not.toBeNull();

    // What is noted when the gateway closes is written then.
    const again = await startTestGateway(target);
    await again.request('GET', '/info', { token: TEST_ADMIN_TOKEN });
    await again.gateway.app.close();
    const store = await openStore({ dataDir: again.dataDir, databaseUrl: again.databaseUrl });
    try {
      const row = await store.db
        .selectFrom('tokens')
        .select('last_used_at')
        .where('name', '=', 'admin')
        .executeTakeFirst();
      expect(row?.last_used_at).toEqual(expect.any(String));
    } finally {
      await store.close();
    }
  });
});
