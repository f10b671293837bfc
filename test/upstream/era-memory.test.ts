import type { DiscoverResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EraMemory } from '../../src/upstream/era-memory.js';

const discover = (scope: 'public' | 'private', padding = 0): DiscoverResult =>
  ({
    supportedVersions: ['2026-07-28'],
    capabilities: { tools: {} },
    ttlMs: 0,
    cacheScope: scope,
    ...(padding > 0 && { instructions: 'i'.repeat(padding) }),
  }) as DiscoverResult;

afterEach(() => vi.useRealTimers());

describe('EraMemory', () => {
  it('gives a private discover result back to its own key only', () => {
    const memory = new EraMemory();
    memory.remember('u', 'alice', { kind: 'modern', discover: discover('private') });
    expect(memory.get('u', 'alice')).toEqual({ kind: 'modern', discover: discover('private') });
    expect(memory.get('u', 'bob')).toBeUndefined();
    expect(memory.size).toBe(1);
  });

  it('shares a public discover result and a legacy verdict with every key', () => {
    const memory = new EraMemory();
    memory.remember('m', 'alice', { kind: 'modern', discover: discover('public') });
    memory.remember('l', 'alice', { kind: 'legacy' });
    expect(memory.get('m', 'bob')).toMatchObject({ kind: 'modern' });
    expect(memory.get('l', 'bob')).toEqual({ kind: 'legacy' });
  });

  it('replaces a verdict of the other era and forgets on request', () => {
    const memory = new EraMemory();
    memory.remember('u', 'k', { kind: 'legacy' });
    memory.remember('u', 'k', { kind: 'modern', discover: discover('private') });
    expect(memory.get('u', 'k')).toMatchObject({ kind: 'modern' });
    memory.forget('u');
    expect(memory.get('u', 'k')).toBeUndefined();
    expect(memory.size).toBe(0);
  });

  it('lets a legacy verdict expire, so an upgraded server is probed again', () => {
    vi.useFakeTimers();
    const memory = new EraMemory({ legacyTtlMs: 1_000 });
    memory.remember('u', 'k', { kind: 'legacy' });
    vi.advanceTimersByTime(999);
    expect(memory.get('u', 'k')).toEqual({ kind: 'legacy' });
    vi.advanceTimersByTime(2);
    expect(memory.get('u', 'k')).toBeUndefined();
  });

  it('keeps at most maxUrls URLs, dropping the least recently used', () => {
    const memory = new EraMemory({ maxUrls: 2 });
    memory.remember('a', 'k', { kind: 'legacy' });
    memory.remember('b', 'k', { kind: 'legacy' });
    memory.get('a', 'k');
    memory.remember('c', 'k', { kind: 'legacy' });
    expect(memory.get('b', 'k')).toBeUndefined();
    expect(memory.get('a', 'k')).toBeDefined();
    expect(memory.get('c', 'k')).toBeDefined();
  });

  it('bounds the bytes of discover results kept, and keeps none that is too large', () => {
    const memory = new EraMemory({ maxBytes: 3_000, maxDiscoverBytes: 2_000 });
    memory.remember('huge', 'k', { kind: 'modern', discover: discover('private', 5_000) });
    expect(memory.get('huge', 'k')).toBeUndefined();
    memory.remember('a', 'k', { kind: 'modern', discover: discover('private', 1_200) });
    memory.remember('b', 'k', { kind: 'modern', discover: discover('private', 1_200) });
    memory.remember('c', 'k', { kind: 'modern', discover: discover('private', 1_200) });
    // Three of ~1.3 kB do not fit in 3 kB: the oldest went.
    expect(memory.get('a', 'k')).toBeUndefined();
    expect(memory.get('b', 'k')).toBeDefined();
    expect(memory.get('c', 'k')).toBeDefined();
  });
});
