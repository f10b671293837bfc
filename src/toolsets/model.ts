/**
 * Toolsets (issue 22): a named, curated set of tools from several servers,
 * served as a virtual server at `/mcp/t/{name}`. Entries name tools by server
 * and upstream name, so renaming a tool's display name never breaks a set;
 * policy stays per server (a toolset never lets anyone past a verdict).
 */
import { z } from 'zod';
import { serverIdSchema } from '../registry/ids.js';

/** Toolset names follow server ids: lowercase, digits and `-`, at most 32. */
export const toolsetNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'lowercase letters, digits and -, at most 32 characters');

export const MAX_TOOLSET_TOOLS = 500;

export const toolsetEntrySchema = z.strictObject({
  server: serverIdSchema,
  tool: z.string().min(1).max(256),
});

export type ToolsetEntry = z.infer<typeof toolsetEntrySchema>;

export const toolsetToolsSchema = z
  .array(toolsetEntrySchema)
  .max(MAX_TOOLSET_TOOLS)
  .refine((entries) => new Set(entries.map((e) => `${e.server}\u0000${e.tool}`)).size === entries.length, {
    message: 'each tool at most once',
  });

export interface Toolset {
  name: string;
  description: string | null;
  tools: ToolsetEntry[];
  createdAt: string;
  updatedAt: string;
  updatedBy: string | null;
}

/**
 * What a toolset's entry is now: `available` (listed and callable, maybe `gated`), or why it is not —
 * the tool is `quarantined` (with the pin's reason), `blocked` or `excluded` by the server's policy,
 * `missing` from the server's last handshake, or its server is `server_missing` / `server_disabled`.
 */
export type EntryState =
  | 'available'
  | 'quarantined'
  | 'blocked'
  | 'excluded'
  | 'missing'
  | 'server_missing'
  | 'server_disabled';
