/**
 * Turns network failures into catalogue errors. Node's and undici's own messages embed the resolved address
 * (`connect ECONNREFUSED 10.0.0.5:443`), so only the error code is read and the message is written here.
 */
import { findGatehouseError, GatehouseError } from '../errors.js';

const REASONS: Record<string, [reason: string, text: string]> = {
  ENOTFOUND: ['dns_failure', 'the name does not resolve'],
  EAI_AGAIN: ['dns_failure', 'the name could not be resolved right now'],
  EAI_NODATA: ['dns_failure', 'the name has no addresses'],
  EAI_NONAME: ['dns_failure', 'the name does not resolve'],
  ECONNREFUSED: ['connection_refused', 'the connection was refused'],
  ECONNRESET: ['connection_reset', 'the connection was reset'],
  EPIPE: ['connection_reset', 'the connection was closed'],
  UND_ERR_SOCKET: ['connection_reset', 'the connection was closed'],
  UND_ERR_CLOSED: ['connection_reset', 'the connection was closed'],
  ETIMEDOUT: ['connect_timeout', 'the connection timed out'],
  UND_ERR_CONNECT_TIMEOUT: ['connect_timeout', 'the connection timed out'],
  EHOSTUNREACH: ['host_unreachable', 'the host is unreachable'],
  ENETUNREACH: ['network_unreachable', 'the network is unreachable'],
  EADDRNOTAVAIL: ['network_unreachable', 'the address is not available'],
};

/** The first `code` in an error's cause chain, mapped to a reason and a sentence free of addresses. */
export function describeNetworkError(err: unknown): { reason: string; text: string } {
  const seen = new Set<unknown>();
  let current: unknown = err;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const code = (current as { code?: unknown }).code;
    const known = typeof code === 'string' ? REASONS[code] : undefined;
    if (known) return { reason: known[0], text: known[1] };
    current = (current as { cause?: unknown }).cause;
  }
  return { reason: 'network_error', text: 'a network error occurred' };
}

/** The caller's own deadline or cancellation: passed through untouched so it can report its own timeout. */
function isAbort(err: unknown): boolean {
  const name = (err as { name?: unknown } | null)?.name;
  return name === 'AbortError' || name === 'TimeoutError';
}

/** Maps a failure of undici's fetch (or of a body read) to the catalogue; the original stays as `cause`. */
export function toEgressError(err: unknown, host: string, during: 'connect' | 'body' = 'connect'): unknown {
  const known = findGatehouseError(err);
  if (known) return known;
  if (isAbort(err)) return err;
  const options = { cause: err };
  // undici reports network failures as TypeError('fetch failed', {cause}); another TypeError is a request it refused
  // to build (credentials in the URL, a bad header value). Its message may quote a header value, so it is dropped.
  if (during === 'connect' && err instanceof TypeError && err.cause === undefined && err.message !== 'fetch failed') {
    const message = 'The upstream request is invalid (credentials in the URL or a bad header value).';
    return new GatehouseError('validation_error', message, { reason: 'invalid_request' }, options);
  }
  const { reason, text } = describeNetworkError(err);
  const where = during === 'body' ? ' while reading the response' : '';
  return new GatehouseError('upstream_unreachable', `Could not reach ${host}${where}: ${text}.`, { reason }, options);
}
