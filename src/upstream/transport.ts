/**
 * The SDK's Streamable HTTP client transport, plus per-request bookkeeping: each request is sent
 * in its own scope and stays "pending" until a response with its id passes through `onmessage`.
 * If its response stream ends first, the operation that sent it fails now instead of at its timeout.
 * A task answering a call that declared the Tasks extension is kept for that call (`task-results.ts`).
 */
import {
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type MessageExtraInfo,
  StreamableHTTPClientTransport,
  type StreamableHTTPClientTransportOptions,
} from '@modelcontextprotocol/client';
import { GatehouseError } from '../errors.js';
import { TaskAnswers } from './task-results.js';
import { currentScope, runInScope, type Scope } from './trace.js';

type MessageHandler = (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
type SendOptions = Parameters<StreamableHTTPClientTransport['send']>[1];
type RequestId = string | number;

/** Marks a tap with the handler it wraps, so a handler read back and re-assigned is not wrapped twice. */
const WRAPPED = Symbol('wrapped handler');
type Tap = MessageHandler & { [WRAPPED]?: MessageHandler };

export class TracedHttpTransport extends StreamableHTTPClientTransport {
  private readonly pending = new Map<RequestId, Scope>();
  private tap: Tap | undefined;
  private readonly taskAnswers = new TaskAnswers();

  constructor(url: URL, options: StreamableHTTPClientTransportOptions) {
    super(url, options);
    // The SDK reassigns `onmessage` (its probe window, then the protocol layer, which also restores
    // what it read); an accessor puts one tap in front of whichever handler is current.
    Object.defineProperty(this, 'onmessage', {
      configurable: true,
      enumerable: true,
      get: () => this.tap,
      set: (handler: Tap | undefined) => {
        const inner = handler?.[WRAPPED] ?? handler;
        if (!inner) {
          this.tap = undefined;
          return;
        }
        const tap: Tap = (message, extra) => {
          if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id != null) {
            this.pending.delete(message.id);
          }
          inner(this.taskAnswers.received(message), extra);
        };
        tap[WRAPPED] = inner;
        this.tap = tap;
      },
    });
  }

  override async send(message: JSONRPCMessage | JSONRPCMessage[], options?: SendOptions): Promise<void> {
    this.taskAnswers.sent(message);
    const parent = currentScope();
    if (!parent || Array.isArray(message) || !isJSONRPCRequest(message)) return super.send(message, options);
    const id = message.id;
    const scope: Scope = { trace: parent.trace, requestId: id };
    this.pending.set(id, scope);
    parent.trace.onEnd(() => this.pending.delete(id));
    const onRequestStreamEnd = () => {
      options?.onRequestStreamEnd?.();
      this.streamEnded(id);
    };
    try {
      await runInScope(scope, () => super.send(message, { ...options, onRequestStreamEnd }));
    } catch (error) {
      this.pending.delete(id);
      throw error;
    }
  }

  /** A request's response stream ended; if it was never answered, fail its operation with the cause. */
  private streamEnded(id: RequestId): void {
    const scope = this.pending.get(id);
    if (!scope) return;
    this.pending.delete(id);
    scope.trace.fail(
      scope.bodyError ??
        scope.noted ??
        new GatehouseError('upstream_unreachable', 'The upstream closed the response stream without answering.', {
          reason: 'stream_ended',
        }),
    );
  }
}
