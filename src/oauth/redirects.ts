/** Redirect URIs: which are acceptable to register, and which a request's URI matches (RFC 8252 loopback rule). */

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);
const REFUSED_SCHEMES = new Set([
  'javascript:',
  'data:',
  'file:',
  'vbscript:',
  'blob:',
  'about:',
  'ftp:',
  'ws:',
  'wss:',
]);

/** Why a redirect URI may not be registered, or undefined when it may. */
export function redirectUriProblem(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return `${JSON.stringify(uri.slice(0, 200))} is not an absolute URI`;
  }
  if (url.hash || uri.includes('#')) return 'a redirect URI may not have a fragment';
  if (url.username || url.password) return 'a redirect URI may not carry credentials';
  if (REFUSED_SCHEMES.has(url.protocol)) return `the scheme ${url.protocol} is not allowed for a redirect URI`;
  if (url.protocol === 'http:' && !LOOPBACK.has(url.hostname)) {
    return 'plain http is allowed only for a loopback redirect URI (127.0.0.1, [::1], localhost)';
  }
  // https, loopback http, or a native app's private-use scheme (RFC 8252 §7.1: `com.example.app:/cb`).
  if (
    url.protocol !== 'https:' &&
    url.protocol !== 'http:' &&
    !/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/.test(url.protocol)
  ) {
    return 'a custom-scheme redirect URI must be a reverse domain name (e.g. com.example.app:/callback)';
  }
  return undefined;
}

/**
 * Whether `requested` is one of `registered`: exact string match, except that a loopback http URI
 * matches whatever its port (native clients listen on a port picked at run time, RFC 8252 §7.3).
 */
export function redirectUriMatches(requested: string, registered: readonly string[]): boolean {
  if (registered.includes(requested)) return true;
  let url: URL;
  try {
    url = new URL(requested);
  } catch {
    return false;
  }
  // Only the port varies: credentials (`http://trusted.example@127.0.0.1/cb` reads as another host on the
  // consent page) and fragments never match.
  if (url.protocol !== 'http:' || !LOOPBACK.has(url.hostname) || url.hash || url.username || url.password) {
    return false;
  }
  const portless = (u: URL) => `${u.protocol}//${u.hostname}${u.pathname}${u.search}`;
  return registered.some((candidate) => {
    try {
      const reg = new URL(candidate);
      return reg.protocol === 'http:' && LOOPBACK.has(reg.hostname) && portless(reg) === portless(url);
    } catch {
      return false;
    }
  });
}
