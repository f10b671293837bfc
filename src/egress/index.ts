/** Guarded outbound HTTP: address classification, scheme rules, connect-time address pinning, size caps. */
export { type AddressClass, classifyAddress, type NetworkPolicy } from './classify.js';
export type { Exchanged } from './exchange.js';
export {
  createEgressGuard,
  type EgressGuard,
  type EgressOptions,
  type ExchangeRequest,
} from './guard.js';
export type { Resolver } from './rules.js';
