import { afterEach, describe, expect, it, vi } from 'vitest';
import { nowIso } from '../../src/store/json.js';

describe('nowIso', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes what toISOString writes, across seconds, milliseconds and years', () => {
    vi.useFakeTimers();
    const instants = [
      Date.UTC(2026, 11, 3, 7, 36, 17, 0),
      Date.UTC(2026, 11, 3, 7, 36, 17, 5),
      Date.UTC(2026, 11, 3, 7, 36, 17, 999),
      Date.UTC(2026, 11, 3, 7, 36, 18, 40), // the next second: a new prefix
      Date.UTC(2026, 11, 3, 7, 36, 17, 120), // a clock set back
      Date.UTC(2026, 11, 31, 23, 59, 59, 999),
      Date.UTC(2027, 0, 1, 0, 0, 0, 1),
      Date.UTC(1969, 11, 31, 23, 59, 59, 500), // before the epoch: the second rounds down, not toward zero
      Date.UTC(10_000, 0, 1, 0, 0, 0, 7), // a six-digit year
    ];
    for (const instant of instants) {
      vi.setSystemTime(instant);
      expect(nowIso()).toBe(new Date(instant).toISOString());
    }
  });

  it('follows the real clock', () => {
    const before = Date.now();
    const stamp = Date.parse(nowIso());
    expect(stamp).toBeGreaterThanOrEqual(before);
    expect(stamp).toBeLessThanOrEqual(Date.now());
  });
});
