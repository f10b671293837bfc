import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exposeNames, unwrapResourceUri, wrapResourceUri } from '../../src/surfaces/hub/names.js';

const h = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 8);

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

  it('never lets a plain name take the hashed name of another (three names built from the short hash)', () => {
    // "a b" is hashed to a_b-<h("a b")>; a tool named exactly that collides with it, so both are hashed,
    // and a third tool named like the second one's hashed form would then take its name.
    const second = `a_b-${h('a b')}`;
    const third = `${second}-${h(second)}`;
    const originals = ['a b', second, third];
    const names = exposeNames('srv', originals, 64);
    expect(names.size).toBe(3);
    expect(new Set(names.values()).size).toBe(3);
    // Deterministic whatever the order the upstream lists them in.
    const reversed = exposeNames('srv', [...originals].reverse(), 64);
    for (const original of originals) expect(reversed.get(original)).toBe(names.get(original));
  });

  it('gives every distinct original one name of its own, deterministically (property)', () => {
    const piece = fc.constantFrom('a', 'b', '_', '-', '.', ' ', '/', 'x'.repeat(30));
    const original = fc.array(piece, { minLength: 1, maxLength: 6 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.uniqueArray(original, { maxLength: 12 }), fc.integer({ min: 20, max: 64 }), (originals, max) => {
        // Add, for some originals, a name equal to their hashed form: the adversarial case.
        // Add names equal to hashed forms of others (twice over): the adversarial case.
        let unique = [...originals];
        for (let i = 0; i < 2; i++) {
          const hashedForms = originals.map((o) => `${o.replace(/[^A-Za-z0-9_.-]/g, '_')}-${h(o)}`);
          const more = [...unique, ...hashedForms, ...hashedForms.map((o) => `${o}-${h(o)}`)];
          unique = [...new Set(more)].slice(0, 40);
        }
        const names = exposeNames('srv', unique, max);
        const values = [...names.values()];
        expect(new Set(values).size).toBe(values.length);
        for (const name of values) {
          expect(name.startsWith('srv__')).toBe(true);
          expect(name).toMatch(/^[A-Za-z0-9_.-]+$/);
        }
        const shuffled = [...unique].reverse();
        const again = exposeNames('srv', shuffled, max);
        for (const o of unique) expect(again.get(o)).toBe(names.get(o));
      }),
      { numRuns: 300 },
    );
  });

  it('wraps and unwraps resource URIs', () => {
    const wrapped = wrapResourceUri('docs', 'file:///tmp/a b?x=1#y');
    expect(wrapped).toBe(`gatehouse://docs/${encodeURIComponent('file:///tmp/a b?x=1#y')}`);
    expect(unwrapResourceUri(wrapped)).toEqual({ serverId: 'docs', uri: 'file:///tmp/a b?x=1#y' });
    expect(unwrapResourceUri('gatehouse://Bad_Id/x')).toBeUndefined();
    expect(unwrapResourceUri('gatehouse://docs/%E0%A4%A')).toBeUndefined();
  });
});
