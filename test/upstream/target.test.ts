import { describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { normalizeTarget } from '../../src/upstream/target.js';

function issuesOf(work: () => unknown): Array<{ path: string; message: string }> {
  try {
    work();
  } catch (error) {
    expect(error).toBeInstanceOf(GatehouseError);
    expect((error as GatehouseError).code).toBe('validation_error');
    return (error as GatehouseError).details!.issues as Array<{ path: string; message: string }>;
  }
  throw new Error('expected a validation_error');
}

describe('normalizeTarget', () => {
  it('keys on the URL and the headers, names case-insensitive and order-free', () => {
    const a = normalizeTarget({ url: 'http://example.test/mcp', headers: { 'X-A': '1', Authorization: 't' } });
    const b = normalizeTarget({ url: 'http://EXAMPLE.test/mcp', headers: { authorization: 't', 'x-a': '1' } });
    expect(a.key).toBe(b.key);
    expect(a.key).toMatch(/^[0-9a-f]{64}$/);
    expect(a.headers).toEqual({ 'x-a': '1', authorization: 't' });
    expect(a.url).toBe('http://example.test/mcp');
  });

  it('gives different keys to different header values, URLs, or header sets', () => {
    const base = normalizeTarget({ url: 'http://example.test/mcp', headers: { authorization: 'a' } }).key;
    expect(normalizeTarget({ url: 'http://example.test/mcp', headers: { authorization: 'b' } }).key).not.toBe(base);
    expect(normalizeTarget({ url: 'http://example.test/other', headers: { authorization: 'a' } }).key).not.toBe(base);
    expect(normalizeTarget({ url: 'http://example.test/mcp' }).key).not.toBe(base);
    // A value that looks like another header set cannot collide with it.
    const joined = normalizeTarget({ url: 'http://example.test/mcp', headers: { a: '1","b","2' } }).key;
    expect(normalizeTarget({ url: 'http://example.test/mcp', headers: { a: '1', b: '2' } }).key).not.toBe(joined);
  });

  it('refuses what would corrupt the exchange, naming fields and never values', () => {
    const issues = issuesOf(() =>
      normalizeTarget({
        url: 'not a url',
        headers: {
          'Mcp-Session-Id': 'stolen',
          'bad name': 'x',
          'x-secret': 'top-secret\r\nx-injected: 1',
          'X-Dup': '1',
          'x-dup': '2',
        },
      }),
    );
    expect(issues.map((i) => i.path)).toEqual([
      'url',
      'headers.Mcp-Session-Id',
      'headers.bad name',
      'headers.x-secret',
      'headers.x-dup',
    ]);
    expect(JSON.stringify(issues)).not.toContain('top-secret');
    expect(JSON.stringify(issues)).not.toContain('stolen');
  });

  it('keeps a header named __proto__ as a header', () => {
    const target = normalizeTarget({ url: 'http://example.test/', headers: JSON.parse('{"__proto__":"v"}') });
    expect(Object.keys(target.headers)).toEqual(['__proto__']);
  });
});
