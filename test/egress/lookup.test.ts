import type { LookupAddress } from 'node:dns';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type AddressRules, guardedLookup } from '../../src/egress/rules.js';
import { findGatehouseError } from '../../src/errors.js';
import { scriptedResolver } from './helpers.js';
import { startTcpServer, type TestServer } from './servers.js';

function rules(table: Parameters<typeof scriptedResolver>[0]): AddressRules {
  return { policy: 'public', testPublic: ['127.0.0.2'], resolver: scriptedResolver(table) };
}

type Answer = { err: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number };
function ask(r: AddressRules, host: string, options: Parameters<ReturnType<typeof guardedLookup>>[1]): Promise<Answer> {
  return new Promise((resolve) =>
    guardedLookup(r)(host, options, (err, address, family) => resolve({ err, address, family })),
  );
}

describe('guardedLookup', () => {
  it('answers both callback shapes Node uses (all: true with autoSelectFamily, single otherwise)', async () => {
    const r = rules({ 'dual.test': ['127.0.0.2', '::ffff:127.0.0.2'] });
    expect(await ask(r, 'dual.test', { all: true })).toEqual({
      err: null,
      address: [
        { address: '127.0.0.2', family: 4 },
        { address: '::ffff:127.0.0.2', family: 6 },
      ],
      family: undefined,
    });
    expect(await ask(r, 'dual.test', {})).toEqual({ err: null, address: '127.0.0.2', family: 4 });
    expect(await ask(r, 'dual.test', { family: 6 })).toEqual({ err: null, address: '::ffff:127.0.0.2', family: 6 });
  });

  it('judges every answer before filtering by family', async () => {
    // Asking for IPv4 only must not hide that the name also points at a private IPv6 address.
    const answer = await ask(rules({ 'mixed.test': ['127.0.0.2', '::1'] }), 'mixed.test', { family: 4 });
    expect(findGatehouseError(answer.err)?.code).toBe('private_network_blocked');
  });

  it('fails cleanly when no answer has the wanted family', async () => {
    const answer = await ask(rules({ 'v4.test': ['127.0.0.2'] }), 'v4.test', { family: 6 });
    expect(findGatehouseError(answer.err)?.code).toBe('upstream_unreachable');
  });
});

describe('net.connect with the guarded lookup', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
  });

  for (const autoSelectFamily of [true, false]) {
    it(`pins with autoSelectFamily ${autoSelectFamily}`, async () => {
      server = await startTcpServer('127.0.0.1');
      const r = rules({ 'good.test': ['127.0.0.2'], 'bad.test': ['127.0.0.1'] });
      const outcome = (host: string) =>
        new Promise<unknown>((resolve) => {
          const socket = connect({ host, port: server!.port, lookup: guardedLookup(r), autoSelectFamily });
          socket.on('connect', () => resolve(socket.destroy() && 'connected'));
          socket.on('error', (err) => resolve(findGatehouseError(err)?.code ?? (err as NodeJS.ErrnoException).code));
        });
      expect(await outcome('bad.test')).toBe('private_network_blocked');
      expect(await outcome('good.test')).toBe('ECONNREFUSED'); // reached 127.0.0.2, where nothing listens
      expect(server.connections).toBe(0);
    });
  }
});
