import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isSensitiveKey, REDACTED, redact } from '../../src/audit/redact.js';

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
