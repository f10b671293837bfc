/**
 * An SSE answer to a direct call, read as the SDK's transport reads it: only `message` events with
 * data carry JSON-RPC; notifications are skipped and server→client requests handed on until the
 * response to the call arrives.
 *
 * On a 2025-era session (`resumeHeaders` given) a stream that ends or drops before the response,
 * once the upstream has given its events ids, is resumed as the SDK resumes it: a GET carrying
 * `Last-Event-ID`, after the delay the upstream asked for (`retry:`) or the SDK's backoff. 2025-11-25
 * servers close request streams on purpose this way, to be polled during a long call.
 *
 * Two bounds the SDK path has too, or does better: the wait is never shorter than `RESUME_MIN_MS` (the
 * floor of the SDK path's pacer, `connection.ts`), so `retry: 0` is no busy loop; and resumed streams that
 * keep ending at once with nothing for the call (`MAX_IDLE_RESUMES` in a row) fail it with a clear error.
 */
import { StringDecoder } from 'node:string_decoder';
import { SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { createParser } from 'eventsource-parser';
import { type Cancellation, onCancel } from '../cancellation.js';
import type { Exchanged } from '../egress/index.js';
import { findGatehouseError, GatehouseError } from '../errors.js';
import { type CallExchange, isNotification } from './direct-call.js';
import { inSdkOrder, isPlainObject, isRequest, type Json } from './direct-wire.js';
import type { Exchange } from './types.js';

/** The SDK transport's reconnection defaults (`DEFAULT_STREAMABLE_HTTP_RECONNECTION_OPTIONS`). */
const RECONNECT = { initialDelayMs: 1_000, maxDelayMs: 30_000, growFactor: 1.5, maxRetries: 2 };

/**
 * A request's stream is resumed no sooner than this after it ended, whatever the upstream's `retry:`:
 * on both paths (the SDK path's `StreamPacer` floors its waits with it too, `connection.ts`).
 */
export const RESUME_MIN_MS = 250;
/** Resumed streams in a row that may end with nothing for the call, each soon after it opened, before it fails. */
const MAX_IDLE_RESUMES = 8;
/** A resumed stream that stayed open this long before it ended was being polled, not looped on. */
const RESUME_STABLE_MS = 1_000;

/** Where to resume from, and how soon: the last event id seen and the upstream's `retry:` (ms). */
interface Cursor {
  lastEventId?: string;
  retryMs?: number;
  /** The stream being read carried a server→client request for the call (an ask, a ping). */
  asked?: boolean;
}

/** The response to the call in an SSE answer (and the streams that resume it). */
export async function answerInStreams(exchange: Exchange, call: CallExchange, answer: Exchanged): Promise<Json> {
  const cursor: Cursor = {};
  let chunks = answer.chunks();
  // Resumed streams in a row that ended soon with nothing for the call; when the one being read was opened.
  let idle = 0;
  let resumedAt = 0;
  for (;;) {
    try {
      const response = await answerInStream(call, chunks, cursor);
      if (response) return response;
    } catch (error) {
      // A dropped connection may be resumed; anything the upstream said wrong may not.
      if (!canResume(call, cursor) || findGatehouseError(error)?.code !== 'upstream_unreachable') throw error;
    }
    if (!canResume(call, cursor)) throw streamEnded();
    if (resumedAt !== 0) {
      // Progress: the upstream asked something for the call, or held the stream open a while (a poll).
      const progressed = cursor.asked === true || Date.now() - resumedAt >= RESUME_STABLE_MS;
      idle = progressed ? 0 : idle + 1;
      if (idle >= MAX_IDLE_RESUMES) throw resumeLimit();
    }
    cursor.asked = false;
    chunks = await reopen(exchange, call, cursor);
    resumedAt = Date.now();
  }
}

const canResume = (call: CallExchange, cursor: Cursor) =>
  call.resumeHeaders !== undefined && cursor.lastEventId !== undefined && !call.signal.aborted;

/** Reads one stream: the response to the call, or `undefined` when the stream ends without it. */
async function answerInStream(
  call: CallExchange,
  chunks: AsyncGenerator<Buffer>,
  cursor: Cursor,
): Promise<Json | undefined> {
  const events: string[] = [];
  const parser = createParser({
    onEvent(event) {
      if (event.id) cursor.lastEventId = event.id;
      // As the SDK: only `message` events with data carry JSON-RPC.
      if ((event.event === undefined || event.event === 'message') && event.data) events.push(event.data);
    },
    onRetry(ms) {
      cursor.retryMs = ms;
    },
  });
  // A StringDecoder costs a fraction of a TextDecoder to make (one per answer); unlike it, it keeps a leading
  // byte order mark, which the SDK's TextDecoderStream drops: dropped here too.
  const decoder = new StringDecoder('utf8');
  let first = true;
  // Returning from the loop ends the generator, which drops the rest of the stream.
  for await (const chunk of chunks) {
    let text = decoder.write(chunk);
    if (first && text.length > 0) {
      first = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    parser.feed(text);
    for (const data of events.splice(0)) {
      const message = JSON.parse(data) as unknown;
      if (!isPlainObject(message)) continue;
      if (message.id === call.id && ('result' in message || 'error' in message)) return message;
      if (call.onRequest && isRequest(message)) {
        cursor.asked = true;
        await call.onRequest(message);
      } else if (call.onNotification && isNotification(message)) call.onNotification(message);
    }
  }
  return undefined;
}

/**
 * The resumed stream, or the failure the SDK would report: it tries `maxRetries` times, and a 405
 * means the upstream will not resume at all.
 */
async function reopen(exchange: Exchange, call: CallExchange, cursor: Cursor): Promise<AsyncGenerator<Buffer>> {
  let firstFailure: unknown;
  for (let attempt = 0; attempt < RECONNECT.maxRetries; attempt++) {
    const backoff = RECONNECT.initialDelayMs * RECONNECT.growFactor ** attempt;
    // Never sooner than the floor; never later than the SDK's longest backoff (a `retry:` past 2^31 ms would
    // make a timer that fires at once).
    const wait = Math.max(cursor.retryMs ?? backoff, RESUME_MIN_MS);
    await sleep(Math.min(wait, RECONNECT.maxDelayMs), call.signal);
    let failure: unknown;
    try {
      const headers = inSdkOrder({ ...call.resumeHeaders, 'last-event-id': cursor.lastEventId! });
      const answer = await exchange(call.url, { method: 'GET', headers, signal: call.signal });
      if (answer.status >= 200 && answer.status <= 299) return answer.chunks();
      await answer.text().catch(() => {});
      if (answer.status === 405) break;
      failure = new SdkHttpError(SdkErrorCode.ClientHttpFailedToOpenStream, 'Failed to open SSE stream: ', {
        status: answer.status,
        statusText: '',
      });
    } catch (error) {
      if (call.signal.aborted) throw error;
      failure = error;
    }
    firstFailure ??= failure;
  }
  throw firstFailure ?? streamEnded();
}

function sleep(ms: number, signal: AbortSignal | Cancellation): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const forget = onCancel(signal, () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
    const timer = setTimeout(() => {
      forget();
      resolve();
    }, ms);
  });
}

const resumeLimit = () =>
  new GatehouseError(
    'upstream_protocol_error',
    `The upstream ended the call's response stream ${MAX_IDLE_RESUMES} times in a row without answering.`,
    { reason: 'resume_limit' },
  );

const streamEnded = () =>
  new GatehouseError('upstream_unreachable', 'The upstream closed the response stream without answering.', {
    reason: 'stream_ended',
  });
