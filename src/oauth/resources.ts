/**
 * The protected resources: every MCP surface of this gateway, named by its exact public URL
 * (`GATEHOUSE_PUBLIC_URL` + path). A token is issued for one of them and refused by every other.
 */

/** `/mcp`, `/mcp/admin`, `/mcp/memory`, `/mcp/s/{server}`: the paths an OAuth token may be for. */
const SURFACE_PATH = /^\/mcp(?:\/admin|\/memory|\/s\/[a-z0-9][a-z0-9-]{0,31})?$/;

/** The surface path of a request path (query and one trailing slash dropped), or undefined. */
export function surfacePath(requestPath: string): string | undefined {
  const path = requestPath.split('?')[0]?.replace(/(.)\/$/, '$1') ?? '';
  return SURFACE_PATH.test(path) ? path : undefined;
}

/** The surface path a `resource` URL names on this gateway (`base` is the public URL), or undefined. */
export function resourcePath(resource: string, base: string): string | undefined {
  let url: URL;
  let origin: URL;
  try {
    url = new URL(resource);
    origin = new URL(base);
  } catch {
    return undefined;
  }
  if (url.search || url.hash || url.username || url.password || url.origin !== origin.origin) return undefined;
  const prefix = origin.pathname.replace(/\/$/, '');
  if (!url.pathname.startsWith(`${prefix}/`)) return undefined;
  return surfacePath(url.pathname.slice(prefix.length));
}

/** The resource URL of a surface path. */
export function resourceUrl(base: string, path: string): string {
  return `${base}${path}`;
}

/** RFC 9728 §3.1: the metadata URL inserts the well-known segment before the resource's path. */
export function resourceMetadataUrl(base: string, path: string): string {
  const url = new URL(base);
  const prefix = url.pathname.replace(/\/$/, '');
  return `${url.origin}/.well-known/oauth-protected-resource${prefix}${path}`;
}

/** The one scope a token needs on every surface; `group:<name>` words narrow the groups asked for. */
export const BASE_SCOPE = 'mcp';
export const GROUP_SCOPE_PREFIX = 'group:';

/** Parses a scope string: words, deduplicated and sorted (so consent compares by value). */
export function parseScope(scope: string | undefined): string[] {
  const words = (scope ?? '').split(' ').filter(Boolean);
  return [...new Set(words.length === 0 ? [BASE_SCOPE] : words)].sort();
}

/** Whether every word is one Gatehouse understands. */
export function scopeKnown(words: readonly string[]): boolean {
  return words.every(
    (w) => w === BASE_SCOPE || (w.startsWith(GROUP_SCOPE_PREFIX) && w.length > GROUP_SCOPE_PREFIX.length),
  );
}

/** The groups a scope asks for (none: every group of the person). */
export function groupsAsked(words: readonly string[]): string[] {
  return words.filter((w) => w.startsWith(GROUP_SCOPE_PREFIX)).map((w) => w.slice(GROUP_SCOPE_PREFIX.length));
}
