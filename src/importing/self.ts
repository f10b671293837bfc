/**
 * Whether a URL reaches this gateway itself. An imported client config often lists Gatehouse's own `/mcp`
 * (the file `connect` wrote, say): registering it would make the hub an upstream of itself, serving every
 * agent its tools again through whichever token the entry carries, one level deeper at each refresh.
 */
import os from 'node:os';
import { isLoopbackHost } from '../config.js';

export interface OwnAddress {
  /** This gateway as its clients reach it (`GATEHOUSE_PUBLIC_URL`, or where it listens). */
  publicUrl: string;
  /** The bind address (`GATEHOUSE_HOST`) and the port actually bound. */
  host: string;
  port: number;
}

const portOf = (url: URL) => Number(url.port || (url.protocol === 'https:' ? 443 : 80));
const bare = (host: string) => host.replace(/^\[|\]$/g, '').toLowerCase();

/** Every address of this machine's interfaces (a wildcard bind listens on all of them). */
function interfaceAddresses(): Set<string> {
  const addresses = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const entry of list ?? []) addresses.add(bare(entry.address));
  }
  return addresses;
}

export function reachesSelf(target: string, own: OwnAddress): boolean {
  if (!URL.canParse(target)) return false;
  const url = new URL(target);
  const pub = new URL(own.publicUrl);
  if (bare(url.hostname) === bare(pub.hostname) && portOf(url) === portOf(pub)) return true;
  if (portOf(url) !== own.port) return false;
  const host = bare(url.hostname);
  if (isLoopbackHost(host) || host === bare(own.host)) return true;
  const wildcard = own.host === '0.0.0.0' || own.host === '::';
  return wildcard && (host === '0.0.0.0' || host === '::' || interfaceAddresses().has(host));
}
