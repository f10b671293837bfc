/**
 * What the hub's `/mcp` lists to an agent: every tool it may use (`all`), three meta-tools to search,
 * describe and call them (`search`), or a named toolset (`toolset:<name>`). A token's own `toolView`
 * wins; without one, the platform setting `hub.toolView`. Every surface asks `toolViewFor`, so toolsets
 * resolve in one place.
 */
import { z } from 'zod';
import type { Settings } from '../settings/keys.js';
import type { TokenPrincipal } from './principal.js';

/** A toolset's name: the same shape as a group name, so it fits a URL segment (`/mcp/t/{toolset}`). */
export const TOOLSET_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** The stored and accepted form: `all`, `search` or `toolset:<name>`. */
export const toolViewValue = z
  .string()
  .max(72)
  .refine((value) => value === 'all' || value === 'search' || parseToolset(value) !== undefined, {
    message: 'a tool view is "all", "search" or "toolset:<name>" (lower-case letters, digits, - and _)',
  });

export type ToolView = { kind: 'all' } | { kind: 'search' } | { kind: 'toolset'; name: string };

function parseToolset(value: string): string | undefined {
  if (!value.startsWith('toolset:')) return undefined;
  const name = value.slice('toolset:'.length);
  return TOOLSET_NAME.test(name) ? name : undefined;
}

/** A stored value as a view; anything unreadable is `all` (the value is validated on every way in). */
export function parseToolView(value: string | null | undefined): ToolView | undefined {
  if (value === 'all') return { kind: 'all' };
  if (value === 'search') return { kind: 'search' };
  const name = value ? parseToolset(value) : undefined;
  return name !== undefined ? { kind: 'toolset', name } : undefined;
}

/** The view in force for this agent now: its token's own, else the platform default. */
export function toolViewFor(
  principal: Pick<TokenPrincipal, 'toolView'>,
  settings: Pick<Settings, 'hub.toolView'>,
): ToolView {
  return parseToolView(principal.toolView) ?? parseToolView(settings['hub.toolView']) ?? { kind: 'all' };
}
