/**
 * The tool-view picker (issue 22): what `/mcp` lists to an agent — every tool (`all`), search mode's
 * meta-tools (`search`) or one toolset (`toolset:<name>`). Used for a token's view and for the platform
 * default `hub.toolView`; toolsets are offered from `/api/toolsets`.
 */
import { api } from './api';
import { useAsync, useLive } from './ui';

/** A token's "no view of its own": the platform setting `hub.toolView` applies. */
export const PLATFORM_DEFAULT = '';

/** The toolsets' names, for the picker (none when they cannot be read, or when not `enabled`). */
export function useToolsetNames(enabled = true): string[] {
  const toolsets = useAsync(
    (signal) =>
      enabled
        ? api<{ toolsets: Array<{ name: string }> }>('/api/toolsets?limit=500', { signal })
        : Promise.resolve({ toolsets: [] }),
    [enabled],
  );
  useLive(['toolset.changed'], toolsets.reload);
  return toolsets.data?.toolsets.map((t) => t.name) ?? [];
}

export function ToolViewSelect(props: {
  value: string;
  onChange: (value: string) => void;
  toolsets: readonly string[];
  /** Offer "platform default" (a token's view), shown as what it resolves to. */
  platformDefault?: string;
  label: string;
  disabled?: boolean;
  name?: string;
  id?: string;
}) {
  const toolsetViews = props.toolsets.map((name) => `toolset:${name}`);
  // A view naming a toolset that is gone (or not listed) stays selectable as it is.
  if (props.value.startsWith('toolset:') && !toolsetViews.includes(props.value)) toolsetViews.push(props.value);
  return (
    <select
      aria-label={props.label}
      id={props.id}
      name={props.name}
      value={props.value}
      disabled={props.disabled}
      onChange={(e) => props.onChange(e.target.value)}
    >
      {props.platformDefault !== undefined && (
        <option value={PLATFORM_DEFAULT}>platform default ({props.platformDefault})</option>
      )}
      <option value="all">all tools</option>
      <option value="search">search</option>
      {toolsetViews.map((view) => (
        <option key={view} value={view}>
          {view}
        </option>
      ))}
    </select>
  );
}
