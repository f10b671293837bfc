/**
 * Every answer says not to sniff its content type, and REST and sign-in answers (tokens, audit, sessions) say not
 * to keep them in a cache: successes, refusals and 404s alike. Before, only the dashboard's own routes did.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway(sqliteTarget);
});
afterAll(async () => gw.close());

it('nosniff everywhere; no-store on /api and /auth, whatever the answer', async () => {
  const answers = [
    await gw.request('GET', '/api/mcp/servers'),
    await gw.request('GET', '/api/tokens', { token: 'gh_wrong' }),
    await gw.request('GET', '/api/no-such-route'),
    await gw.request('GET', '/auth/session', { token: null }),
    await gw.request('POST', '/auth/session', { token: null, body: { token: 'gh_wrong' } }),
  ];
  expect(answers.map((a) => a.statusCode)).toEqual([200, 401, 404, 200, 401]);
  for (const answer of answers) {
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(answer.headers['cache-control']).toBe('no-store');
  }
  const health = await gw.request('GET', '/healthz', { token: null });
  expect(health.headers['x-content-type-options']).toBe('nosniff');
});
