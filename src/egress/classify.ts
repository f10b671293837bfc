/**
 * Address classification: which IP addresses a network policy lets Gatehouse connect to.
 *
 * `public` admits only global unicast; `private` (an admin marked the server `privateNetwork`) also admits
 * loopback, RFC 1918 and IPv6 unique-local; `any` (the `MCP_ALLOW_PRIVATE_NETWORKS` dev switch) admits everything.
 * Cloud metadata endpoints stay blocked under `public` and `private`.
 */
import ipaddr from 'ipaddr.js';

export type NetworkPolicy = 'public' | 'private' | 'any';

export interface AddressClass {
  allowed: boolean;
  range: string;
}

/**
 * Metadata and platform endpoints. Some sit in ranges `private` admits (fd00:ec2::254 and fd20:ce::254 are ULA)
 * or are plain public unicast (Azure's 168.63.129.16), so the range rules alone would let them through.
 * Their IPv4-mapped, NAT64 and 6to4 forms are already caught by the range rules.
 */
const METADATA = new Set(
  [
    '169.254.169.254', // AWS, GCP, Azure, OCI, DigitalOcean instance metadata
    '169.254.170.2', // AWS ECS task metadata and credentials
    '100.100.100.200', // Alibaba Cloud
    '168.63.129.16', // Azure WireServer
    'fd00:ec2::254', // AWS IMDS over IPv6
    'fd20:ce::254', // GCP metadata over IPv6
  ].map((a) => ipaddr.parse(a).toNormalizedString()),
);

const PRIVATE_EXTRA = new Set(['loopback', 'private', 'uniqueLocal']);

// ipaddr.js calls every IPv6 address outside its special list `unicast`, including the deprecated
// IPv4-compatible ::/96 (`::7f00:1`); only 2000::/3 is allocated global unicast, so the rest is refused.
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/** Parses an address and unwraps IPv4-mapped IPv6 (`::ffff:a.b.c.d`), so it is judged as the IPv4 it reaches. */
function parse(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!ipaddr.isValid(address)) return undefined;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed;
}

function rangeOf(addr: ipaddr.IPv4 | ipaddr.IPv6): string {
  const range = addr.range();
  if (range === 'unicast' && addr.kind() === 'ipv6' && !addr.match(GLOBAL_UNICAST_V6)) return 'reserved';
  return range;
}

/**
 * Classifies one address under a policy. `testPublic` lists addresses to treat as `unicast`; it is a test seam
 * and is ignored unless `NODE_ENV=test`. Anything that does not parse as an IP address is refused.
 */
export function classifyAddress(address: string, policy: NetworkPolicy, testPublic?: readonly string[]): AddressClass {
  const addr = parse(address);
  if (!addr) return { allowed: false, range: 'invalid' };
  const normalized = addr.toNormalizedString();
  if (testPublic?.length && process.env.NODE_ENV === 'test') {
    if (testPublic.some((t) => parse(t)?.toNormalizedString() === normalized))
      return { allowed: true, range: 'unicast' };
  }
  if (policy === 'any') return { allowed: true, range: rangeOf(addr) };
  if (METADATA.has(normalized)) return { allowed: false, range: 'cloudMetadata' };
  const range = rangeOf(addr);
  return { allowed: range === 'unicast' || (policy === 'private' && PRIVATE_EXTRA.has(range)), range };
}
