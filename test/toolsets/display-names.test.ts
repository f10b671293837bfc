/** Display names in the collision check (`grantDisplayNames`): granted only when nothing else has or wants them. */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { grantDisplayNames } from '../../src/surfaces/hub/names.js';

it('grants a free display name, and none of one that is taken or wanted twice', () => {
  const taken = new Set(['gh__create_issue', 'calc__add']);
  const wanted = new Map([
    ['gh/create_issue', 'file_bug'],
    ['calc/add', 'gh__create_issue'],
    ['a/x', 'twice'],
    ['b/y', 'twice'],
  ]);
  expect([...grantDisplayNames(taken, wanted)]).toEqual([['gh/create_issue', 'file_bug']]);
});

it('never grants one name to two items, nor a taken name, whatever the input', () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.stringMatching(/^[a-c]{1,2}$/), { maxLength: 5 }),
      fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.stringMatching(/^[a-c]{1,2}$/)), { maxLength: 10 }),
      (takenList, pairs) => {
        const taken = new Set(takenList);
        const wanted = new Map(pairs);
        const granted = grantDisplayNames(taken, wanted);
        const names = [...granted.values()];
        expect(new Set(names).size).toBe(names.length);
        for (const [key, name] of granted) {
          expect(taken.has(name)).toBe(false);
          expect(wanted.get(key)).toBe(name);
        }
        // Deterministic: the same input grants the same names.
        expect([...grantDisplayNames(taken, wanted)]).toEqual([...granted]);
      },
    ),
  );
});
