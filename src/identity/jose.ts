/**
 * `jose`, loaded on first use (signing or verifying a token), not at start: a gateway that never sees an
 * OAuth or OIDC token never loads it, and a restart does not wait for it. One import, shared.
 */
type Jose = typeof import('jose');

let loading: Promise<Jose> | undefined;

export function jose(): Promise<Jose> {
  loading ??= import('jose');
  return loading;
}
