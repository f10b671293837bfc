import type { FastifyRequest } from 'fastify';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { tokenAuthenticator } from '../../src/identity/index.js';
import { CallLimiter } from '../../src/policy/limits.js';
import { SettingsService } from '../../src/settings/service.js';
import { TokenStore } from '../../src/store/tokens.js';
import { describeEachStore, freshStore } from '../helpers/stores.js';

const request = (token: string) => ({ headers: { authorization: `Bearer ${token}` } }) as unknown as FastifyRequest;

describeEachStore('call limits from stored tokens and settings', (target) => {
  let base: Awaited<ReturnType<typeof freshStore>>;
  beforeEach(async () => {
    base = await freshStore(target);
  });
  afterEach(async () => base.cleanup());

  it('applies the limits set on the token, the hub.rateLimit default, and later changes to both', async () => {
    const tokens = new TokenStore(base.store);
    const settings = new SettingsService(base.store);
    const authenticate = tokenAuthenticator(base.store, tokens);
    const t = 1_000_000;
    const limiter = new CallLimiter({ now: () => t });

    const limited = await tokens.create({
      name: 'limited',
      role: 'agent',
      source: 'api',
      rateLimit: 2,
      maxConcurrent: 1,
    });
    const plain = await tokens.create({ name: 'plain', role: 'agent', source: 'api' });
    const call = async (token: string) => {
      const principal = await authenticate(request(token));
      if (!principal) throw new Error('not authenticated');
      return limiter.acquire(principal, (await settings.current())['hub.rateLimit']);
    };

    // Own limits: one in flight at a time, two per minute.
    const held = await call(limited.token as string);
    await expect(call(limited.token as string)).rejects.toMatchObject({ details: { reason: 'concurrency' } });
    held();
    (await call(limited.token as string))();
    await expect(call(limited.token as string)).rejects.toMatchObject({
      code: 'rate_limited',
      details: { reason: 'rate', retryAfterS: 30 },
    });

    // The default from settings, changed on the fly.
    await settings.patch({ 'hub.rateLimit': 3 }, 'test');
    for (let i = 0; i < 3; i++) (await call(plain.token as string))();
    const refused = await call(plain.token as string).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(GatehouseError);
    expect((refused as GatehouseError).details).toEqual({ retryAfterS: 20, reason: 'rate' });

    // PATCHing the token's limit (tokens version moves) applies on the next call.
    await tokens.update(plain.record.id, { maxConcurrent: 1, rateLimit: 1000 });
    const a = await call(plain.token as string);
    await expect(call(plain.token as string)).rejects.toMatchObject({ details: { reason: 'concurrency' } });
    a();
  });
});
