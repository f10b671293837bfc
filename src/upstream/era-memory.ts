/**
 * The protocol era each upstream URL was last negotiated at, so a reconnect skips the
 * `server/discover` probe: a modern verdict carries the DiscoverResult (zero round trips to
 * connect), a legacy verdict goes straight to `initialize`.
 *
 * - The era is remembered per URL. A DiscoverResult is shared across pool keys (other headers,
 *   so possibly another principal) only when the server marked it `cacheScope: 'public'`; a private
 *   one (the SDK's default) is reused only by the key that received it, as the SDK asks ("reuse only
 *   within one authorization context"). A new key on a known-modern URL therefore probes once.
 * - Legacy verdicts expire: an upgraded server still answers `initialize`, so a stale legacy
 *   verdict would otherwise hold it in the old era forever (the SDK's advice for cached verdicts).
 * - Bounded by URL count and by the bytes of the DiscoverResults kept; the least recently used URL
 *   goes first. A DiscoverResult larger than `maxDiscoverBytes` is not kept (that key just probes).
 */
import type { DiscoverResult, PriorDiscovery } from '@modelcontextprotocol/client';

export interface EraMemoryOptions {
  maxUrls?: number;
  maxBytes?: number;
  maxDiscoverBytes?: number;
  legacyTtlMs?: number;
}

interface Kept {
  discover: DiscoverResult;
  bytes: number;
}

interface Entry {
  era: 'modern' | 'legacy';
  at: number;
  shared?: Kept;
  byKey: Map<string, Kept>;
  bytes: number;
}

export class EraMemory {
  private readonly entries = new Map<string, Entry>();
  private readonly maxUrls: number;
  private readonly maxBytes: number;
  private readonly maxDiscoverBytes: number;
  private readonly legacyTtlMs: number;
  private bytes = 0;

  constructor(options: EraMemoryOptions = {}) {
    this.maxUrls = options.maxUrls ?? 10_000;
    this.maxBytes = options.maxBytes ?? 8 * 1024 * 1024;
    this.maxDiscoverBytes = options.maxDiscoverBytes ?? 16 * 1024;
    this.legacyTtlMs = options.legacyTtlMs ?? 60 * 60_000;
  }

  /** URLs whose era is known. */
  get size(): number {
    return this.entries.size;
  }

  /** The verdict to connect `key` with, or undefined to negotiate. */
  get(url: string, key: string): PriorDiscovery | undefined {
    const entry = this.entries.get(url);
    if (!entry) return undefined;
    if (entry.era === 'legacy' && Date.now() - entry.at > this.legacyTtlMs) {
      this.forget(url);
      return undefined;
    }
    // Re-insert: Map order is the LRU order.
    this.entries.delete(url);
    this.entries.set(url, entry);
    if (entry.era === 'legacy') return { kind: 'legacy' };
    const kept = entry.shared ?? entry.byKey.get(key);
    return kept && { kind: 'modern', discover: kept.discover };
  }

  remember(url: string, key: string, prior: PriorDiscovery): void {
    let entry = this.entries.get(url);
    if (!entry || entry.era !== prior.kind) {
      if (entry) this.forget(url);
      entry = { era: prior.kind, at: Date.now(), byKey: new Map(), bytes: 0 };
    }
    this.entries.delete(url);
    this.entries.set(url, entry);
    entry.at = Date.now();
    if (prior.kind === 'modern') {
      const bytes = Buffer.byteLength(JSON.stringify(prior.discover));
      if (bytes <= this.maxDiscoverBytes) {
        const kept = { discover: prior.discover, bytes };
        const previous = prior.discover.cacheScope === 'public' ? entry.shared : entry.byKey.get(key);
        if (prior.discover.cacheScope === 'public') entry.shared = kept;
        else entry.byKey.set(key, kept);
        this.resize(entry, bytes - (previous?.bytes ?? 0));
      }
    }
    this.enforceBounds();
  }

  forget(url: string): void {
    const entry = this.entries.get(url);
    if (!entry) return;
    this.entries.delete(url);
    this.bytes -= entry.bytes;
  }

  private resize(entry: Entry, delta: number): void {
    entry.bytes += delta;
    this.bytes += delta;
  }

  private enforceBounds(): void {
    for (const url of this.entries.keys()) {
      if (this.entries.size <= this.maxUrls && this.bytes <= this.maxBytes) break;
      this.forget(url);
    }
  }
}
