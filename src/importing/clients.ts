/**
 * Where MCP clients keep their server lists, and how an entry reads. Claude Desktop, Claude Code
 * (`.mcp.json`, `~/.claude.json`), Cursor, Windsurf and LM Studio use `mcpServers`; VS Code uses
 * `servers`. Files may hold comments and trailing commas (JSONC).
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { type ParseError, parse } from 'jsonc-parser';
import { z } from 'zod';
import { GatehouseError } from '../errors.js';

export const IMPORT_CLIENTS = ['claude-desktop', 'claude-code', 'cursor', 'vscode', 'windsurf', 'lmstudio'] as const;
export type ImportClient = (typeof IMPORT_CLIENTS)[number];

/** The files each client is usually configured in, most specific first (project files before the user's). */
export function configPaths(client: ImportClient, cwd = process.cwd(), home = homedir()): string[] {
  switch (client) {
    case 'claude-desktop':
      if (process.platform === 'darwin') {
        return [join(home, 'Library', 'Application Support', 'Claude', 'claude_desktop_config.json')];
      }
      if (process.platform === 'win32') {
        return [join(process.env.APPDATA ?? join(home, 'AppData', 'Roaming'), 'Claude', 'claude_desktop_config.json')];
      }
      return [join(home, '.config', 'Claude', 'claude_desktop_config.json')];
    case 'claude-code':
      return [join(cwd, '.mcp.json'), join(home, '.claude.json')];
    case 'cursor':
      return [join(cwd, '.cursor', 'mcp.json'), join(home, '.cursor', 'mcp.json')];
    case 'vscode':
      return [join(cwd, '.vscode', 'mcp.json')];
    case 'windsurf':
      return [join(home, '.codeium', 'windsurf', 'mcp_config.json')];
    case 'lmstudio':
      return [join(home, '.lmstudio', 'mcp.json')];
  }
}

/** One entry of a client's list, as the client wrote it (only the fields an import reads). */
export const clientEntrySchema = z.looseObject({
  type: z.string().max(64).optional(),
  command: z.string().max(1024).optional(),
  args: z.array(z.string().max(4096)).max(256).optional(),
  env: z.record(z.string().max(256), z.string().max(16_384)).optional(),
  url: z.string().max(2048).optional(),
  /** Windsurf's name for `url`. */
  serverUrl: z.string().max(2048).optional(),
  headers: z.record(z.string().max(256), z.string().max(16_384)).optional(),
  disabled: z.boolean().optional(),
});
export type ClientEntry = z.infer<typeof clientEntrySchema>;

/** The server list of a client config file's text: `mcpServers` or (VS Code) `servers`. */
export function serversOf(text: string, file: string): Record<string, unknown> {
  const errors: ParseError[] = [];
  const parsed = parse(text, errors, { allowTrailingComma: true, disallowComments: false }) as unknown;
  if (errors.length > 0 || !parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new GatehouseError('validation_error', `${file} is not a JSON object (JSON with comments is fine).`);
  }
  const root = parsed as Record<string, unknown>;
  const list = root.mcpServers ?? root.servers;
  if (list === undefined) return {};
  if (!list || typeof list !== 'object' || Array.isArray(list)) {
    throw new GatehouseError('validation_error', `${file}: mcpServers (or servers) is not an object of entries.`);
  }
  return list as Record<string, unknown>;
}
