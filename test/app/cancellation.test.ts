/** `Canceller`: a cancellation whose AbortSignal is made only when asked for, and `onCancel` over both kinds. */
import { describe, expect, it } from 'vitest';
import { Canceller, onCancel } from '../../src/cancellation.js';

describe('Canceller', () => {
  it('runs its callbacks once, in order, unless forgotten; later ones and a second abort do nothing', () => {
    const cancel = new Canceller();
    const heard: string[] = [];
    cancel.onAbort(() => heard.push('first'));
    const forget = cancel.onAbort(() => heard.push('forgotten'));
    cancel.onAbort(() => heard.push('second'));
    forget();
    expect(cancel.aborted).toBe(false);
    expect(cancel.reason).toBeUndefined();
    const reason = new Error('the agent went away');
    cancel.abort(reason);
    cancel.abort(new Error('again'));
    cancel.onAbort(() => heard.push('too late'));
    expect(heard).toEqual(['first', 'second']);
    expect(cancel.aborted).toBe(true);
    expect(cancel.reason).toBe(reason);
  });

  it('hands out one AbortSignal that follows it: before the abort (its listeners first) or after it', () => {
    const early = new Canceller();
    const signal = early.signal;
    expect(early.signal).toBe(signal);
    const heard: string[] = [];
    signal.addEventListener('abort', () => heard.push('signal'));
    early.onAbort(() => heard.push('callback'));
    early.abort();
    expect(heard).toEqual(['signal', 'callback']);
    expect(signal.reason).toBeInstanceOf(DOMException);
    expect((signal.reason as DOMException).name).toBe('AbortError');

    const late = new Canceller();
    const reason = new Error('cancelled');
    late.abort(reason);
    expect(late.signal.aborted).toBe(true);
    expect(late.signal.reason).toBe(reason);
  });

  it('onCancel listens to a Canceller or an AbortSignal alike, and forgets on request', () => {
    for (const make of [
      () => {
        const c = new Canceller();
        return { source: c, abort: () => c.abort() };
      },
      () => {
        const c = new AbortController();
        return { source: c.signal, abort: () => c.abort() };
      },
    ]) {
      const kept = make();
      const dropped = make();
      let heard = 0;
      onCancel(kept.source, () => heard++);
      onCancel(dropped.source, () => heard++)();
      kept.abort();
      dropped.abort();
      expect(heard).toBe(1);
    }
  });
});
