/**
 * The MCP `Transport` over a spawned child's pipes: newline-delimited JSON-RPC written to its stdin,
 * messages read from its stdout by the spawner (which owns the bounds) and handed in here.
 *
 * It is stdio-shaped for the SDK (it has `pid` and `stderr`), so the SDK applies its stdio probe
 * verdicts — a `server/discover` probe that times out means a legacy server, not an outage — and,
 * not being the SDK's own `StdioClientTransport`, it probes in place: no sibling process is spawned.
 *
 * - Messages that arrive before `start()` are queued (bounded) and delivered on start.
 * - `onclose` fires once, when the child has exited or its stdout closed (or on `close()`).
 * - `close()` stops the child (its whole process group).
 * - A task answering a call that declared the Tasks extension is kept for that call (`task-results.ts`).
 */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import {
  type JSONRPCMessage,
  SdkError,
  SdkErrorCode,
  serializeMessage,
  type Transport,
} from '@modelcontextprotocol/client';
import { GatehouseError } from '../../errors.js';
import { TaskAnswers } from '../task-results.js';

/** Messages kept for a transport nobody has started yet; more is a misbehaving server. */
const MAX_QUEUED = 1000;

export class StdioChildTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined;

  /**
   * Always `null`: the spawner reads stderr as bounded lines (`onStderrLine`). The property exists
   * so the SDK recognises a stdio transport (`'stderr' in transport && 'pid' in transport`).
   */
  readonly stderr = null;

  private started = false;
  private ended = false;
  private closeFired = false;
  private queue: JSONRPCMessage[] = [];
  private readonly halt = new AbortController();
  private readonly taskAnswers = new TaskAnswers();

  constructor(
    readonly pid: number,
    private readonly stdin: Writable,
    private readonly stopChild: () => Promise<unknown>,
  ) {}

  /** Whether the child's side has ended (exit, closed stdout, or `close()`). */
  get closed(): boolean {
    return this.ended;
  }

  async start(): Promise<void> {
    if (this.started) throw new SdkError(SdkErrorCode.AlreadyConnected, 'The stdio transport was already started.');
    this.started = true;
    const queued = this.queue;
    this.queue = [];
    for (const message of queued) this.onmessage?.(this.taskAnswers.received(message));
    if (this.ended) queueMicrotask(() => this.fireClose());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.ended || !this.stdin.writable) throw new SdkError(SdkErrorCode.NotConnected, 'Not connected');
    this.taskAnswers.sent(message);
    if (this.stdin.write(serializeMessage(message))) return;
    try {
      await once(this.stdin, 'drain', { signal: this.halt.signal });
    } catch (error) {
      throw new SdkError(SdkErrorCode.ConnectionClosed, 'The stdio server went away while a message was being sent.', {
        cause: error,
      });
    }
  }

  async close(): Promise<void> {
    await this.stopChild();
    this.end();
  }

  /** From the spawner: one JSON-RPC message read from stdout. */
  deliver(message: JSONRPCMessage): void {
    if (this.ended) return;
    if (this.started) {
      this.onmessage?.(this.taskAnswers.received(message));
      return;
    }
    if (this.queue.length < MAX_QUEUED) this.queue.push(message);
    else {
      this.report(
        new GatehouseError('upstream_protocol_error', 'The stdio server sent too much before it was asked anything.', {
          reason: 'unsolicited_flood',
        }),
      );
    }
  }

  /** From the spawner: something went wrong that the protocol layer should hear about. */
  report(error: Error): void {
    this.onerror?.(error);
  }

  /** From the spawner (or `close()`): the channel is over. Fires `onclose` once, after start. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.queue = [];
    this.halt.abort();
    if (this.started) this.fireClose();
  }

  private fireClose(): void {
    if (this.closeFired) return;
    this.closeFired = true;
    this.onclose?.();
  }
}
