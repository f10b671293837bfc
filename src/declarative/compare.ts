import { isDeepStrictEqual } from 'node:util';

/** Group lists are sets: a file that only reorders them changes nothing. */
export function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return isDeepStrictEqual([...new Set(a)].sort(), [...new Set(b)].sort());
}
