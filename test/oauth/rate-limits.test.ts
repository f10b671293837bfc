/**
 * Each unauthenticated OAuth endpoint has its own per-address allowance: a burst at `/authorize` or at
 * `/revoke` is refused with 429 `temporarily_unavailable` and a `Retry-After`, and spending one
 * endpoint's allowance leaves the others' whole (`/revoke` no longer shares `/token`'s bucket). Real
 * HTTP on port 0, on SQLite (in-process counter) and PostgreSQL (the fleet's counter in the store).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('OAuth endpoint rate limits', (target) => {
  let gw: TestGateway;
  let base: string;

  beforeAll(async () => {
    gw = await startTestGateway(target, {
      GATEHOUSE_OAUTH_AUTHORIZE_RATE_LIMIT: '4',
      GATEHOUSE_OAUTH_TOKEN_RATE_LIMIT: '3',
      GATEHOUSE_OAUTH_REVOKE_RATE_LIMIT: '2',
    });
    base = await gw.listen();
  });
  afterAll(async () => {
    await gw.close();
  });

  const authorize = () => fetch(`${base}/authorize?response_type=code&client_id=nobody`, { redirect: 'manual' });
  const post = (path: '/token' | '/revoke', body: Record<string, string>) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(body).toString(),
    });

  const expectLimited = async (response: Response) => {
    expect(response.status).toBe(429);
    const retryAfter = Number(response.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(response.headers.get('content-type')).toMatch(/application\/json/);
    expect(await response.json()).toMatchObject({ error: 'temporarily_unavailable' });
  };

  it('limits /authorize on its own allowance, with Retry-After', async () => {
    const burst = await Promise.all(Array.from({ length: 4 }, () => authorize()));
    for (const answer of burst) {
      expect(answer.status).not.toBe(429);
      await answer.body?.cancel();
    }
    await expectLimited(await authorize());
    // Spent /authorize leaves /token whole: it answers the request's own error, not 429.
    const token = await post('/token', { grant_type: 'authorization_code', code: 'nope' });
    expect(token.status).toBe(400);
    expect((await token.json()).error).not.toBe('temporarily_unavailable');
  });

  it('limits /revoke apart from /token: a revoke burst does not lock the client out of /token', async () => {
    for (let i = 0; i < 2; i++) {
      const answer = await post('/revoke', { token: `not-a-token-${i}` });
      expect(answer.status).not.toBe(429);
      await answer.body?.cancel();
    }
    await expectLimited(await post('/revoke', { token: 'one-too-many' }));
    // /token already took one request in the test above; it has two left of three, then refuses.
    for (let i = 0; i < 2; i++) {
      const answer = await post('/token', { grant_type: 'refresh_token', refresh_token: `nope-${i}` });
      expect(answer.status).not.toBe(429);
      await answer.body?.cancel();
    }
    await expectLimited(await post('/token', { grant_type: 'refresh_token', refresh_token: 'nope' }));
    // /revoke stays refused on its own count.
    await expectLimited(await post('/revoke', { token: 'still-limited' }));
  });
});
