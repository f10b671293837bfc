/**
 * The protocol era each upstream URL was last negotiated at, so a reconnect skips the
 * `server/discover` probe: a modern verdict carries the DiscoverResult (zero round trips to
 * connect), a legacy verdict goes straight to `initialize`.
 *
 * Bounded: least recently used URLs are forgotten beyond `maxEntries`, and a DiscoverResult too
 * large to be worth keeping is not kept (that URL is simply probed each time). Legacy verdicts
 * expire: an upgraded server still answers `initialize`, so a stale legacy verdict would otherwise
 * hold a server in the old era forever (the SDK's own advice for cached verdicts).
 */
import type { PriorDiscovery } from '@modelcontextprotocol/client';

export interface EraMemoryOptions {
  maxEntries?: number;
  legacyTtlMs?: number;
  maxDiscoverBytes?: number;
}

interface Entry {
  prior: PriorDiscovery;
  at: number;
}

export class EraMemory {
  private readonly entries = new Map<string, Entry>();
  private readonly maxEntries: number;
  private readonly legacyTtlMs: number;
  private readonly maxDiscoverBytes: number;

  constructor(options: EraMemoryOptions = {}) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.legacyTtlMs = options.legacyTtlMs ?? 60 * 60_000;
    this.maxDiscoverBytes = options.maxDiscoverBytes ?? 64 * 1024;
  }

  get size(): number {
    return this.entries.size;
  }

  get(url: string): PriorDiscovery | undefined {
    const entry = this.entries.get(url);
    if (!entry) return undefined;
    if (entry.prior.kind === 'legacy' && Date.now() - entry.at > this.legacyTtlMs) {
      this.entries.delete(url);
      return undefined;
    }
    // Re-insert: Map order is the LRU order.
    this.entries.delete(url);
    this.entries.set(url, entry);
    return entry.prior;
  }

  remember(url: string, prior: PriorDiscovery): void {
    if (prior.kind === 'modern' && Buffer.byteLength(JSON.stringify(prior.discover)) > this.maxDiscoverBytes) {
      this.entries.delete(url);
      return;
    }
    this.entries.delete(url);
    this.entries.set(url, { prior, at: Date.now() });
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  forget(url: string): void {
    this.entries.delete(url);
  }

  clear(): void {
    this.entries.clear();
  }
}
