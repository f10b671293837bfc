/**
 * The fetch the OAuth client uses: the egress guard's (address rules, pinned connect, no redirects
 * followed), with a deadline per request and a body cap far below the guard's (metadata documents and
 * token answers are small; a huge one is hostile).
 */
import type { FetchLike } from '@modelcontextprotocol/client';
import { GatehouseError } from '../errors.js';

export interface BoundedFetchOptions {
  timeoutMs: number;
  maxBytes: number;
}

export const OAUTH_FETCH_DEFAULTS: BoundedFetchOptions = { timeoutMs: 10_000, maxBytes: 256 * 1024 };

export function boundedFetch(guarded: FetchLike, options: BoundedFetchOptions = OAUTH_FETCH_DEFAULTS): FetchLike {
  return async (input, init) => {
    const deadline = AbortSignal.timeout(options.timeoutMs);
    const signal = init?.signal ? AbortSignal.any([init.signal, deadline]) : deadline;
    let response: Response;
    try {
      response = await guarded(input, { ...init, signal });
    } catch (error) {
      if (deadline.aborted) throw refused('the authorization server did not answer in time', error);
      throw error;
    }
    const body = await readCapped(response, options.maxBytes, deadline);
    return new Response(body as BodyInit | null, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/**
 * A response's body, read chunk by chunk and refused (`oauth.metadata_refused`, the stream cancelled, the
 * rest never read) as soon as it passes `maxBytes`; null for an answer without one. Shared by the clients
 * that cap small answers (OIDC, the language-model client), which map the refusal to their own error.
 */
export async function readCapped(
  response: Response,
  maxBytes: number,
  deadline: AbortSignal,
): Promise<Uint8Array | null> {
  if (!response.body || response.status === 204 || response.status === 304) return null;
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) throw refused(`an authorization document is larger than ${maxBytes} bytes`);
      parts.push(value);
    }
  } catch (error) {
    await reader.cancel().catch(() => {});
    if (deadline.aborted) throw refused('the authorization server did not answer in time', error);
    throw error;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

export function refused(reason: string, cause?: unknown): GatehouseError {
  return new GatehouseError(
    'oauth.metadata_refused',
    `The upstream's authorization metadata was refused: ${reason}.`,
    {
      reason,
    },
    cause === undefined ? undefined : { cause },
  );
}
