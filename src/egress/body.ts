/** Response size cap, enforced while the body streams so an endless or huge body never sits in memory. */
import type { Readable } from 'node:stream';
import { ReadableStream, type ReadableStreamReadResult } from 'node:stream/web';
import { GatehouseError } from '../errors.js';
import { toEgressError } from './network-errors.js';

export function responseTooLarge(limit: number): GatehouseError {
  return new GatehouseError('upstream_protocol_error', `The upstream response is larger than ${limit} bytes.`, {
    reason: 'response_too_large',
    limit,
  });
}

/**
 * Wraps a body in a counting stream: past `limit` bytes it errors with `response_too_large` and cancels the source
 * (undici then drops the connection instead of draining it). Read errors are mapped like connect errors.
 */
export function capBody(source: ReadableStream<Uint8Array>, limit: number, host: string): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let total = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (err) {
          controller.error(toEgressError(err, host, 'body'));
          return;
        }
        if (chunk.done) {
          controller.close();
          return;
        }
        total += chunk.value.byteLength;
        if (total > limit) {
          const err = responseTooLarge(limit);
          controller.error(err);
          reader.cancel(err).catch(() => {});
          return;
        }
        controller.enqueue(chunk.value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    // Pull only on demand, so nothing is read ahead of the consumer.
    { highWaterMark: 0 },
  );
}

/**
 * `capBody` for a Node stream (the dispatcher's answer): the same cap and error mapping, read on
 * demand, and cancelling destroys the source (undici then drops the connection instead of draining).
 */
export function capNodeBody(source: Readable, limit: number, host: string): ReadableStream<Uint8Array> {
  const chunks = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let total = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let chunk: IteratorResult<Buffer>;
        try {
          chunk = await chunks.next();
        } catch (err) {
          controller.error(toEgressError(err, host, 'body'));
          return;
        }
        if (chunk.done) {
          controller.close();
          return;
        }
        total += chunk.value.byteLength;
        if (total > limit) {
          const err = responseTooLarge(limit);
          controller.error(err);
          discard(source);
          return;
        }
        controller.enqueue(new Uint8Array(chunk.value.buffer, chunk.value.byteOffset, chunk.value.byteLength));
      },
      cancel() {
        discard(source);
      },
    },
    { highWaterMark: 0 },
  );
}

/** Drops a response body unread; undici then closes the connection (its abort error has nowhere to go). */
export function discard(source: Readable): void {
  source.on('error', () => {});
  source.destroy();
}
