import { afterEach, describe, expect, it } from 'vitest';
import { createEgressGuard, type EgressGuard, type EgressOptions } from '../../src/egress/index.js';
import { noDns, rejection, scriptedResolver } from './helpers.js';
import { closedPort, startTcpServer, type TestServer } from './servers.js';

const cleanup: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((c) => c.close()));
});
function guard(options: EgressOptions = {}): EgressGuard {
  const g = createEgressGuard({ testPublicAddresses: ['127.0.0.2'], resolver: noDns, ...options });
  cleanup.push(g);
  return g;
}
async function listener(host: string): Promise<TestServer> {
  const s = await startTcpServer(host);
  cleanup.push(s);
  return s;
}

describe('probeTcp', () => {
  it('is true for a listening public-seam port, by literal and by name', async () => {
    const server = await listener('127.0.0.2');
    const resolver = scriptedResolver({ 'mcp.test': ['127.0.0.2'] });
    const g = guard({ resolver });
    expect(await g.probeTcp(`https://127.0.0.2:${server.port}/mcp`, 1500)).toBe(true);
    expect(await g.probeTcp(`https://mcp.test:${server.port}/mcp`, 1500)).toBe(true);
    expect(server.connections).toBe(2);
  });

  it('is false for a closed port or a name that does not resolve', async () => {
    const port = await closedPort('127.0.0.2');
    const g = guard({ resolver: scriptedResolver({}) });
    expect(await g.probeTcp(`https://127.0.0.2:${port}/`, 1500)).toBe(false);
    expect(await g.probeTcp('https://nowhere.test/', 1500)).toBe(false);
  });

  it('refuses a private target, literal or resolved, without connecting', async () => {
    const server = await listener('127.0.0.1');
    const resolver = scriptedResolver({ 'rebind.test': (asked) => (asked === 0 ? ['127.0.0.2'] : ['127.0.0.1']) });
    const g = guard({ resolver });
    expect((await rejection(g.probeTcp(`https://127.0.0.1:${server.port}/`, 1500))).code).toBe(
      'private_network_blocked',
    );
    await g.check(`https://rebind.test:${server.port}/`);
    const err = await rejection(g.probeTcp(`https://rebind.test:${server.port}/`, 1500));
    expect(err.code).toBe('private_network_blocked');
    expect(err.message).not.toContain('127.0.0.1');
    expect(server.connections).toBe(0);
  });

  it('applies the scheme rules and admits private targets under the private policy', async () => {
    const server = await listener('127.0.0.1');
    expect((await rejection(guard().probeTcp('ftp://127.0.0.2/', 1500))).details).toEqual({
      reason: 'unsupported_scheme',
    });
    expect(await guard({ policy: 'private' }).probeTcp(`http://127.0.0.1:${server.port}/`, 1500)).toBe(true);
    expect(server.connections).toBe(1);
  });
});
