/**
 * Async context that costs nothing while no scope of it is open.
 *
 * On Node 20 an `AsyncLocalStorage` that has run once keeps a promise hook installed for the rest of
 * the process: from then on every promise anywhere — undici's, fastify's, each call's own — pays an
 * init hook that copies the stores onto it. The scopes Gatehouse opens are few and bounded (an SDK
 * client's operation and its requests, a call that relays an upstream's asks or its task answer, a
 * listen request being prepared), and the hub's direct calls, which carry most of the traffic, open
 * none. So a `ScopedStorage` counts its scopes in flight and disables its storage when the last one
 * settles: with none open, a promise costs what it costs without async context (at c=16 through
 * `/mcp`, about a tenth of the gateway's CPU per call on the machine this was measured on).
 *
 * The contract is `AsyncLocalStorage.run`'s for an asynchronous `fn`, with one narrowing: the store is
 * there for whatever `fn` starts until the promise `fn` returned settles. Work that outlives it (a
 * listener left behind) may find no store — as it would find none had it been started outside.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export class ScopedStorage<T> {
  private readonly storage = new AsyncLocalStorage<T>();
  /** Scopes whose `fn` has not settled yet. */
  private open = 0;

  /** The store of the scope the caller runs in, if any. */
  getStore(): T | undefined {
    return this.storage.getStore();
  }

  /** Runs `fn` in a scope whose store is `store`; the scope closes when `fn`'s promise settles. */
  run<R>(store: T, fn: () => Promise<R>): Promise<R> {
    this.open += 1;
    let running: Promise<R>;
    try {
      running = this.storage.run(store, fn);
    } catch (error) {
      this.close();
      throw error;
    }
    return running.finally(() => this.close());
  }

  private close(): void {
    this.open -= 1;
    // Node removes its promise hook once no storage of the process is enabled (OpenTelemetry's, with
    // tracing on, keeps its own); the next `run` installs it again.
    if (this.open === 0) this.storage.disable();
  }
}
