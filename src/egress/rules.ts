/**
 * The address rules of one guard: judging IP literals, resolving names through the (injectable) resolver and
 * judging every answer, and the `lookup` that hands `net.connect` only addresses judged on that very answer.
 */
import { promises as dns, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { GatehouseError } from '../errors.js';
import { classifyAddress, type NetworkPolicy } from './classify.js';
import { describeNetworkError } from './network-errors.js';

export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

export const systemResolver: Resolver = async (hostname) => {
  const answers = await dns.lookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export interface AddressRules {
  readonly policy: NetworkPolicy;
  readonly testPublic: readonly string[];
  readonly resolver: Resolver;
}

// Messages name the host the caller gave, never an address a name resolved to.
function blocked(host: string, details?: Record<string, unknown>): GatehouseError {
  return new GatehouseError(
    'private_network_blocked',
    `Refused to connect to ${host}: it is on a private, loopback, link-local or otherwise non-public network.`,
    details,
  );
}

/** Throws `private_network_blocked` unless the IP literal is allowed (the literal is the caller's own input). */
export function assertLiteralAllowed(rules: AddressRules, address: string): void {
  const verdict = classifyAddress(address, rules.policy, rules.testPublic);
  if (!verdict.allowed) throw blocked(address, { range: verdict.range });
}

/** Resolves a name and returns its answers only if every one of them is allowed. */
export async function resolveAllowed(
  rules: AddressRules,
  host: string,
): Promise<Array<{ address: string; family: 4 | 6 }>> {
  let answers: Array<{ address: string; family: 4 | 6 }>;
  try {
    answers = await rules.resolver(host);
  } catch (err) {
    const { reason, text } = describeNetworkError(err);
    throw new GatehouseError('upstream_unreachable', `Could not resolve ${host}: ${text}.`, { reason }, { cause: err });
  }
  if (answers.length === 0) {
    throw new GatehouseError('upstream_unreachable', `Could not resolve ${host}: no addresses.`, {
      reason: 'dns_failure',
    });
  }
  // One disallowed answer blocks the name: the connector may pick any of them.
  for (const answer of answers) {
    if (!classifyAddress(answer.address, rules.policy, rules.testPublic).allowed) throw blocked(host);
  }
  // The family is derived, not trusted: Node picks the socket type from it.
  return answers.map((a) => ({ address: a.address, family: isIP(a.address) === 6 ? 6 : 4 }));
}

/**
 * A `net.connect` lookup that resolves through the guard's resolver and judges the very answer it returns, so a
 * DNS answer that changes between `check()` and connect cannot slip an unchecked address into the connection.
 * Node calls it only for names; IP literals are judged by the connector.
 */
export function guardedLookup(rules: AddressRules): LookupFunction {
  return (hostname, options, callback) => {
    resolveAllowed(rules, hostname).then(
      (answers) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
        const usable: LookupAddress[] = answers.filter((a) => !family || a.family === family);
        const first = usable[0];
        if (!first) {
          const err = new GatehouseError('upstream_unreachable', `Could not resolve ${hostname}: no usable address.`, {
            reason: 'dns_failure',
          });
          callback(err as NodeJS.ErrnoException, '', 0);
        } else if (options.all) {
          callback(null, usable);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (err: GatehouseError) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };
}
