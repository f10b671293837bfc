/** `doctor`'s issuer row: the address OAuth clients are told, from GATEHOUSE_PUBLIC_URL or the bind address. */
import { describe, expect, it } from 'vitest';
import { issuerCheck } from '../../src/cli/doctor-oauth.js';
import { loadConfig } from '../../src/config.js';

const config = (env: Record<string, string>) => loadConfig({ env: { NODE_ENV: 'test', ...env } });

describe('doctor: oauth issuer', () => {
  it('is ok on loopback and with an https public URL; warns on a public bind without one, or on plain http', () => {
    expect(issuerCheck(config({}))).toMatchObject({
      status: 'ok',
      detail: 'http://127.0.0.1:8080 (this machine only)',
    });
    expect(
      issuerCheck(config({ GATEHOUSE_HOST: '0.0.0.0', GATEHOUSE_PUBLIC_URL: 'https://gate.example.com/' })),
    ).toMatchObject({
      status: 'ok',
      detail: 'https://gate.example.com',
    });
    expect(issuerCheck(config({ GATEHOUSE_HOST: '10.0.0.5' }))).toMatchObject({
      status: 'warn',
      hint: expect.stringContaining('GATEHOUSE_PUBLIC_URL'),
    });
    expect(issuerCheck(config({ GATEHOUSE_PUBLIC_URL: 'http://gate.example.com' }))).toMatchObject({
      status: 'warn',
      detail: 'http://gate.example.com is plain http',
    });
  });
});
