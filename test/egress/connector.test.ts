// The connector is the last line: even a request that skipped fetch()'s own checks cannot open a socket to an
// unchecked address through it.
import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { guardedConnector } from '../../src/egress/connector.js';
import type { AddressRules } from '../../src/egress/rules.js';
import { findGatehouseError } from '../../src/errors.js';
import { noDns, scriptedResolver } from './helpers.js';
import { startHttpServer, type TestServer } from './servers.js';

const cleanup: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((c) => c.close()));
});
async function victim(): Promise<TestServer> {
  const s = await startHttpServer('127.0.0.1');
  cleanup.push(s);
  return s;
}
function rules(overrides: Partial<AddressRules> = {}): AddressRules {
  return { policy: 'public', testPublic: ['127.0.0.2'], resolver: noDns, ...overrides };
}
function agent(r: AddressRules): Agent {
  const a = new Agent({ connect: guardedConnector(r, 2000) });
  cleanup.push(a);
  return a;
}

describe('guardedConnector', () => {
  it('refuses an IP literal straight from undici, where lookup is never called', async () => {
    const server = await victim();
    const err = await request(server.origin, { dispatcher: agent(rules()) }).catch((e: unknown) => e);
    expect(findGatehouseError(err)?.code).toBe('private_network_blocked');
    expect(server.connections).toBe(0);
  });

  it('refuses an IPv6 literal origin', async () => {
    const err = await request('http://[::1]:9/', { dispatcher: agent(rules()) }).catch((e: unknown) => e);
    expect(findGatehouseError(err)?.code).toBe('private_network_blocked');
  });

  it('checks a name on the answer used to connect', async () => {
    const server = await victim();
    const resolver = scriptedResolver({ 'sneaky.test': ['127.0.0.1'] });
    const err = await request(`http://sneaky.test:${server.port}/`, { dispatcher: agent(rules({ resolver })) }).catch(
      (e: unknown) => e,
    );
    expect(findGatehouseError(err)?.code).toBe('private_network_blocked');
    expect(resolver.calls).toEqual(['sneaky.test']);
    expect(server.connections).toBe(0);
  });

  it('connects to an allowed literal and to an allowed name', async () => {
    const server = await victim();
    const resolver = scriptedResolver({ 'box.internal': ['127.0.0.1'] });
    const dispatcher = agent(rules({ policy: 'private', resolver }));
    expect(await (await request(server.origin, { dispatcher })).body.text()).toBe('ok');
    const byName = await request(`http://box.internal:${server.port}/`, { dispatcher });
    expect(await byName.body.text()).toBe('ok');
  });
});
