/**
 * The guard's `exchange` read straight off undici's dispatcher: one handler per request that keeps the
 * answer's chunks until the caller reads them, as text or as they arrive. undici's `request()` wraps
 * every answer in a Node `Readable` (its state, its events, an abort listener of its own) that the
 * caller then reads once; a direct tool call reads one small body per call, and on the hub's hot path
 * that wrapper cost more CPU than the bytes. The behaviour is `request()`'s: the response cap while the
 * body streams, errors mapped as `fetch`'s, the caller's signal aborting the request, backpressure on a
 * reader that falls behind, and a body read only in part left to finish so its connection is reused.
 */
import type { Agent, Dispatcher } from 'undici';
import { type Cancellation, onCancel } from '../cancellation.js';
import type { GatehouseError } from '../errors.js';
import { responseTooLarge } from './body.js';
import { headerOf, type RawHeaders } from './dispatch.js';
import { toEgressError } from './network-errors.js';

/** What `exchange` answers: the status, the headers, and the body's chunks under the response cap. */
export interface Exchanged {
  status: number;
  /** A response header (lower-case name); repeated headers are joined with ", ". */
  header(name: string): string | undefined;
  /** The body as it arrives, capped and with read errors mapped like `fetch`'s; read it once. */
  chunks(): AsyncGenerator<Buffer>;
  /** The whole body as UTF-8 text (capped). */
  text(): Promise<string>;
  /** Drops the body unread. */
  discard(): void;
}

export interface ExchangeLimits {
  /** The response cap, in bytes. */
  maxBytes: number;
  /** The upstream's host, for error messages. */
  host: string;
  /** A refusal of the answer on its head alone (a redirect, a declared length over the cap). */
  refusal(status: number, contentLength: string | undefined): GatehouseError | undefined;
}

/** Unread bytes kept before the upstream is paused until the reader catches up. */
const HIGH_WATER_BYTES = 64 * 1024;
/** How much of an unneeded body `release` reads, and for how long, before it drops the connection instead. */
const RELEASE_LIMIT_BYTES = 64 * 1024;
const RELEASE_MS = 1_000;

/** Why a body was dropped: never seen by a reader (it has stopped reading). */
const DROPPED = new Error('The body was dropped unread.');

/**
 * Sends `options` on `agent` and resolves with the answer once its head arrives (rejects with the mapped
 * error if the request fails first, or with the refusal of its head). `signal` aborts it at any point.
 */
export function exchangeOn(
  agent: Agent,
  options: Dispatcher.DispatchOptions,
  limits: ExchangeLimits,
  signal?: AbortSignal | Cancellation,
): Promise<Exchanged> {
  return new Promise<Exchanged>((resolve, reject) => {
    if (signal?.aborted) {
      reject(toEgressError(signal.reason, limits.host));
      return;
    }
    const handler = new ExchangeHandler(limits, signal, resolve, reject);
    try {
      agent.dispatch(options, handler);
    } catch (error) {
      handler.onResponseError(undefined, error as Error);
    }
  });
}

class ExchangeHandler implements Dispatcher.DispatchHandler, Exchanged {
  status = 0;
  private headers: RawHeaders = {};
  private controller: Dispatcher.DispatchController | undefined;
  /** Set once the head has been handed to the caller (errors from then on belong to the body). */
  private answered = false;
  /** Received and not yet read. */
  private parts: Buffer[] = [];
  private unread = 0;
  private total = 0;
  private ended = false;
  private failure: unknown;
  /** Set once undici has ended the request (its end or its error): nothing is left to abort. */
  private settled = false;
  /** Set when the whole body is read as text: the cap bounds it, so nothing holds the upstream back. */
  private wholeBody = false;
  /** The reader waiting for more of the body (or its end, or a failure). */
  private wake: (() => void) | undefined;
  /** Set once the body is no longer wanted: its rest is read up to this many bytes, then the connection dropped. */
  private releaseBudget: number | undefined;
  private releaseTimer: NodeJS.Timeout | undefined;
  /** An abort asked for before undici put the request on a connection: done as soon as it does. */
  private abortedEarly: Error | undefined;
  /** Forgets the caller's signal (the request has ended). */
  private readonly unlisten: (() => void) | undefined;

  constructor(
    private readonly limits: ExchangeLimits,
    signal: AbortSignal | Cancellation | undefined,
    private readonly resolveHead: (answer: Exchanged) => void,
    private readonly rejectHead: (error: unknown) => void,
  ) {
    this.unlisten = signal && onCancel(signal, () => this.abort(signal.reason ?? DROPPED));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortedEarly) controller.abort(this.abortedEarly);
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: RawHeaders): void {
    this.controller = controller;
    if (status < 200) return; // an informational answer: the real one follows
    const refused = this.limits.refusal(status, headerOf(headers, 'content-length'));
    if (refused) {
      this.abort(refused);
      return;
    }
    this.status = status;
    this.headers = headers;
    this.answered = true;
    this.resolveHead(this);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.total += chunk.byteLength;
    if (this.total > this.limits.maxBytes) {
      this.abort(responseTooLarge(this.limits.maxBytes));
      return;
    }
    if (this.releaseBudget !== undefined) {
      this.releaseBudget -= chunk.byteLength;
      if (this.releaseBudget < 0) this.abort(DROPPED);
      return;
    }
    this.parts.push(chunk);
    this.unread += chunk.byteLength;
    if (this.unread > HIGH_WATER_BYTES && !this.wholeBody) controller.pause();
    this.notify();
  }

  onResponseEnd(): void {
    this.ended = true;
    this.settled = true;
    this.finish();
    this.notify();
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.settled = true;
    this.finish();
    if (!this.answered) {
      this.answered = true;
      this.rejectHead(toEgressError(error, this.limits.host));
      return;
    }
    this.failure ??= toEgressError(error, this.limits.host, 'body');
    this.notify();
  }

  header(name: string): string | undefined {
    return headerOf(this.headers, name);
  }

  text(): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      this.wholeBody = true;
      this.controller?.resume();
      const settle = () => {
        if (this.failure !== undefined) reject(this.failure);
        else if (this.ended) {
          const length = this.unread;
          resolve(Buffer.concat(this.take(), length).toString('utf8'));
        } else {
          this.wake = settle;
          return;
        }
        this.wake = undefined;
      };
      settle();
    });
  }

  async *chunks(): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        const next = this.parts.shift();
        if (next !== undefined) {
          this.unread -= next.byteLength;
          if (this.unread <= HIGH_WATER_BYTES) this.controller?.resume();
          yield next;
        } else if (this.failure !== undefined) throw this.failure;
        else if (this.ended) return;
        else
          await new Promise<void>((resolve) => {
            this.wake = resolve;
          });
      }
    } finally {
      // A reader that stopped early (it has what it came for) leaves the rest to be read, not dropped.
      if (!this.ended && this.failure === undefined) this.release();
    }
  }

  discard(): void {
    this.abort(DROPPED);
    this.take();
  }

  /**
   * Reads the rest of a body nobody needs, in the background, so undici can reuse its connection: a
   * well-behaved upstream ends the stream right after the response. One that goes on for longer than a
   * second or further than 64 KiB (or the cap) is dropped, as an unread body always was.
   */
  private release(): void {
    // What arrived and was not read counts against the 64 KiB; the cap counts every byte already.
    this.releaseBudget = Math.min(RELEASE_LIMIT_BYTES - this.unread, this.limits.maxBytes - this.total);
    this.take();
    if (this.releaseBudget < 0) {
      this.abort(DROPPED);
      return;
    }
    this.releaseTimer = setTimeout(() => this.abort(DROPPED), RELEASE_MS);
    this.releaseTimer.unref();
    this.controller?.resume();
  }

  private abort(reason: unknown): void {
    if (this.settled || this.abortedEarly || this.controller?.aborted) return;
    if (this.controller) {
      this.controller.abort(reason as Error);
      return;
    }
    // Still queued for a connection: it fails now, and is aborted the moment undici starts it.
    this.abortedEarly = reason as Error;
    this.onResponseError(undefined, reason as Error);
  }

  private finish(): void {
    this.unlisten?.();
    if (this.releaseTimer) clearTimeout(this.releaseTimer);
    this.releaseTimer = undefined;
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** The unread chunks, forgotten here. */
  private take(): Buffer[] {
    const parts = this.parts;
    this.parts = [];
    this.unread = 0;
    return parts;
  }
}
