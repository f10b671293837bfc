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

/**
 * The chunks of a Node stream body, capped like `capNodeBody` (errors mapped the same way) but
 * without a web stream in between: for readers that take the bytes themselves.
 *
 * A reader that stops early because it has what it came for (an SSE answer's response arrives just
 * before the upstream ends the stream) leaves the rest to `release`, so the connection goes back to
 * the pool instead of being dropped and dialled again for the next call.
 */
export async function* cappedChunks(source: Readable, limit: number, host: string): AsyncGenerator<Buffer> {
  let total = 0;
  let failed = false;
  try {
    // Not destroyed on an early return: the `finally` below decides between draining and dropping.
    for await (const chunk of source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      total += chunk.byteLength;
      if (total > limit) throw responseTooLarge(limit);
      yield chunk;
    }
  } catch (err) {
    failed = true;
    throw err instanceof GatehouseError ? err : toEgressError(err, host, 'body');
  } finally {
    if (!source.readableEnded) {
      if (failed) discard(source);
      else release(source, limit - total);
    }
  }
}

/**
 * A whole Node stream body as UTF-8 text, capped like `cappedChunks` (errors mapped the same way). Read
 * with the stream's own events: an async iterator costs promises per chunk, and a direct call reads one
 * small body per tool call.
 */
export function cappedText(source: Readable, limit: number, host: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const parts: Buffer[] = [];
    let total = 0;
    const settle = (error?: unknown) => {
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onError);
      source.off('close', onClose);
      if (error === undefined) {
        resolve(Buffer.concat(parts, total).toString('utf8'));
        return;
      }
      discard(source);
      reject(error instanceof GatehouseError ? error : toEgressError(error, host, 'body'));
    };
    const onData = (chunk: Buffer) => {
      total += chunk.byteLength;
      if (total > limit) settle(responseTooLarge(limit));
      else parts.push(chunk);
    };
    const onEnd = () => settle();
    const onError = (error: unknown) => settle(error);
    // Closed before its end with no error of its own: cut short, as the stream's iterator reports it.
    const onClose = () => settle(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    if (source.readableEnded) {
      resolve('');
      return;
    }
    if (source.destroyed) {
      onClose();
      return;
    }
    source.on('data', onData);
    source.once('end', onEnd);
    source.once('error', onError);
    source.once('close', onClose);
  });
}

/** How much of an unneeded body `release` reads, and for how long, before it drops the connection instead. */
const RELEASE_LIMIT_BYTES = 64 * 1024;
const RELEASE_MS = 1_000;

/**
 * Reads the rest of a body nobody needs, in the background, so undici can reuse its connection: a
 * well-behaved upstream ends the stream right after the response. One that goes on for longer than a
 * second or further than 64 KiB (or the size cap) is dropped, as an unread body always was.
 */
function release(source: Readable, remaining: number): void {
  if (source.readableEnded || source.destroyed) return;
  let budget = Math.min(RELEASE_LIMIT_BYTES, remaining);
  const timer = setTimeout(() => discard(source), RELEASE_MS);
  timer.unref();
  source.once('close', () => clearTimeout(timer));
  source.on('error', () => {});
  source.on('data', (chunk: Buffer) => {
    budget -= chunk.byteLength;
    if (budget < 0) discard(source);
  });
  source.resume();
}

/** Drops a response body unread; undici then closes the connection (its abort error has nowhere to go). */
export function discard(source: Readable): void {
  source.on('error', () => {});
  source.destroy();
}
