/**
 * Telling "the store cannot be reached" apart from "the store answered with an
 * error". Only the first is `memory.engine_unavailable` (retry shortly); an
 * error the database reports about the statement itself is never reclassified.
 */
import { GatehouseError, isGatehouseError } from '../errors.js';

export const RETRY_AFTER_S = 5;

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/** SQLite result codes that mean the file cannot be used right now (not that the statement was wrong). */
const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|CANTOPEN|IOERR|FULL|READONLY|NOTADB|CORRUPT|PROTOCOL)/;

export function isStoreUnreachable(error: unknown): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === 'string') {
      if (NETWORK_CODES.has(code)) return true;
      if (SQLITE_UNAVAILABLE.test(code)) return true;
      // PostgreSQL class 08 (connection exception), 57P01-57P03 (shutdown, cannot connect now), 53300 (too many connections).
      if (/^08...$/.test(code) || /^57P0[1-3]$/.test(code) || code === '53300') return true;
    }
    if (typeof message === 'string') {
      if (
        /Connection terminated|timeout exceeded when trying to connect|database connection is not open|driver has already been destroyed|Client has encountered a connection error/i.test(
          message,
        )
      ) {
        return true;
      }
    }
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

export function engineUnavailable(cause: unknown): GatehouseError {
  return new GatehouseError(
    'memory.engine_unavailable',
    `The memory engine cannot be reached right now; retry in ${RETRY_AFTER_S} seconds.`,
    { retry_after_s: RETRY_AFTER_S },
    { cause },
  );
}

/** Runs a store operation; an unreachable store becomes `memory.engine_unavailable`, anything else passes through. */
export async function withStore<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (!isGatehouseError(error) && isStoreUnreachable(error)) throw engineUnavailable(error);
    throw error;
  }
}
