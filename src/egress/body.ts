/** Response size cap, enforced while the body streams so an endless or huge body never sits in memory. */
import type { Readable } from 'node:stream';
import { ReadableStream } from 'node:stream/web';
import { GatehouseError } from '../errors.js';
import { toEgressError } from './network-errors.js';

export function responseTooLarge(limit: number): GatehouseError {
  return new GatehouseError('upstream_protocol_error', `The upstream response is larger than ${limit} bytes.`, {
    reason: 'response_too_large',
    limit,
  });
}

/** Where a capped body reads from: a web stream's reader or a Node stream's iterator. */
interface ChunkSource {
  next(): Promise<{ done?: boolean | undefined; value?: Uint8Array | undefined }>;
  /** Stops reading; undici then drops the connection instead of draining it. */
  cancel(reason?: unknown): void;
}

/**
 * A counting stream over `source`: past `limit` bytes it errors with `response_too_large` and cancels
 * the source. Read errors are mapped like connect errors. Pulled only on demand, so nothing is read
 * ahead of the consumer.
 */
function cappedStream(source: ChunkSource, limit: number, host: string, perEvent = false): ReadableStream<Uint8Array> {
  let total = 0;
  const events = perEvent ? new EventSizes() : undefined;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let chunk: Awaited<ReturnType<ChunkSource['next']>>;
        try {
          chunk = await source.next();
        } catch (err) {
          controller.error(toEgressError(err, host, 'body'));
          return;
        }
        if (chunk.done || chunk.value === undefined) {
          controller.close();
          return;
        }
        total = events ? events.largestOpen(chunk.value) : total + chunk.value.byteLength;
        if (total > limit) {
          const err = responseTooLarge(limit);
          controller.error(err);
          source.cancel(err);
          return;
        }
        controller.enqueue(chunk.value);
      },
      cancel(reason) {
        source.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * The bytes of the SSE event still open at the end of each chunk read. A long-lived event stream (the GET
 * stream a legacy HTTP+SSE server answers on, a 2025 server's notification stream) is capped per event,
 * not in total: its size over hours is not what the cap guards against, one event held in memory is.
 * An event ends at a blank line (`\n\n`, `\r\n\r\n` or `\r\r`).
 */
class EventSizes {
  private open = 0;
  /** The last two bytes seen, for a blank line split across chunks. */
  private previous = 0;
  private beforePrevious = 0;

  largestOpen(chunk: Uint8Array): number {
    let largest = this.open;
    for (const byte of chunk) {
      this.open++;
      const ends =
        (byte === 0x0a && (this.previous === 0x0a || (this.previous === 0x0d && this.beforePrevious === 0x0a))) ||
        (byte === 0x0d && this.previous === 0x0d);
      if (this.open > largest) largest = this.open;
      if (ends) this.open = 0;
      this.beforePrevious = this.previous;
      this.previous = byte;
    }
    return largest;
  }
}

/** Whether a response is a long-lived event stream, capped per event (see `EventSizes`): a GET answered with SSE. */
export function isEventStream(method: string | undefined, contentType: string | null | undefined): boolean {
  return (method ?? 'GET').toUpperCase() === 'GET' && /^\s*text\/event-stream\b/i.test(contentType ?? '');
}

/** Caps a web stream body (the fetch path); `perEvent` for a long-lived event stream. */
export function capBody(
  source: ReadableStream<Uint8Array>,
  limit: number,
  host: string,
  perEvent = false,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return cappedStream(
    { next: () => reader.read(), cancel: (reason) => void reader.cancel(reason).catch(() => {}) },
    limit,
    host,
    perEvent,
  );
}

/** Caps a Node stream body (the dispatcher's answer); cancelling destroys the source. */
export function capNodeBody(
  source: Readable,
  limit: number,
  host: string,
  perEvent = false,
): ReadableStream<Uint8Array> {
  const chunks = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  return cappedStream({ next: () => chunks.next(), cancel: () => discard(source) }, limit, host, perEvent);
}

/** Drops a response body unread; undici then closes the connection (its abort error has nowhere to go). */
export function discard(source: Readable): void {
  source.on('error', () => {});
  source.destroy();
}
