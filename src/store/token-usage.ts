/**
 * `lastUsedAt` of tokens, written in batches: authenticating a request only notes the token in memory; a
 * background flush writes the noted tokens in one transaction, each at most once per `intervalMs` (a minute
 * by default), and `close()` writes what is left. A request never waits on a store write for it.
 */
import type { Authenticator } from '../identity/index.js';
import type { Store } from './db.js';

export interface TokenUsageOptions {
  /** Each token's `last_used_at` is written at most once per this period. */
  intervalMs?: number;
  /** How often noted uses are flushed. */
  flushEveryMs?: number;
}

export class TokenUsage {
  /** Token id → when it was used, noted since the last flush. */
  private readonly noted = new Map<string, Date>();
  /** Token id → when its `last_used_at` was last written (by this process). */
  private readonly written = new Map<string, number>();
  private readonly intervalMs: number;
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: Store,
    options: TokenUsageOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 60_000;
    this.timer = setInterval(() => void this.flush().catch(() => {}), options.flushEveryMs ?? 5_000);
    this.timer.unref();
  }

  /** Notes a use; cheap and synchronous. */
  touch(tokenId: string, at = new Date()): void {
    const last = this.written.get(tokenId);
    if (last !== undefined && at.getTime() - last < this.intervalMs) return;
    if (!this.noted.has(tokenId)) this.noted.set(tokenId, at);
  }

  /** Writes every noted use in one transaction (flushes run one at a time). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.noted.size === 0) return;
      const batch = [...this.noted];
      this.noted.clear();
      await this.store.db.transaction().execute(async (trx) => {
        for (const [id, at] of batch) {
          await trx.updateTable('tokens').set({ last_used_at: at.toISOString() }).where('id', '=', id).execute();
        }
      });
      for (const [id, at] of batch) this.written.set(id, at.getTime());
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  /** The same authenticator, noting the token of every request it accepts. */
  tracking(authenticate: Authenticator): Authenticator {
    return (request) => {
      const principal = authenticate(request);
      if (principal instanceof Promise) {
        return principal.then((p) => {
          if (p) this.touch(p.id);
          return p;
        });
      }
      if (principal) this.touch(principal.id);
      return principal;
    };
  }
}
