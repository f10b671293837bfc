/** A fixed-window request counter per client address, for the unauthenticated OAuth endpoints (this process's share). */
import { GatehouseError } from '../errors.js';

export class WindowLimiter {
  private window = 0;
  private counts = new Map<string, number>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Throws `rate_limited` once `key` has used this minute's allowance. */
  take(key: string): void {
    const window = Math.floor(this.now() / 60_000);
    if (window !== this.window) {
      this.window = window;
      this.counts = new Map();
    }
    const used = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, used);
    if (used > this.perMinute)
      throw new GatehouseError('rate_limited', 'Too many OAuth requests from this address; retry in a minute.');
  }
}
