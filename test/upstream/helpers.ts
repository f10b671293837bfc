/** Shared by the upstream tests: a pool with test-sized defaults, typed-error assertions, fetch wrappers. */
import type { FetchLike } from '@modelcontextprotocol/client';
import { expect } from 'vitest';
import { type ErrorCode, GatehouseError } from '../../src/errors.js';
import { type UpstreamOptions, UpstreamPool } from '../../src/upstream/index.js';

/** Everything each test created, closed in reverse order after it. */
export class Cleanup {
  private readonly closers: Array<() => Promise<unknown>> = [];

  add<T extends { close(): Promise<unknown> }>(thing: T): T {
    this.closers.push(() => thing.close());
    return thing;
  }

  async run(): Promise<void> {
    for (const close of this.closers.splice(0).reverse()) await close();
  }
}

export function makePool(overrides: Partial<UpstreamOptions> = {}): UpstreamPool {
  return new UpstreamPool({
    fetch: globalThis.fetch,
    sessionMode: 'pooled',
    poolMaxSize: 16,
    poolIdleMs: 60_000,
    listTimeoutMs: 5_000,
    callTimeoutMs: 5_000,
    ...overrides,
  });
}

/** Awaits `work`, expecting a GatehouseError with `code` (and details matching `details`). */
export async function expectFailure(
  work: Promise<unknown>,
  code: ErrorCode,
  details?: Record<string, unknown>,
): Promise<GatehouseError> {
  const error = await work.then(
    (value) => {
      throw new Error(`expected ${code}, got a result: ${JSON.stringify(value).slice(0, 200)}`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(GatehouseError);
  const typed = error as GatehouseError;
  expect({ code: typed.code, message: typed.message }).toMatchObject({ code });
  if (details) expect(typed.details).toMatchObject(details);
  return typed;
}

/**
 * A fetch that errors a response body past `limit` bytes with the egress guard's error, the way
 * the guard's streaming cap does, so tests prove that error survives the SDK unchanged.
 */
export function cappedFetch(limit: number, base: FetchLike = globalThis.fetch): FetchLike {
  return async (url, init) => {
    const response = await base(url, init);
    if (!response.body) return response;
    const reader = response.body.getReader();
    let seen = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        seen += value.byteLength;
        if (seen > limit) {
          await reader.cancel();
          return controller.error(
            new GatehouseError('upstream_protocol_error', 'The upstream response is larger than the limit.', {
              reason: 'response_too_large',
            }),
          );
        }
        controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** Waits until `check` holds (polling), failing after `ms`. */
export async function eventually(check: () => boolean, ms = 3_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
