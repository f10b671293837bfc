/**
 * The legacy HTTP+SSE client transport (the 2024-11-05 transport: a GET event stream that names a
 * POST endpoint), as the SDK ships it, with the two bounds the SDK leaves open: opening the stream
 * and waiting for its `endpoint` event has a deadline, and closing the transport fails a start still
 * waiting (the SDK's own start would stay pending forever, and a pooled connect with it). A stream that
 * could not be opened fails the start with the fetch's own error (the egress guard's typed refusal),
 * which the SDK's event source would otherwise flatten into a message.
 */
import { SSEClientTransport, type SSEClientTransportOptions } from '@modelcontextprotocol/client';
import { findGatehouseError, GatehouseError } from '../errors.js';

export class BoundedSseTransport extends SSEClientTransport {
  #stopStart: ((error: Error) => void) | undefined;
  /** The last typed failure of a request the transport made (the guard refusing the address, the cap, …). */
  #failure: GatehouseError | undefined;

  constructor(
    url: URL,
    options: SSEClientTransportOptions & { fetch: NonNullable<SSEClientTransportOptions['fetch']> },
    private readonly startTimeoutMs: number,
  ) {
    const { fetch } = options;
    super(url, {
      ...options,
      fetch: (input, init) =>
        fetch(input, init).catch((error: unknown) => {
          this.#failure = findGatehouseError(error) ?? this.#failure;
          throw error;
        }),
    });
  }

  override async start(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const stopped = new Promise<never>((_, reject) => {
      this.#stopStart = reject;
      timer = setTimeout(
        () =>
          reject(
            new GatehouseError('upstream_timeout', 'The upstream did not open its SSE stream in time.', {
              reason: 'sse_endpoint_timeout',
            }),
          ),
        this.startTimeoutMs,
      );
    });
    try {
      await Promise.race([super.start(), stopped]);
    } catch (error) {
      throw this.#failure ?? error;
    } finally {
      clearTimeout(timer);
      this.#stopStart = undefined;
    }
  }

  override async close(): Promise<void> {
    this.#stopStart?.(
      new GatehouseError('upstream_unreachable', 'The SSE connection was closed while it opened.', {
        reason: 'closed',
      }),
    );
    await super.close();
  }
}
