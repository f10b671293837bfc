/**
 * An SSE answer to a direct call, read as the SDK's transport reads it: only `message` events with
 * data carry JSON-RPC; notifications are skipped and server→client requests handed on until the
 * response to the call arrives.
 */
import { createParser } from 'eventsource-parser';
import { GatehouseError } from '../errors.js';
import type { CallExchange } from './direct-call.js';
import { isPlainObject, isRequest, type Json } from './direct-wire.js';

/** The response to the call in an SSE answer. */
export async function answerInStream(call: CallExchange, chunks: AsyncGenerator<Buffer>): Promise<Json> {
  const events: string[] = [];
  const parser = createParser({
    onEvent(event) {
      // As the SDK: only `message` events with data carry JSON-RPC.
      if ((event.event === undefined || event.event === 'message') && event.data) events.push(event.data);
    },
  });
  const decoder = new TextDecoder();
  // Returning from the loop ends the generator, which drops the rest of the stream.
  for await (const chunk of chunks) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    for (const data of events.splice(0)) {
      const message = JSON.parse(data) as unknown;
      if (!isPlainObject(message)) continue;
      if (message.id === call.id && ('result' in message || 'error' in message)) return message;
      if (call.onRequest && isRequest(message)) await call.onRequest(message);
    }
  }
  throw new GatehouseError('upstream_unreachable', 'The upstream closed the response stream without answering.', {
    reason: 'stream_ended',
  });
}
