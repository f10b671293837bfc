/**
 * The logging level each 2025-era agent session set (`logging/setLevel`), kept by the hub: upstream log messages
 * are relayed to a session that set one, at or above it. A session that set none takes the fast path and hears
 * no upstream logs (2026-07-28 requests carry their level in `_meta` instead).
 */
import type { LoggingLevel, Server } from '@modelcontextprotocol/server';

const SEVERITY: readonly LoggingLevel[] = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
];

const levels = new WeakMap<Server, LoggingLevel>();

/** Answers `logging/setLevel` on `server` by remembering the level for its session. */
export function handleSetLevel(server: Server): void {
  server.setRequestHandler('logging/setLevel', async (request) => {
    levels.set(server, request.params.level);
    return {};
  });
}

/** The level the session of `server` set, if it set one. */
export function sessionLogLevel(server: Server): LoggingLevel | undefined {
  return levels.get(server);
}

/** Whether a message at `level` passes `threshold` (an unknown level passes: the upstream's word is bounded, not judged). */
export function admits(level: string, threshold: string): boolean {
  const at = SEVERITY.indexOf(level as LoggingLevel);
  const floor = SEVERITY.indexOf(threshold as LoggingLevel);
  return at === -1 || floor === -1 || at >= floor;
}
