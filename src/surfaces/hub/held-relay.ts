/**
 * Held calls across replicas (PostgreSQL). A held call (`held-calls.ts`) lives in the process that made it: its
 * upstream call is open there. Behind a balancer without affinity the agent's next round may reach another
 * replica; that replica relays the round to the holder instead of refusing it, and answers the agent with the
 * holder's step (the upstream's next asks, or its outcome), as if the call were its own.
 *
 * The bodies go through `held_rounds` rows (an agent's answers and a tool's result are larger than a NOTIFY
 * payload may be); the `gatehouse_rounds` channel only says which row to read:
 * - `round` {id, p}: a replica asks whoever holds `p` to take the round stored under `id`.
 * - `ack` {id}: the holder took it, and says so again every `HEARTBEAT_MS` while the upstream works.
 * - `step` {id}: the holder's step is stored under `{id}:step`.
 * - `log` / `progress` {id, …}: what the upstream sent while the round waits (dropped when too large to notify).
 * - `drop` {id}: the agent went away: the holder cancels the upstream call, as it would for its own round.
 *
 * A round nobody takes within `ACK_MS`, or whose holder falls silent for `SILENT_MS`, is answered
 * `hub.round_expired`: the holder is gone, and with it the upstream call. Rows are removed by the replica that
 * relayed the round once answered; rows left by a replica that died are purged after `PURGE_AFTER_MS`.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolError } from '@modelcontextprotocol/server';
import type { AskRecord } from '../../audit/calls.js';
import { type Cancellation, onCancel } from '../../cancellation.js';
import { type ErrorCode, type ErrorDetails, findGatehouseError, GatehouseError } from '../../errors.js';
import type { Store } from '../../store/db.js';
import { parseJson } from '../../store/json.js';
import type { Ask } from '../../upstream/asks.js';
import type { UpstreamLogMessage } from '../../upstream/index.js';
import { type UpstreamRpcError, upstreamRpcErrorOf } from '../../upstream/map-error.js';
import type { HeldCalls, RoundSink, RoundStep } from './held-calls.js';

const CHANNEL = 'gatehouse_rounds';
/** How long a relayed round waits for its holder to take it. */
const ACK_MS = 3_000;
/** How often a holder says it still works on a relayed round. */
const HEARTBEAT_MS = 5_000;
/** A holder silent this long is gone. */
const SILENT_MS = 3 * HEARTBEAT_MS;
/** Rows older than this are left by a replica that died mid-round. */
const PURGE_AFTER_MS = 10 * 60_000;
const PURGE_EVERY_MS = 60_000;
/** PostgreSQL refuses NOTIFY payloads of 8000 bytes or more. */
const MAX_NOTIFY_BYTES = 7_900;

type Message =
  | { t: 'round'; id: string; p: string }
  | { t: 'ack' | 'step' | 'drop'; id: string }
  | { t: 'log'; id: string; m: UpstreamLogMessage }
  | { t: 'progress'; id: string; g: { progress: number; total?: number; message?: string } };

interface RoundBody {
  owner: string;
  responses?: Record<string, unknown> | undefined;
}

/** A failed outcome, as the relaying replica rebuilds it (the gate answers it as it would its own). */
type RelayedError =
  | { gatehouse: { code: ErrorCode; message: string; details?: ErrorDetails; rpc?: UpstreamRpcError } }
  | { protocol: { code: number; message: string; data?: unknown } }
  | { message: string };

interface StepBody {
  records: AskRecord[];
  asks?: Array<{ key: string; ask: Ask }>;
  outcome?: unknown;
  error?: RelayedError;
}

/** What a relaying replica is told about one of its rounds. */
interface Waiter {
  sink: RoundSink;
  heard(kind: 'ack' | 'step'): void;
}

export class HeldRelay<T> {
  private held: HeldCalls<T> | undefined;
  private readonly waiters = new Map<string, Waiter>();
  /** Rounds this process holds for another replica, each with what cancels it. */
  private readonly serving = new Map<string, AbortController>();
  private readonly unsubscribe: () => void;
  private readonly purger: NodeJS.Timeout;

  constructor(private readonly store: Store) {
    this.unsubscribe = store.subscribe(CHANNEL, (payload) => this.onMessage(payload));
    this.purger = setInterval(() => void this.purge().catch(() => {}), PURGE_EVERY_MS);
    this.purger.unref();
  }

  /** The calls this process holds: rounds relayed for them are taken here. */
  serveFrom(held: HeldCalls<T>): void {
    this.held = held;
  }

  /**
   * Relays the next round of the held call `p` to the replica that holds it, and resolves with its step (the
   * asks answered are recorded in `asks`); undefined when no replica takes it (the holder is gone).
   */
  async continueElsewhere(
    p: string,
    owner: string,
    responses: Record<string, unknown> | undefined,
    asks: AskRecord[],
    signal: AbortSignal | Cancellation,
    sink: RoundSink,
  ): Promise<RoundStep<T> | undefined> {
    // A call this process held and no longer holds is gone: no other replica has it.
    if (this.held?.madeHere(p)) return undefined;
    const id = randomUUID();
    const body: RoundBody = { owner, ...(responses ? { responses } : {}) };
    await this.store.db
      .insertInto('held_rounds')
      .values({ id, body: JSON.stringify(body), created_ms: Date.now() })
      .execute();
    try {
      const answer = await this.await(id, p, signal, sink);
      if (answer === 'gone') return undefined;
      if (answer === 'abandoned') {
        await this.send({ t: 'drop', id });
        return { done: true, outcome: settled(Promise.reject(signal.reason ?? new Error('The agent went away.'))) };
      }
      const row = await this.store.db
        .selectFrom('held_rounds')
        .select('body')
        .where('id', '=', `${id}:step`)
        .executeTakeFirst();
      const step = row ? parseJson<StepBody | undefined>(row.body, undefined) : undefined;
      if (!step) return undefined;
      asks.push(...step.records);
      if (step.asks) return { done: false, heldId: p, asks: step.asks };
      const outcome = step.error ? Promise.reject(rebuiltError(step.error)) : Promise.resolve(step.outcome as T);
      return { done: true, outcome: settled(outcome) };
    } finally {
      this.waiters.delete(id);
      await this.store.db
        .deleteFrom('held_rounds')
        .where('id', 'in', [id, `${id}:step`])
        .execute()
        .catch(() => {});
    }
  }

  close(): void {
    this.unsubscribe();
    clearInterval(this.purger);
    for (const controller of this.serving.values()) controller.abort(new Error('The hub is closing.'));
  }

  /** Publishes the round and waits for its holder: taken and answered, nobody took it, or the agent left. */
  private await(
    id: string,
    p: string,
    signal: AbortSignal | Cancellation,
    sink: RoundSink,
  ): Promise<'step' | 'gone' | 'abandoned'> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let forget = () => {};
      const silence = (ms: number) => {
        clearTimeout(timer);
        timer = setTimeout(() => finish('gone'), ms);
      };
      const finish = (how: 'step' | 'gone' | 'abandoned') => {
        clearTimeout(timer);
        forget();
        resolve(how);
      };
      this.waiters.set(id, {
        sink,
        heard: (kind) => (kind === 'step' ? finish('step') : silence(SILENT_MS)),
      });
      forget = onCancel(signal, () => finish('abandoned'));
      silence(ACK_MS);
      this.send({ t: 'round', id, p }).catch((error: unknown) => {
        clearTimeout(timer);
        forget();
        reject(error);
      });
    });
  }

  private onMessage(payload: string): void {
    const message = parseJson<Message | undefined>(payload, undefined);
    if (!message || typeof message.id !== 'string') return;
    switch (message.t) {
      case 'round':
        if (typeof message.p === 'string' && this.held?.holds(message.p)) void this.take(message.id, message.p);
        return;
      case 'drop':
        this.serving.get(message.id)?.abort(new Error('The agent went away.'));
        return;
      case 'ack':
      case 'step':
        this.waiters.get(message.id)?.heard(message.t);
        return;
      case 'log':
        this.waiters.get(message.id)?.sink.onLog?.(message.m);
        return;
      case 'progress':
        this.waiters.get(message.id)?.sink.onProgress?.(message.g);
        return;
    }
  }

  /** Takes a round relayed to this process for a call it holds, and stores its step for the relaying replica. */
  private async take(id: string, p: string): Promise<void> {
    const held = this.held;
    const controller = new AbortController();
    let heartbeat: NodeJS.Timeout | undefined;
    try {
      const row = await this.store.db.selectFrom('held_rounds').select('body').where('id', '=', id).executeTakeFirst();
      const round = row ? parseJson<RoundBody | undefined>(row.body, undefined) : undefined;
      if (!held || !round || typeof round.owner !== 'string') return;
      const records: AskRecord[] = [];
      const sink: RoundSink = {
        onLog: (m) => void this.send({ t: 'log', id, m }).catch(() => {}),
        onProgress: (g) => void this.send({ t: 'progress', id, g }).catch(() => {}),
      };
      const step = held.continueHere(p, round.owner, round.responses, records, controller.signal, sink);
      // Claimed by a concurrent round, or not this owner's: no answer, so the relaying replica says it is gone.
      if (!step) return;
      this.serving.set(id, controller);
      await this.send({ t: 'ack', id });
      heartbeat = setInterval(() => void this.send({ t: 'ack', id }).catch(() => {}), HEARTBEAT_MS);
      const next = await step;
      const body: StepBody = { records };
      if (!next.done) body.asks = next.asks.map(({ key, ask }) => ({ key, ask }));
      else {
        try {
          body.outcome = await next.outcome;
        } catch (error) {
          body.error = relayedError(error);
        }
      }
      await this.store.db
        .insertInto('held_rounds')
        .values({ id: `${id}:step`, body: JSON.stringify(body), created_ms: Date.now() })
        .execute();
      await this.send({ t: 'step', id });
    } catch {
      // The store failed: the relaying replica hears nothing more and answers its agent the call is gone.
    } finally {
      clearInterval(heartbeat);
      this.serving.delete(id);
    }
  }

  private async send(message: Message): Promise<void> {
    const payload = JSON.stringify(message);
    // Log messages and progress are best effort, as they are on the holder's own rounds; the rest is always small.
    if (Buffer.byteLength(payload) > MAX_NOTIFY_BYTES) return;
    await this.store.publish(CHANNEL, payload);
  }

  private async purge(): Promise<void> {
    await this.store.db
      .deleteFrom('held_rounds')
      .where('created_ms', '<', Date.now() - PURGE_AFTER_MS)
      .execute();
  }
}

/** The outcome, read when the caller gets to it: a rejection is never reported unhandled meanwhile. */
function settled<T>(outcome: Promise<T>): Promise<T> {
  outcome.catch(() => {});
  return outcome;
}

function relayedError(error: unknown): RelayedError {
  const known = findGatehouseError(error);
  if (known) {
    const rpc = upstreamRpcErrorOf(known);
    return {
      gatehouse: {
        code: known.code,
        message: known.message,
        ...(known.details ? { details: known.details } : {}),
        ...(rpc ? { rpc } : {}),
      },
    };
  }
  if (error instanceof ProtocolError) {
    return {
      protocol: { code: error.code, message: error.message, ...(error.data !== undefined ? { data: error.data } : {}) },
    };
  }
  return { message: error instanceof Error ? error.message : String(error) };
}

/** The error as the holder had it: the upstream's own JSON-RPC error stays behind a `rpc_error` (its cause). */
function rebuiltError(error: RelayedError): Error {
  if ('gatehouse' in error) {
    const { code, message, details, rpc } = error.gatehouse;
    const cause = rpc ? new ProtocolError(rpc.code, rpc.message, rpc.data) : undefined;
    return new GatehouseError(code, message, details, cause ? { cause } : undefined);
  }
  if ('protocol' in error) return new ProtocolError(error.protocol.code, error.protocol.message, error.protocol.data);
  return new Error(error.message);
}
