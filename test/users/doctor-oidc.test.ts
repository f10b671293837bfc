/** `doctor`'s OIDC row against a real provider: discovery read and JWKS parsed; typed failures otherwise. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oidcCheck } from '../../src/cli/doctor-oidc.js';
import { loadConfig } from '../../src/config.js';

describe('doctor: oidc issuer', () => {
  let server: Server;
  let issuer: string;
  beforeAll(async () => {
    let provider: Provider | undefined;
    server = createServer((req, res) => provider?.callback()(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    provider = new Provider(issuer, { clients: [], cookies: { keys: ['k'] } });
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const config = (env: Record<string, string>) =>
    loadConfig({ env: { NODE_ENV: 'test', GATEHOUSE_ALLOW_HTTP: 'true', GATEHOUSE_OIDC_CLIENT_ID: 'gh', ...env } });

  it('is ok when discovery and JWKS are read, and fails clearly when they are not', async () => {
    expect(await oidcCheck(config({}))).toBeUndefined();
    const ok = await oidcCheck(config({ GATEHOUSE_OIDC_ISSUER: issuer, GATEHOUSE_OIDC_PRIVATE_NETWORK: 'true' }));
    expect(ok).toMatchObject({ name: 'oidc issuer', status: 'ok' });
    expect(ok?.detail).toMatch(/discovery read, JWKS parsed \(\d+ keys?\)/);

    // A loopback provider without GATEHOUSE_OIDC_PRIVATE_NETWORK: the egress guard refuses it.
    const guarded = await oidcCheck(config({ GATEHOUSE_OIDC_ISSUER: issuer }));
    expect(guarded).toMatchObject({ status: 'fail' });
    // The issuer in the document must be the configured one.
    const wrong = await oidcCheck(
      config({ GATEHOUSE_OIDC_ISSUER: `${issuer}/other`, GATEHOUSE_OIDC_PRIVATE_NETWORK: 'true' }),
    );
    expect(wrong).toMatchObject({ status: 'fail' });
  });
});
