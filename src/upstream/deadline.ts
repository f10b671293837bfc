/**
 * One deadline per operation, covering connect and the request(s): it aborts its signal when the
 * time is up or the caller's signal aborts, and `race` makes sure the operation returns then even
 * where the SDK does not listen (its connect-time probe takes a timeout but no signal).
 *
 * A deadline is a `Cancellation` (`../cancellation.ts`): a direct call's exchange listens to it, and its
 * AbortSignal is made only for code that asks for one (the SDK's paths). Its caller may be one too (the
 * hub's fast path), so a direct call makes no AbortSignal at all.
 */
import { type Cancellation, Canceller, onCancel } from '../cancellation.js';
import { GatehouseError } from '../errors.js';

export type DeadlineExpiry = 'timeout' | 'cancelled';

export class Deadline implements Cancellation {
  private readonly cancel = new Canceller();
  private readonly endsAt: number;
  private readonly timer: NodeJS.Timeout;
  private expiry: DeadlineExpiry | undefined;
  private readonly detach: (() => void) | undefined;

  constructor(
    readonly ms: number,
    caller?: AbortSignal | Cancellation,
  ) {
    this.endsAt = Date.now() + ms;
    this.timer = setTimeout(() => this.expire('timeout'), ms);
    this.timer.unref();
    const onCallerAbort = () => this.expire('cancelled');
    if (caller?.aborted) onCallerAbort();
    this.detach = caller && onCancel(caller, onCallerAbort);
  }

  /** Aborted when the deadline fires (made on first use). */
  get signal(): AbortSignal {
    return this.cancel.signal;
  }

  /** Why the deadline fired, if it has. */
  get expired(): DeadlineExpiry | undefined {
    return this.expiry;
  }

  get aborted(): boolean {
    return this.cancel.aborted;
  }

  /** The deadline's error once it has fired (what its signal was aborted with). */
  get reason(): unknown {
    return this.cancel.reason;
  }

  /** Milliseconds left, at least 1 (an SDK timeout of 0 would mean its default). */
  remaining(): number {
    return Math.max(1, this.endsAt - Date.now());
  }

  /** The typed error for an expired deadline. */
  error(cause?: unknown): GatehouseError {
    return this.expiry === 'cancelled'
      ? new GatehouseError(
          'upstream_timeout',
          'The request was cancelled before the upstream answered.',
          {
            reason: 'cancelled',
          },
          { cause },
        )
      : new GatehouseError(
          'upstream_timeout',
          `The upstream MCP server did not answer within ${this.ms} ms.`,
          {
            timeoutMs: this.ms,
          },
          { cause },
        );
  }

  /** Settles with `work`, or rejects with the deadline's error as soon as it fires. */
  race<T>(work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.expiry) {
        work.catch(() => {});
        reject(this.error());
        return;
      }
      const forget = this.onAbort(() => reject(this.error()));
      work.then(resolve, reject).finally(forget);
    });
  }

  /**
   * Runs `fn` once when the deadline fires (after the listeners on its signal), unless the returned function
   * was called first. Not at all when it has fired already: check `expired` first where that matters. Each
   * waiter passes a function of its own (the same one twice is kept once).
   */
  onAbort(fn: () => void): () => void {
    return this.cancel.onAbort(fn);
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.detach?.();
  }

  private expire(why: DeadlineExpiry): void {
    if (this.expiry) return;
    this.expiry = why;
    clearTimeout(this.timer);
    this.cancel.abort(this.error());
  }
}
