/**
 * Cancellation that makes no AbortSignal until something needs one. On Node 20 making an AbortSignal costs
 * about 5 µs of CPU (its AbortController about 0.06 µs: Node makes the signal on first use), and listening to a
 * fresh one more again: on the hub's fast path that was more than the rest of a call's bookkeeping. Code that
 * only needs to hear of an abort takes `AbortSignal | Cancellation` and listens with `onCancel`; a `Canceller`
 * hands out a real AbortSignal (`signal`) to code that needs one, such as the MCP SDK's paths.
 */

/** What can be cancelled, besides an AbortSignal: the three members code that only listens needs. */
export interface Cancellation {
  readonly aborted: boolean;
  readonly reason: unknown;
  /** Runs `fn` once when it is cancelled (not at all if it already is); the returned function forgets it. */
  onAbort(fn: () => void): () => void;
}

/** Runs `fn` once when `signal` is aborted (not if it already is); the returned function forgets it. */
export function onCancel(signal: AbortSignal | Cancellation, fn: () => void): () => void {
  if ('onAbort' in signal) return signal.onAbort(fn);
  signal.addEventListener('abort', fn, { once: true });
  return () => signal.removeEventListener('abort', fn);
}

const forgetNothing = () => {};

/** A Cancellation its owner aborts, with an AbortSignal made on first use (aborted with it). */
export class Canceller implements Cancellation {
  private aborting: { reason: unknown } | undefined;
  /** A set, not listeners on an EventTarget: adding and removing those costs several times more. */
  private readonly callbacks = new Set<() => void>();
  private controller: AbortController | undefined;

  get aborted(): boolean {
    return this.aborting !== undefined;
  }

  get reason(): unknown {
    return this.aborting?.reason;
  }

  /** An AbortSignal that follows this (made now if it was not yet: already aborted if this is). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborting) this.controller.abort(this.aborting.reason);
    }
    return this.controller.signal;
  }

  /** Aborts: the signal's listeners first (if it was made), then the `onAbort` callbacks. Once only. */
  abort(reason: unknown = new DOMException('This operation was aborted', 'AbortError')): void {
    if (this.aborting) return;
    this.aborting = { reason };
    this.controller?.abort(reason);
    const callbacks = [...this.callbacks];
    this.callbacks.clear();
    for (const callback of callbacks) callback();
  }

  onAbort(fn: () => void): () => void {
    if (this.aborting) return forgetNothing;
    this.callbacks.add(fn);
    return () => this.callbacks.delete(fn);
  }
}
