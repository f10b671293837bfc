/**
 * Aggregated names: `<server>__<name>`, within the spec's `[A-Za-z0-9_.-]` and
 * a maximum length. A name that needs changing (characters outside the set,
 * too long) is cut deterministically and given a short hash of the original,
 * and two originals that would land on one name both get hashed — never one
 * silently shadowing the other. Server ids never contain `_` and `gatehouse` is
 * reserved, so `__` always splits and no upstream can take a `gatehouse__` name.
 */
import { createHash } from 'node:crypto';

export const SEPARATOR = '__';
const ALLOWED = /^[A-Za-z0-9_.-]+$/;

function shortHash(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 8);
}

function hashed(serverId: string, original: string, max: number): string {
  const safe = original.replace(/[^A-Za-z0-9_.-]/g, '_');
  const prefix = `${serverId}${SEPARATOR}`;
  const suffix = `-${shortHash(original)}`;
  return prefix + safe.slice(0, Math.max(0, max - prefix.length - suffix.length)) + suffix;
}

/**
 * Exposed names for one server's items (tools or prompts), deterministic for a given set of originals.
 * Returns original → exposed.
 */
export function exposeNames(serverId: string, originals: readonly string[], max: number): Map<string, string> {
  const plain = new Map<string, string>();
  for (const original of originals) {
    const candidate = `${serverId}${SEPARATOR}${original}`;
    plain.set(
      original,
      ALLOWED.test(original) && candidate.length <= max ? candidate : hashed(serverId, original, max),
    );
  }
  // Collisions (two originals → one name): every party to it gets the hashed form.
  const byName = new Map<string, string[]>();
  for (const [original, exposed] of plain) byName.set(exposed, [...(byName.get(exposed) ?? []), original]);
  const result = new Map<string, string>();
  for (const [exposed, originals_] of byName) {
    if (originals_.length === 1) result.set(originals_[0] as string, exposed);
    else for (const original of originals_) result.set(original, hashed(serverId, original, max));
  }
  return result;
}

export const GATEHOUSE_PREFIX = `gatehouse${SEPARATOR}`;

/** Resources in the aggregate are wrapped so a read routes back to its server. */
export function wrapResourceUri(serverId: string, uri: string): string {
  return `gatehouse://${serverId}/${encodeURIComponent(uri)}`;
}

export function unwrapResourceUri(wrapped: string): { serverId: string; uri: string } | undefined {
  const match = /^gatehouse:\/\/([a-z0-9][a-z0-9-]{0,31})\/(.+)$/.exec(wrapped);
  if (!match) return undefined;
  try {
    return { serverId: match[1] as string, uri: decodeURIComponent(match[2] as string) };
  } catch {
    return undefined;
  }
}

/**
 * A resource template in the aggregate: wrapped like a resource URI, its `{…}` expressions left as they
 * are, so an agent that expands it gets a wrapped URI (the expanded values percent-encoded as RFC 6570
 * does) that `unwrapResourceUri` turns back into the upstream's.
 */
export function wrapResourceTemplate(serverId: string, template: string): string {
  const parts = template.split(/(\{[^{}]*\})/);
  return `gatehouse://${serverId}/${parts.map((part, i) => (i % 2 === 1 ? part : encodeURIComponent(part))).join('')}`;
}
