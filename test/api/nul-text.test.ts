/**
 * A NUL character in request text is a typed refusal, never a 500: the audit filters refuse control characters
 * on every store, and any other text PostgreSQL cannot keep is answered as a validation error there.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('NUL in request text', (target) => {
  let gw: TestGateway;
  beforeEach(async () => {
    gw = await startTestGateway(target);
  });
  afterEach(async () => gw.close());

  it('answers 400 validation_error, on audit filters and on stored names', async () => {
    for (const query of ['user=%00x', 'server=a%00b', 'client=%00']) {
      const answer = await gw.request('GET', `/api/audit?${query}`);
      expect(answer.statusCode, query).toBe(400);
      expect(answer.json().error.code).toBe('validation_error');
    }
    const user = await gw.request('POST', '/api/users', { body: { name: 'a\u0000b' } });
    expect(user.statusCode).toBeLessThan(500);
    // Nothing was half-written: the store still answers.
    expect((await gw.request('GET', '/api/users')).statusCode).toBe(200);
  });
});
