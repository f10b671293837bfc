/** Small helpers shared by the egress tests: a scripted resolver and catching a GatehouseError. */
import { isIP } from 'node:net';
import { expect } from 'vitest';
import type { Resolver } from '../../src/egress/index.js';
import { GatehouseError } from '../../src/errors.js';

export type ScriptedResolver = Resolver & { calls: string[] };

/**
 * Answers from a table; a function entry sees how many times that name was asked before. Unknown names fail like
 * NXDOMAIN. Every question is recorded in `calls`.
 */
export function scriptedResolver(table: Record<string, string[] | ((asked: number) => string[])>): ScriptedResolver {
  const calls: string[] = [];
  const resolver = async (hostname: string) => {
    const asked = calls.filter((h) => h === hostname).length;
    calls.push(hostname);
    const entry = table[hostname];
    if (!entry) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const addresses = typeof entry === 'function' ? entry(asked) : entry;
    return addresses.map((address) => ({ address, family: isIP(address) === 6 ? (6 as const) : (4 as const) }));
  };
  return Object.assign(resolver, { calls });
}

/** A resolver that fails the test if anything asks it (IP literals must never reach DNS). */
export const noDns: Resolver = async (hostname) => {
  throw new Error(`unexpected DNS question for ${hostname}`);
};

/** Awaits a promise that must reject with a GatehouseError and returns that error. */
export async function rejection(promise: Promise<unknown>): Promise<GatehouseError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, 'expected a rejection').toBeInstanceOf(GatehouseError);
  return caught as GatehouseError;
}
