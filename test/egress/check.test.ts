import { afterEach, describe, expect, it } from 'vitest';
import { createEgressGuard, type EgressGuard, type EgressOptions } from '../../src/egress/index.js';
import { noDns, rejection, scriptedResolver } from './helpers.js';

const guards: EgressGuard[] = [];
function guard(options: EgressOptions): EgressGuard {
  const g = createEgressGuard(options);
  guards.push(g);
  return g;
}
afterEach(async () => {
  await Promise.all(guards.splice(0).map((g) => g.close()));
});

// Every one of these is non-public; http is allowed so the verdict is about the address alone.
const NON_PUBLIC_URLS = [
  'http://2130706433',
  'http://0x7f.0.0.1',
  'http://0177.0.0.1',
  'http://127.1',
  'http://0',
  'http://[::]',
  'http://[::1]',
  'http://[::ffff:7f00:1]',
  'http://[::ffff:169.254.169.254]',
  'http://[64:ff9b::a9fe:a9fe]',
  'http://[2002:a9fe:a9fe::]',
  'http://100.64.0.1',
  'http://[fd00:ec2::254]',
  'http://[fe80::1]',
  'http://169.254.169.254/latest/meta-data/',
  'http://10.0.0.1',
  'http://192.168.1.1:8080',
  'http://[fd12::1]',
  'https://127.0.0.1',
];

describe('check: address class', () => {
  it.each(NON_PUBLIC_URLS)('blocks %s under public without asking DNS', async (url) => {
    const err = await rejection(guard({ allowHttp: true, resolver: noDns }).check(url));
    expect(err.code).toBe('private_network_blocked');
    expect(err.status).toBe(400);
  });

  it.each([
    'http://0',
    'http://[::]',
    'http://[::ffff:169.254.169.254]',
    'http://[64:ff9b::a9fe:a9fe]',
    'http://[2002:a9fe:a9fe::]',
    'http://100.64.0.1',
    'http://[fd00:ec2::254]',
    'http://[fe80::1]',
    'http://169.254.169.254',
    'http://169.254.0.1',
    'http://100.100.100.200',
  ])('still blocks %s under private', async (url) => {
    const err = await rejection(guard({ policy: 'private', resolver: noDns }).check(url));
    expect(err.code).toBe('private_network_blocked');
  });

  it.each([
    'http://127.0.0.1:3000/mcp',
    'http://2130706433',
    'http://[::1]',
    'http://10.1.2.3',
    'http://192.168.0.5',
    'http://172.20.0.2',
    'http://[fd12::1]',
  ])('private admits %s (http included)', async (url) => {
    const parsed = await guard({ policy: 'private', resolver: noDns }).check(url);
    expect(parsed).toBeInstanceOf(URL);
  });

  it.each([
    'http://127.0.0.1',
    'http://169.254.169.254',
    'http://[fd00:ec2::254]',
    'http://[fe80::1]',
    'https://x.test',
  ])('any admits %s and asks no DNS', async (url) => {
    await expect(guard({ policy: 'any', resolver: noDns }).check(url)).resolves.toBeInstanceOf(URL);
  });

  it('blocks localhost through the real resolver', async () => {
    for (const url of ['https://localhost', 'http://localhost:8080/mcp']) {
      const err = await rejection(guard({ allowHttp: true }).check(url));
      expect(err.code).toBe('private_network_blocked');
    }
  });

  it('blocks localhost answering 127.0.0.1 and ::1 through an injected resolver', async () => {
    const resolver = scriptedResolver({ localhost: ['127.0.0.1', '::1'] });
    const err = await rejection(guard({ resolver }).check('https://localhost/mcp'));
    expect(err.code).toBe('private_network_blocked');
    expect(resolver.calls).toEqual(['localhost']);
  });

  it('blocks a name when any one of its answers is not public', async () => {
    const resolver = scriptedResolver({
      'mixed.test': ['127.0.0.2', '10.0.0.7'],
      'mixed6.test': ['127.0.0.2', '::ffff:169.254.169.254'],
      'public.test': ['127.0.0.2'],
    });
    const g = guard({ resolver, testPublicAddresses: ['127.0.0.2'] });
    expect((await rejection(g.check('https://mixed.test'))).code).toBe('private_network_blocked');
    expect((await rejection(g.check('https://mixed6.test'))).code).toBe('private_network_blocked');
    await expect(g.check('https://public.test')).resolves.toBeInstanceOf(URL);
  });

  it.each(['64:ff9b::a9fe:a9fe', '2002:a9fe:a9fe::', 'fd00:ec2::254', '::', '100.64.0.1'])(
    'blocks a name resolving to %s',
    async (address) => {
      const resolver = scriptedResolver({ 'evil.test': [address] });
      const err = await rejection(guard({ resolver }).check('https://evil.test'));
      expect(err.code).toBe('private_network_blocked');
    },
  );

  it('never reveals a resolved address, only the host given', async () => {
    const resolver = scriptedResolver({ 'intranet.test': ['10.9.8.7'], 'meta.test': ['fd00:ec2::254'] });
    for (const [url, secret] of [
      ['https://intranet.test/mcp', '10.9.8.7'],
      ['https://meta.test', 'fd00:ec2::254'],
    ] as const) {
      const err = await rejection(guard({ resolver }).check(url));
      const shown = `${err.message} ${JSON.stringify(err.toBody())}`;
      expect(shown).not.toContain(secret);
      expect(err.message).toContain(new URL(url).hostname);
    }
  });

  it('ignores test-public addresses outside NODE_ENV=test', async () => {
    const previous = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      const g = createEgressGuard({ testPublicAddresses: ['127.0.0.2'], resolver: noDns });
      guards.push(g);
      process.env.NODE_ENV = previous; // the guard decided at creation
      expect((await rejection(g.check('https://127.0.0.2'))).code).toBe('private_network_blocked');
    } finally {
      process.env.NODE_ENV = previous;
    }
    await expect(
      guard({ testPublicAddresses: ['127.0.0.2'], resolver: noDns }).check('https://127.0.0.2'),
    ).resolves.toBeInstanceOf(URL);
  });
});

describe('check: scheme rules (after the address class)', () => {
  const resolver = scriptedResolver({ 'public.test': ['127.0.0.2'], 'private.test': ['192.168.1.20'] });
  const options = { resolver, testPublicAddresses: ['127.0.0.2'] };

  it('allows https to a public target and returns the parsed URL', async () => {
    const url = await guard(options).check('https://public.test:8443/mcp?x=1');
    expect(url.href).toBe('https://public.test:8443/mcp?x=1');
  });

  it('refuses plain http to a public target without allowHttp, with reason insecure_scheme', async () => {
    const err = await rejection(guard(options).check('http://public.test/mcp'));
    expect(err.code).toBe('validation_error');
    expect(err.details).toEqual({ reason: 'insecure_scheme' });
    await expect(guard({ ...options, allowHttp: true }).check('http://public.test/mcp')).resolves.toBeInstanceOf(URL);
  });

  it('reports a private target as blocked whatever the scheme', async () => {
    for (const url of ['http://private.test', 'http://127.0.0.1', 'ftp://127.0.0.1', 'gopher://private.test:70']) {
      expect((await rejection(guard(options).check(url))).code).toBe('private_network_blocked');
    }
  });

  it.each(['ftp://public.test/file', 'file:///etc/passwd', 'gopher://public.test:70/', 'ws://public.test', 'data:,x'])(
    'refuses %s as unsupported_scheme',
    async (url) => {
      for (const policy of ['public', 'private', 'any'] as const) {
        const err = await rejection(guard({ ...options, policy }).check(url));
        expect(err.code).toBe('validation_error');
        expect(err.details).toEqual({ reason: 'unsupported_scheme' });
      }
    },
  );

  it('puts a scheme refusal before a name that does not resolve', async () => {
    const err = await rejection(guard(options).check('http://nowhere.test'));
    expect(err.details).toEqual({ reason: 'insecure_scheme' });
  });

  it('reports an unresolvable https name as upstream_unreachable', async () => {
    const err = await rejection(guard(options).check('https://nowhere.test'));
    expect(err.code).toBe('upstream_unreachable');
    expect(err.details).toEqual({ reason: 'dns_failure' });
  });

  it('refuses a malformed URL as validation_error', async () => {
    const err = await rejection(guard(options).check('not a url'));
    expect(err.code).toBe('validation_error');
    expect(err.details).toEqual({ reason: 'invalid_url' });
  });
});
