/**
 * Asks of a 2025-era upstream to a 2026-07-28 agent, as input-required rounds (issue 19).
 *
 * A 2025-era upstream asks in the middle of a call (`sampling/createMessage`, `elicitation/create`,
 * `roots/list` as server→client requests) and waits for the answer; a 2026-07-28 agent is asked only in a
 * call's result (`input_required`) and answers by calling again. So the upstream call is held: it goes on in
 * this process while the agent is asked, its ask pending, and the agent's round 1 is answered `input_required`
 * with the ask as an input request and the hub's signed state naming the held call (`p`). The agent's next
 * round (same token, tool and arguments, checked by the state) hands its `inputResponses` to the pending asks
 * and waits again for the upstream's next move: the result, or another ask (another round).
 *
 * All of it stays within the call's deadline: a held call whose agent does not come back is cancelled when
 * its upstream call's deadline passes (the pool's call timeout, counted from round 1). A held call lives in the
 * process that made it; on PostgreSQL a round that reaches another replica is relayed to it (`held-relay.ts`). A
 * round that comes after the deadline, or whose holder is gone, is told the held call is gone
 * (`hub.round_expired`) and starts over. At most `MAX_HELD` calls are held at once; beyond it an
 * ask is refused to the upstream, as an agent that cannot answer refuses it.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolError } from '@modelcontextprotocol/server';
import type { AskRecord } from '../../audit/calls.js';
import { type Cancellation, onCancel } from '../../cancellation.js';
import type { Ask, AskRelay } from '../../upstream/asks.js';
import type { UpstreamLogMessage } from '../../upstream/index.js';
import type { Json } from '../../wire.js';
import { canAnswer } from './input-requests.js';

/** Most calls held at once in this process (each holds an upstream call open). */
export const MAX_HELD = 1000;

/** One ask of the upstream, waiting for the agent's answer. */
interface PendingAsk {
  key: string;
  ask: Ask;
  resolve(answer: Record<string, unknown>): void;
  reject(error: unknown): void;
}

/** What a round relays of what the upstream sends while it waits (bound to that round's request). */
export interface RoundSink {
  onLog?: ((message: UpstreamLogMessage) => void) | undefined;
  onProgress?: ((progress: { progress: number; total?: number; message?: string }) => void) | undefined;
}

/** The upstream's next move: its outcome (or failure), or asks for the agent. */
export type HeldStep<T> = { done: true; outcome: Promise<T> } | { done: false; asks: PendingAsk[] };

/** A round's step as the agent hears of it: the outcome, or asks keyed for its `inputResponses`, the call's id. */
export type RoundStep<T> =
  | { done: true; outcome: Promise<T> }
  | { done: false; heldId: string; asks: ReadonlyArray<{ key: string; ask: Ask }> };

/** One upstream call held across the agent's rounds. */
export class HeldCall<T> {
  /** Aborts the upstream call (the held call was dropped). */
  readonly controller = new AbortController();
  private outcome: Promise<T> | undefined;
  private settled = false;
  private readonly waiting: PendingAsk[] = [];
  /** Asks handed to the agent, answered at its next round. */
  private outstanding: PendingAsk[] = [];
  private wake: (() => void) | undefined;
  private count = 0;
  /**
   * Where the upstream's log messages and progress go now: the round waiting on the call (each round is its
   * own request; what arrives between rounds has no request to ride and is dropped).
   */
  round: RoundSink | undefined;

  constructor(
    readonly id: string,
    /** The input capabilities the agent declared: an ask beyond them is refused to the upstream at once. */
    private readonly declared: Json,
    private readonly onSettled: (call: HeldCall<T>) => void,
  ) {}

  /** The relay the upstream call's asks go to (`upstream/asks.ts`). */
  readonly relay: AskRelay = (ask, limits) =>
    new Promise((resolve, reject) => {
      if (!canAnswer(ask, this.declared)) {
        reject(new ProtocolError(-32601, `The agent did not declare it can answer ${ask.method}.`));
        return;
      }
      this.count += 1;
      const pending: PendingAsk = { key: `gatehouse-ask-${this.count}`, ask, resolve, reject };
      // The call's deadline passing, or the held call dropped, ends the wait.
      const stop = () => reject(new ProtocolError(-32603, 'The agent did not answer within the call deadline.'));
      limits.signal.addEventListener('abort', stop, { once: true });
      this.controller.signal.addEventListener('abort', stop, { once: true });
      this.waiting.push(pending);
      this.wake?.();
    });

  /** Starts the upstream call (`run` is given the held call's signal and relay). */
  start(run: (signal: AbortSignal, relay: AskRelay) => Promise<T>): void {
    this.outcome = run(this.controller.signal, this.relay);
    this.outcome.then(
      () => this.finish(),
      () => this.finish(),
    );
  }

  /**
   * Hands the agent's answers to the asks of the last round (an ask it left unanswered is refused to the
   * upstream), and records them in `asks` for this round's audit row.
   */
  answer(responses: Record<string, unknown> | undefined, asks: AskRecord[]): void {
    for (const pending of this.outstanding) {
      const answer = responses?.[pending.key];
      const answered = answer !== null && typeof answer === 'object' && !Array.isArray(answer);
      asks.push({ method: pending.ask.method, answered });
      if (answered) pending.resolve(answer as Record<string, unknown>);
      else pending.reject(new ProtocolError(-32602, `The agent gave no answer to ${pending.ask.method}.`));
    }
    this.outstanding = [];
  }

  /** Waits for the upstream's next move; asks met are handed out (and answered at the next round). */
  async next(): Promise<HeldStep<T>> {
    const outcome = this.outcome as Promise<T>;
    while (!this.settled && this.waiting.length === 0) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        void outcome.then(
          () => resolve(),
          () => resolve(),
        );
      });
      this.wake = undefined;
    }
    if (this.waiting.length === 0) return { done: true, outcome };
    this.outstanding = this.waiting.splice(0);
    return { done: false, asks: this.outstanding };
  }

  /** Whether the upstream call has ended (answered, failed, or cancelled). */
  get ended(): boolean {
    return this.settled;
  }

  /** Drops the held call: its upstream call is cancelled, its pending asks refused. */
  drop(reason: string): void {
    if (!this.controller.signal.aborted) this.controller.abort(new Error(reason));
  }

  private finish(): void {
    this.settled = true;
    this.wake?.();
    this.onSettled(this);
  }
}

/** The calls held in this process, claimed by their next round. */
export class HeldCalls<T> {
  private readonly held = new Map<string, { call: HeldCall<T>; owner: string }>();
  /** Begins the id of every call held here: a round for one that is gone is not relayed to other replicas. */
  private readonly tag = `${randomUUID().slice(0, 8)}.`;

  get size(): number {
    return this.held.size;
  }

  /** A new held call for `owner` (a token id), or undefined when this process holds the most it may. */
  create(owner: string, declared: Json): HeldCall<T> | undefined {
    if (this.held.size >= MAX_HELD) return undefined;
    const call: HeldCall<T> = new HeldCall<T>(`${this.tag}${randomUUID()}`, declared, (settled) => {
      if (this.held.get(settled.id)?.call === settled) this.held.delete(settled.id);
    });
    this.held.set(call.id, { call, owner });
    return call;
  }

  /** Whether the call `id` was held here (held still, or gone). */
  madeHere(id: string): boolean {
    return id.startsWith(this.tag);
  }

  /** Whether this process holds the call `id` (a round another replica received may be for it). */
  holds(id: string): boolean {
    return this.held.has(id);
  }

  /**
   * One round of `call`, claimed or new: it waits for the upstream's next move, relaying what the upstream sends
   * meanwhile to `sink`; asks met park the call for the next round. An agent that gives up on its round (`signal`)
   * gives up the call: the upstream is cancelled.
   */
  async round(
    call: HeldCall<T>,
    owner: string,
    signal: AbortSignal | Cancellation,
    sink: RoundSink,
  ): Promise<RoundStep<T>> {
    const forget = onCancel(signal, () => call.drop('The agent went away.'));
    call.round = sink;
    const step = await call.next().finally(() => {
      forget();
      call.round = undefined;
    });
    if (step.done) return step;
    this.park(call, owner);
    return { done: false, heldId: call.id, asks: step.asks };
  }

  /**
   * The next round of the held call `id`, if this process holds it for `owner`: the agent's answers go to the
   * waiting upstream (recorded in `asks` for the round's audit row), which goes on. Undefined when it is not here.
   */
  continueHere(
    id: string,
    owner: string,
    responses: Record<string, unknown> | undefined,
    asks: AskRecord[],
    signal: AbortSignal | Cancellation,
    sink: RoundSink,
  ): Promise<RoundStep<T>> | undefined {
    const call = this.claim(id, owner);
    if (!call) return undefined;
    call.answer(responses, asks);
    return this.round(call, owner, signal, sink);
  }

  /** Takes the held call `id` of `owner` for one round (a second, concurrent round finds none). */
  claim(id: string, owner: string): HeldCall<T> | undefined {
    const entry = this.held.get(id);
    if (!entry || entry.owner !== owner) return undefined;
    this.held.delete(id);
    return entry.call;
  }

  /** Puts a claimed call back, for its next round. */
  park(call: HeldCall<T>, owner: string): void {
    // One that ended meanwhile (its deadline passed) is not kept: its next round finds none.
    if (!call.ended) this.held.set(call.id, { call, owner });
  }

  /** Drops every held call (the hub is closing). */
  close(): void {
    for (const { call } of this.held.values()) call.drop('The hub is closing.');
    this.held.clear();
  }
}
