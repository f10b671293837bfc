import { describe, expect, it } from 'vitest';
import { exposeNames, unwrapResourceUri, wrapResourceUri } from '../../src/surfaces/hub/names.js';

describe('aggregated names', () => {
  it('prefixes plain names with the server id', () => {
    expect([...exposeNames('files', ['read', 'write.v2'], 64)]).toEqual([
      ['read', 'files__read'],
      ['write.v2', 'files__write.v2'],
    ]);
  });

  it('cuts long names deterministically within the maximum, with a short hash', () => {
    const long = 'x'.repeat(100);
    const first = exposeNames('files', [long], 64).get(long) as string;
    expect(first.length).toBeLessThanOrEqual(64);
    expect(first).toMatch(/^files__x+-[0-9a-f]{8}$/);
    expect(exposeNames('files', [long], 64).get(long)).toBe(first);
  });

  it('replaces characters outside [A-Za-z0-9_.-] and never lets two originals share a name', () => {
    const names = exposeNames('srv', ['a b', 'a_b', 'a/b'], 64);
    const exposed = [...names.values()];
    expect(new Set(exposed).size).toBe(3);
    for (const name of exposed) expect(name).toMatch(/^[A-Za-z0-9_.-]+$/);
    // A legal name keeps its plain form; the ones that had to change carry a hash of their original.
    expect(names.get('a_b')).toBe('srv__a_b');
    expect(names.get('a b')).toMatch(/^srv__a_b-[0-9a-f]{8}$/);
    expect(names.get('a/b')).toMatch(/^srv__a_b-[0-9a-f]{8}$/);
  });

  it('wraps and unwraps resource URIs', () => {
    const wrapped = wrapResourceUri('docs', 'file:///tmp/a b?x=1#y');
    expect(wrapped).toBe(`gatehouse://docs/${encodeURIComponent('file:///tmp/a b?x=1#y')}`);
    expect(unwrapResourceUri(wrapped)).toEqual({ serverId: 'docs', uri: 'file:///tmp/a b?x=1#y' });
    expect(unwrapResourceUri('gatehouse://Bad_Id/x')).toBeUndefined();
    expect(unwrapResourceUri('gatehouse://docs/%E0%A4%A')).toBeUndefined();
  });
});
