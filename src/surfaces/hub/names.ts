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

function shortHash(text: string, round: number): string {
  // Round 0 is the plain hash of the original; a later round salts it, so a name chosen to equal
  // another's hashed form cannot keep matching it.
  return createHash('sha256')
    .update(round === 0 ? text : `${round}:${text}`, 'utf8')
    .digest('hex')
    .slice(0, 8);
}

function hashed(serverId: string, original: string, max: number, round = 0): string {
  const safe = original.replace(/[^A-Za-z0-9_.-]/g, '_');
  const prefix = `${serverId}${SEPARATOR}`;
  const suffix = `-${shortHash(original, round)}`;
  return prefix + safe.slice(0, Math.max(0, max - prefix.length - suffix.length)) + suffix;
}

/** Past this many rounds of re-hashing, the originals still colliding are left out (never shadowed). */
const MAX_ROUNDS = 32;

/**
 * Exposed names for one server's items (tools or prompts), deterministic for a given set of originals.
 * Returns original → exposed. Every party to a collision is hashed, then re-hashed with a salted round
 * for as long as any two exposed names are equal — including a plain name that equals another item's
 * hashed form — so the result is always one name per original, each name one original's.
 */
export function exposeNames(serverId: string, originals: readonly string[], max: number): Map<string, string> {
  const rounds = new Map<string, number>();
  const current = new Map<string, string>();
  for (const original of [...new Set(originals)].sort()) {
    const candidate = `${serverId}${SEPARATOR}${original}`;
    current.set(
      original,
      ALLOWED.test(original) && candidate.length <= max ? candidate : hashed(serverId, original, max),
    );
    rounds.set(original, -1);
  }
  for (let pass = 0; pass <= MAX_ROUNDS; pass++) {
    const byName = new Map<string, string[]>();
    for (const [original, exposed] of current) byName.set(exposed, [...(byName.get(exposed) ?? []), original]);
    const colliding = [...byName.values()].filter((group) => group.length > 1).flat();
    if (colliding.length === 0) break;
    for (const original of colliding) {
      if (pass === MAX_ROUNDS) {
        current.delete(original);
        continue;
      }
      const round = (rounds.get(original) ?? -1) + 1;
      rounds.set(original, round);
      current.set(original, hashed(serverId, original, max, round));
    }
  }
  // Back in the caller's order.
  const result = new Map<string, string>();
  for (const original of originals) {
    const exposed = current.get(original);
    if (exposed !== undefined) result.set(original, exposed);
  }
  return result;
}

export const GATEHOUSE_PREFIX = `gatehouse${SEPARATOR}`;

/**
 * Operators' display names (overrides) joining the collision check: given every aggregated name in use
 * (`taken`) and the display name each item wants, the names granted. A name another item's aggregated
 * name already is, or that two items want, is granted to none of them (each keeps its aggregated name):
 * never one shadowing another. Deterministic for a given set.
 */
export function grantDisplayNames<K>(taken: ReadonlySet<string>, wanted: ReadonlyMap<K, string>): Map<K, string> {
  const wantedBy = new Map<string, number>();
  for (const name of wanted.values()) wantedBy.set(name, (wantedBy.get(name) ?? 0) + 1);
  const granted = new Map<K, string>();
  for (const [key, name] of wanted) if (wantedBy.get(name) === 1 && !taken.has(name)) granted.set(key, name);
  return granted;
}

const UI_SCHEME = 'ui://';

/** MCP Apps' extension id (SEP-1865), negotiated both ways through the hub. */
export { UI_EXTENSION } from '../../upstream/client-capabilities.js';

/**
 * Resources in the aggregate are wrapped so a read routes back to its server. An MCP Apps `ui://` resource
 * keeps its scheme, which hosts look for: `ui://{serverId}/{the upstream's path}`.
 */
export function wrapResourceUri(serverId: string, uri: string): string {
  if (uri.startsWith(UI_SCHEME)) return `${UI_SCHEME}${serverId}/${uri.slice(UI_SCHEME.length)}`;
  return `gatehouse://${serverId}/${encodeURIComponent(uri)}`;
}

/** Whether a URI is one the aggregate made (`gatehouse://`): never an upstream's own. */
export function isGatehouseUri(uri: string): boolean {
  return uri.startsWith('gatehouse://');
}

export function unwrapResourceUri(wrapped: string): { serverId: string; uri: string } | undefined {
  const ui = /^ui:\/\/([a-z0-9][a-z0-9-]{0,31})\/(.+)$/.exec(wrapped);
  if (ui) return { serverId: ui[1] as string, uri: `${UI_SCHEME}${ui[2]}` };
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

/**
 * A tool's `_meta` as the aggregate lists it: the `ui://` resource its MCP Apps UI renders (`ui.resourceUri`,
 * or the draft's `ui/resourceUri`) wrapped like the resource itself, so a host reads it back through `/mcp`.
 */
export function wrapUiMeta(serverId: string, meta: Record<string, unknown>): Record<string, unknown> {
  const wrap = (value: unknown) =>
    typeof value === 'string' && value.startsWith(UI_SCHEME) ? wrapResourceUri(serverId, value) : value;
  const ui = meta.ui;
  const hasUi = typeof ui === 'object' && ui !== null && !Array.isArray(ui) && 'resourceUri' in ui;
  if (!hasUi && !('ui/resourceUri' in meta)) return meta;
  return {
    ...meta,
    ...(hasUi ? { ui: { ...ui, resourceUri: wrap((ui as { resourceUri: unknown }).resourceUri) } } : {}),
    ...('ui/resourceUri' in meta ? { 'ui/resourceUri': wrap(meta['ui/resourceUri']) } : {}),
  };
}
