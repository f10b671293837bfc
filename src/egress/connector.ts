/**
 * The undici connector every guarded connection goes through. Names are resolved by the guarded `lookup` inside
 * `net.connect`/`tls.connect` (so TLS still verifies the certificate against the name); IP literals, for which
 * Node never calls `lookup`, are judged here. No other path opens a socket.
 */
import { buildConnector } from 'undici';
import { type AddressRules, assertLiteralAllowed, guardedLookup } from './rules.js';
import { isIpLiteral } from './target.js';

export function guardedConnector(rules: AddressRules, timeoutMs: number): buildConnector.connector {
  if (rules.policy === 'any') return buildConnector({ timeout: timeoutMs });
  const connect = buildConnector({ timeout: timeoutMs, lookup: guardedLookup(rules) });
  return (options, callback) => {
    const host = options.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIpLiteral(host)) {
      try {
        assertLiteralAllowed(rules, host);
      } catch (err) {
        callback(err as Error, null);
        return;
      }
    }
    connect(options, callback);
  };
}
