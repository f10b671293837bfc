/** URL parsing and the scheme rules that apply once the target's address class has been judged. */
import { isIP } from 'node:net';
import { GatehouseError } from '../errors.js';

/** WHATWG parsing normalises numeric hosts (`http://2130706433`, `0x7f.0.0.1`, `127.1`) to dotted IPv4. */
export function parseTarget(input: string | URL): URL {
  if (input instanceof URL) return new URL(input.href);
  try {
    return new URL(input);
  } catch (err) {
    throw new GatehouseError(
      'validation_error',
      'The upstream URL is not a valid absolute URL.',
      {
        reason: 'invalid_url',
      },
      { cause: err },
    );
  }
}

/** The host to resolve or connect to: IPv6 literals lose their brackets. Empty for host-less URLs (`file:`). */
export function bareHost(url: URL): string {
  const host = url.hostname;
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** True when Node connects without calling `lookup` (the same test `net.connect` applies). */
export function isIpLiteral(host: string): boolean {
  return isIP(host) !== 0;
}

/** The scheme verdict: `https` always, `http` only when allowed; anything else is unsupported. */
export function schemeError(url: URL, allowHttp: boolean): GatehouseError | undefined {
  if (url.protocol === 'https:' || (url.protocol === 'http:' && allowHttp)) return undefined;
  if (url.protocol === 'http:') {
    return new GatehouseError('validation_error', 'Plain http:// upstreams are not allowed; use https://.', {
      reason: 'insecure_scheme',
    });
  }
  return new GatehouseError('validation_error', `The URL scheme "${url.protocol.slice(0, -1)}" is not supported.`, {
    reason: 'unsupported_scheme',
  });
}

export function defaultPort(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}
