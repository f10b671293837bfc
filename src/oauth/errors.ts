/** OAuth endpoints answer RFC 6749 §5.2 errors (`{error, error_description}`), from the catalogue's `oauth.*` codes. */
import { type ErrorCode, GatehouseError, isGatehouseError } from '../errors.js';

type OAuthCode = Extract<ErrorCode, `oauth.${string}`>;

export function oauthError(code: OAuthCode, description?: string): GatehouseError {
  return new GatehouseError(code, description);
}

/** The RFC error word of a catalogue code (`oauth.invalid_grant` → `invalid_grant`). */
export function rfcCode(error: GatehouseError): string {
  if (error.code.startsWith('oauth.')) return error.code.slice('oauth.'.length);
  if (error.code === 'rate_limited') return 'temporarily_unavailable';
  // A request for something that is not there (a well-known path, an endpoint) is the request's fault.
  if (['validation_error', 'payload_too_large', 'unsupported_media_type', 'not_found'].includes(error.code)) {
    return 'invalid_request';
  }
  return 'server_error';
}

/** The status and body an OAuth endpoint answers for any failure (never a stack, never a secret). */
export function oauthErrorAnswer(error: unknown): { status: number; body: Record<string, string> } {
  const known = isGatehouseError(error) ? error : new GatehouseError('internal_error');
  const status = known.code === 'internal_error' ? 500 : known.code === 'rate_limited' ? 429 : known.status;
  return { status, body: { error: rfcCode(known), error_description: known.message } };
}
