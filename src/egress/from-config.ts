/** The egress guard a Gatehouse configuration asks for. */
import type { Config } from '../config.js';
import { createEgressGuard, type EgressGuard, type NetworkPolicy, type Resolver } from './index.js';

/** The egress guard the configuration asks for; the global development switch turns it off for everyone. */
export function createEgressFromConfig(
  config: Config,
  resolver?: Resolver,
  policy: Exclude<NetworkPolicy, 'any'> = 'public',
): EgressGuard {
  return createEgressGuard({
    policy: config.allowPrivateNetworks ? 'any' : policy,
    allowHttp: config.allowHttp,
    maxResponseBytes: config.maxResponseSize,
    ...(config.nodeEnv === 'test' ? { testPublicAddresses: config.testPublicAddresses } : {}),
    ...(resolver ? { resolver } : {}),
  });
}
