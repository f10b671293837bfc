import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isSensitiveKey, REDACTED, redact, scrubSecrets } from '../../src/audit/redact.js';

describe('redact', () => {
  it('redacts every credential-like key, case-insensitively, at any depth, and keeps the rest', () => {
    const input = {
      password: 'p1',
      Passwd: 'p2',
      API_KEY: 'k1',
      'x-api-key': 'k2',
      apikey: 'k3',
      private_key: 'k4',
      privateKey: 'k5',
      authorization: 'a1',
      Cookie: 'c1',
      refresh_token: 't1',
      clientSecret: 's1',
      credentials: { user: 'u', pass: 'x' },
      plain: 'visible',
      count: 3,
      flag: false,
      none: null,
      deep: { a: [{ b: { password: 'p3', note: 'kept' } }] },
    };
    expect(redact(input)).toEqual({
      password: REDACTED,
      Passwd: REDACTED,
      API_KEY: REDACTED,
      'x-api-key': REDACTED,
      apikey: REDACTED,
      private_key: REDACTED,
      privateKey: REDACTED,
      authorization: REDACTED,
      Cookie: REDACTED,
      refresh_token: REDACTED,
      clientSecret: REDACTED,
      credentials: REDACTED,
      plain: 'visible',
      count: 3,
      flag: false,
      none: null,
      deep: { a: [{ b: { password: REDACTED, note: 'kept' } }] },
    });
    expect(input.password).toBe('p1'); // the input is not mutated
  });

  it('does not redact ordinary keys', () => {
    for (const key of ['path', 'query', 'name', 'url', 'content', 'text', 'keyword', 'author']) {
      expect(isSensitiveKey(key)).toBe(false);
    }
  });

  it('scrubs bearer credentials and Gatehouse tokens inside string values', () => {
    const out = redact({
      header: 'Authorization: Bearer abcdefghijklmnop.qrstuvwxyz',
      note: 'token gh_0123456789abcdefghijABCDEFGHIJ0123 leaked',
    }) as Record<string, string>;
    expect(out.header).toBe('Authorization: Bearer [redacted]');
    expect(out.note).toBe('token [redacted] leaked');
  });

  it('redacts the values of credential keys named by a word or a suffix', () => {
    const keys = [
      'auth',
      'basic_auth',
      'proxyAuth',
      'authHeader',
      'key',
      'KEY',
      'access_key',
      'accessKey',
      'AWS_ACCESS_KEY',
      'x-signing-key',
      'APIKey',
      'passphrase',
      'pass',
      'dbPass',
      'DB_PASS',
      'pwd',
      'db_pwd',
      'dsn',
      'sentryDsn',
      'connection_string',
      'connectionString',
      'connStr',
      'connection_uri',
      'passcode',
      'key_2',
    ];
    for (const key of keys) expect(isSensitiveKey(key), key).toBe(true);
    const input = Object.fromEntries(keys.map((key) => [key, `value-of-${key}`]));
    const out = JSON.stringify(redact(input));
    for (const key of keys) expect(out).not.toContain(`value-of-${key}`);
  });

  it('keeps keys that only contain a credential word inside another word, or name a lookup key', () => {
    const keys = [
      'keyboard',
      'monkey',
      'Monkey',
      'MONKEY',
      'keyword',
      'keys',
      'passage',
      'compass',
      'bypass',
      'passenger',
      'author',
      'authority',
      'auth_url',
      'authMethod',
      'primary_key',
      'sortKey',
      'partition_key',
      'publicKey',
      'idempotency_key',
      'hotkey',
      'skip',
    ];
    for (const key of keys) expect(isSensitiveKey(key), key).toBe(false);
    const input = Object.fromEntries(keys.map((key) => [key, `value-of-${key}`]));
    expect(redact(input)).toEqual(input);
  });

  it('scrubs credentials of well-known shapes anywhere in strings', () => {
    const secrets = {
      ghp: 'ghp_1234567890abcdefghijklmnopqrstuvwxyzAB',
      gho: 'gho_1234567890abcdefghijklmnopqrstuvwxyzAB',
      ghu: 'ghu_1234567890abcdefghijklmnopqrstuvwxyzAB',
      ghs: 'ghs_1234567890abcdefghijklmnopqrstuvwxyzAB',
      ghr: 'ghr_1234567890abcdefghijklmnopqrstuvwxyzAB',
      githubPat: 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ',
      openai: 'sk-proj-abcdefghijklmnopqrstuvwxyz0123456789',
      openaiLegacy: 'sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ',
      anthropic: 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789',
      stripe: 'sk_live_51Habcdefghijklmnop',
      slackBot: 'xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx',
      slackUser: 'xoxp-123456789012-1234567890123-abcdefghijklmnopqrstuvwx',
      aws: 'AKIAIOSFODNN7EXAMPLE',
      jwt: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
    };
    for (const [name, secret] of Object.entries(secrets)) {
      const text = `the ${name} credential is ${secret}, keep it safe`;
      expect(redact(text), name).toBe(`the ${name} credential is ${REDACTED}, keep it safe`);
    }

    const pem = [
      '-----BEGIN RSA PRIVATE KEY-----',
      'MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MmKx4b5fPHbb7Qx',
      'tsbVYmmUEvzv1KpgDPOrInOMlJ0mDtBWwzDlXdwOG3Mw3J9ybaqu4tZ3M2VvQpq',
      '-----END RSA PRIVATE KEY-----',
    ].join('\n');
    const openssh = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----';
    expect(redact(`key file:\n${pem}\nend`)).toBe(`key file:\n${REDACTED}\nend`);
    expect(redact(openssh)).toBe(REDACTED);
    // Cut short (by the string bound or by the tool), the block is still not let through.
    expect(redact(`head ${pem.slice(0, 80)}`)).toBe(`head ${REDACTED}`);
  });

  it('scrubs URL passwords and secret-named query parameters, and keeps the rest of the URL', () => {
    expect(redact('postgres://admin:S3cretPassw0rd@db.internal:5432/prod')).toBe(
      `postgres://admin:${REDACTED}@db.internal:5432/prod`,
    );
    expect(redact('connect to mysql://root:toor@10.0.0.5/app now')).toBe(
      `connect to mysql://root:${REDACTED}@10.0.0.5/app now`,
    );
    expect(redact('https://api.example.com/v1?api_key=sk_live_51Habcdefghijklmnop&page=2')).toBe(
      `https://api.example.com/v1?api_key=${REDACTED}&page=2`,
    );
    expect(redact('GET https://x.example/cb?code=1&token=abc123def456&state=s1 HTTP/1.1')).toBe(
      `GET https://x.example/cb?code=1&token=${REDACTED}&state=s1 HTTP/1.1`,
    );
    expect(redact('https://x.example/a?access_token=zzzzzzzz#frag')).toBe(
      `https://x.example/a?access_token=${REDACTED}`,
    );
  });

  it('scrubs Authorization header values and secret-named fields inside free text', () => {
    expect(redact('Authorization: Token abcdefghijklmnop1234')).toBe(`Authorization: Token ${REDACTED}`);
    expect(redact('sent Authorization: Bearer abcdefghijklmnop.qrstuvwxyz to it')).toBe(
      `sent Authorization: Bearer ${REDACTED} to it`,
    );
    expect(redact('authorization=bearer%20abcdefghijklmnop')).toBe(`authorization=${REDACTED}`);
    expect(redact('x-api-key: SEALED-KEY-123\nx-other: kept')).toBe(`x-api-key: ${REDACTED}\nx-other: kept`);
    expect(redact('{"debug":{"authorization":"Bearer sk-live-SEALED","x-api-key":"SEALED-KEY-123","ok":1}}')).toBe(
      `{"debug":{"authorization":"${REDACTED}","x-api-key":"${REDACTED}","ok":1}}`,
    );
    expect(redact('DB_PASSWORD=hunter2 PASSPHRASE="correct horse battery staple" PORT=5432')).toBe(
      `DB_PASSWORD=${REDACTED} PASSPHRASE="${REDACTED}" PORT=5432`,
    );
    expect(redact('Cookie: sid=abc; theme=dark\nAccept: */*')).toBe(`Cookie: ${REDACTED}\nAccept: */*`);
  });

  it('keeps near-misses of credential shapes', () => {
    const kept = [
      'skip the first keyboard row; the monkey read a passage about the compass',
      'see https://example.com/docs/page?id=42&lang=en#intro',
      'file:///home/user/notes.txt and http://localhost:8080/path',
      'skill-based-routing-for-the-support-queue',
      'task-abcdefghijklmnopqrstuvwxyz0123456789',
      'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 is just a base64 JSON header',
      'dGhpcyBpcyBub3QgYSBqd3QsIGp1c3QgYmFzZTY0IGRhdGE=',
      'AKIA is a prefix, AKIAshort is not a key',
      'keyboard: us, monkey=1, passage: 3, compass=north, keyword: x',
      'ghp_short',
      'version 1.2.3: released; ratio=0.5',
      '-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----',
    ];
    for (const text of kept) expect(scrubSecrets(text), text).toBe(text);
  });

  it('scrubs a credential cut by the string bound', () => {
    const token = 'ghp_1234567890abcdefghijklmnopqrstuvwxyzAB';
    const out = redact(`${'x'.repeat(90)} ${token}`, { maxString: 100 }) as string;
    expect(out).not.toContain('ghp_123');
    expect(out).toContain('[truncated');
  });

  it('scrubs in linear time (no catastrophic backtracking)', () => {
    const hostile = [
      'a'.repeat(200_000),
      'a.'.repeat(100_000),
      `${'password'.repeat(20_000)}=`,
      'x='.repeat(100_000),
      '//a:'.repeat(50_000),
      '-----BEGIN RSA PRIVATE KEY-----'.repeat(5_000),
      'eyJaaaaaaaaa.'.repeat(20_000),
      `${'sk-'.repeat(50_000)}`,
      ' '.repeat(200_000),
      `token${' '.repeat(100_000)}`,
    ];
    for (const text of hostile) {
      const started = performance.now();
      scrubSecrets(text);
      expect(performance.now() - started, text.slice(0, 20)).toBeLessThan(1000);
    }
  });

  it('bounds depth, strings, widths and total size, and survives cycles and odd values', () => {
    let deep: Record<string, unknown> = { leaf: true };
    for (let i = 0; i < 50; i++) deep = { next: deep };
    const depthOut = JSON.stringify(redact(deep, { maxDepth: 5 }));
    expect(depthOut).toContain('[truncated: depth]');
    expect(depthOut).not.toContain('leaf');

    const long = redact('x'.repeat(10_000), { maxString: 100 }) as string;
    expect(long.startsWith('x'.repeat(100))).toBe(true);
    expect(long).toContain('[truncated 9900 chars]');
    expect(long.length).toBeLessThan(150);

    const wide = redact(
      Array.from({ length: 1000 }, (_, i) => i),
      { maxItems: 10 },
    ) as unknown[];
    expect(wide).toHaveLength(11);
    expect(wide[10]).toBe('[truncated: 990 more items]');

    const manyKeys = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, i]));
    const keysOut = redact(manyKeys, { maxItems: 20 }) as Record<string, unknown>;
    expect(Object.keys(keysOut)).toHaveLength(21);
    expect(keysOut['[truncated]']).toBe('480 more keys');

    const huge = Array.from({ length: 100 }, () => ({ text: 'y'.repeat(2000) }));
    expect(JSON.stringify(redact(huge, { maxTotal: 10_000 })).length).toBeLessThan(15_000);

    const cyclic: Record<string, unknown> = { name: 'c' };
    cyclic.self = cyclic;
    expect(redact(cyclic)).toEqual({ name: 'c', self: '[circular]' });

    const odd = redact({ big: 10n, nan: Number.NaN, fn: () => 1, when: new Date(0), bytes: Buffer.from('abc') });
    expect(odd).toEqual({ big: '10', nan: 'NaN', when: '1970-01-01T00:00:00.000Z', bytes: '[binary 3 bytes]' });
    const protoOut = redact(JSON.parse('{"__proto__": {"password": "p"}}')) as object;
    expect(Object.getPrototypeOf(protoOut)).toBe(Object.prototype);
    expect(JSON.stringify(protoOut)).toBe('{"__proto__":{"password":"[redacted]"}}');
  });

  it('never lets the value of a sensitive key through (property)', () => {
    const sensitiveKey = fc.constantFrom(
      'password',
      'API_KEY',
      'accessToken',
      'Authorization',
      'x-private-key',
      'cookie',
    );
    const secret = fc.string({ minLength: 12, maxLength: 40 }).map((s) => `S3CR3T-${s.replace(/\W/g, '')}-END`);
    fc.assert(
      fc.property(fc.anything({ maxDepth: 3 }), sensitiveKey, secret, fc.nat(3), (noise, key, value, depth) => {
        let node: Record<string, unknown> = { [key]: value, noise };
        for (let i = 0; i < depth; i++) node = { [`level${i}`]: [node], noise };
        const out = JSON.stringify(redact(node));
        expect(out).not.toContain(value);
      }),
      { numRuns: 300 },
    );
  });
});
