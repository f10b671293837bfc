import type { FastifyInstance } from 'fastify';

export interface DrainOptions {
  /** Starts the drain (not ready, no new claims, locks released); see `Gateway.drain`. */
  drain(): Promise<void>;
  /** How long to keep serving after it starts, before closing (0: close at once). */
  drainMs: number;
}

/**
 * SIGINT/SIGTERM drain, then close the app (which closes pools and children); a second signal exits
 * at once. Draining: `/readyz` answers 503 so the balancer stops sending new requests, while calls in
 * flight, open streams and whatever still arrives are served for `drainMs`; then the app closes.
 */
export function closeOnSignals(app: FastifyInstance, drain?: DrainOptions): void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) process.exit(1);
    closing = true;
    app.log.info({ signal, drainMs: drain?.drainMs ?? 0 }, 'shutting down');
    const drained = drain
      ? drain
          .drain()
          .catch((error: unknown) => app.log.warn({ err: error }, 'drain failed; closing after the wait anyway'))
          .then(() => new Promise((resolve) => setTimeout(resolve, drain.drainMs)))
      : Promise.resolve();
    drained
      .then(() => {
        const closed = app.close();
        // The drain is over: streams still open (SSE, GET streams) and calls still running end now, or
        // the server would wait for them for ever.
        if (drain) app.server.closeAllConnections();
        return closed;
      })
      .then(
        () => process.exit(0),
        (error: unknown) => {
          app.log.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
