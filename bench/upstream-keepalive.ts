/**
 * Preloaded into the fixture upstreams the benchmark starts (`--import bench/upstream-keepalive.ts`).
 *
 * `test/fixtures/http.ts` sets `server.keepAliveTimeout = 1_000` so that tests end quickly. Against an
 * undici client (Node's fetch, the SDK, the gateway's egress) that is not a neutral choice: undici
 * subtracts a 2 s safety threshold from the server's `Keep-Alive: timeout=1` hint, gets a negative
 * value and closes the socket after every answer — one TCP connect per request — and where the hint is
 * absent (SSE answers) it keeps idle sockets 4 s while the server drops them after 1 s, so a socket
 * reused after 1–4 s idle is reset (seen as `fetch failed` / `connection_reset`). Neither happens with
 * an ordinary server, so a benchmark upstream keeps Node's default instead: every `http.Server` in this
 * process gets a keep-alive timeout of at least `BENCH_UPSTREAM_KEEPALIVE_MS` (default 5 000 ms).
 */
import http from 'node:http';

const floorMs = Number(process.env.BENCH_UPSTREAM_KEEPALIVE_MS ?? 5_000);
const values = new WeakMap<http.Server, number>();

Object.defineProperty(http.Server.prototype, 'keepAliveTimeout', {
  configurable: true,
  get(this: http.Server): number {
    return values.get(this) ?? floorMs;
  },
  set(this: http.Server, value: number) {
    values.set(this, Math.max(value, floorMs));
  },
});
