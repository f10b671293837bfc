/**
 * Platform settings: store-backed key/value rows, validated per key, with
 * defaults. Later issues add their keys here, the same way.
 */
import { z } from 'zod';
import { toolViewValue } from '../identity/tool-view.js';

export const ACCESS_LEVELS = ['off', 'read', 'write'] as const;
export type AccessLevel = (typeof ACCESS_LEVELS)[number];

const access = (max: AccessLevel) =>
  z.enum(ACCESS_LEVELS).refine((level) => ACCESS_LEVELS.indexOf(level) <= ACCESS_LEVELS.indexOf(max), {
    message: `this scope goes no higher than "${max}"`,
  });

/** Not `docker`: its socket leaves any sandbox. */
const DEFAULT_ALLOWED_COMMANDS: string[] = ['npx', 'uvx', 'node', 'python3', 'deno', 'bunx'];

export const SETTING_KEYS = {
  'mcp.hubEnabled': { schema: z.boolean(), default: true, description: 'Serve the agent hub at /mcp.' },
  'mcp.adminEnabled': { schema: z.boolean(), default: false, description: 'Serve the admin surface at /mcp/admin.' },
  'mcp.scope.servers': { schema: access('write'), default: 'off', description: 'Agent access to server management.' },
  'mcp.scope.approvals': { schema: access('read'), default: 'off', description: 'Agent access to the approval queue.' },
  'mcp.scope.audit': { schema: access('read'), default: 'off', description: 'Agent access to the audit trail.' },
  'mcp.scope.settings': { schema: access('read'), default: 'off', description: 'Agent access to settings.' },
  'mcp.scope.tokens': { schema: access('read'), default: 'off', description: 'Agent access to the token list.' },
  'mcp.memoryEnabled': { schema: z.boolean(), default: true, description: 'Serve the memory bank at /mcp/memory.' },
  'mcp.scope.memory': {
    schema: access('write'),
    default: 'off',
    description: 'Agent access to the memory REST routes on the admin surface.',
  },
  'audit.payloads': {
    schema: z.enum(['metadata', 'data']),
    default: 'metadata',
    description:
      'What the audit trail records of a call: metadata only, or arguments and results too (redacted best-effort: credential-named fields and well-known secret shapes; a secret of no known name or shape is recorded).',
  },
  'hub.rateLimit': {
    schema: z.number().int().min(1).max(1_000_000),
    default: 600,
    description: 'Tool calls per minute per token unless the token sets its own.',
  },
  'stdio.maxRunning': {
    schema: z.number().int().min(0).max(10_000),
    default: 32,
    description: 'Most stdio server processes running at once on each gateway process; a start beyond it is refused.',
  },
  'audit.retentionDays': {
    schema: z.number().int().min(0).max(36_500),
    default: 90,
    description: 'Audit rows older than this many days are deleted in the background (0: kept for ever).',
  },
  'hub.maxSessionsPerToken': {
    schema: z.number().int().min(1).max(10_000),
    default: 100,
    description:
      'Live 2025-era sessions per token on each MCP surface unless the token sets its own; opening one more closes that token’s oldest.',
  },
  'stdio.allowedCommands': {
    schema: z.array(z.string().trim().min(1).max(1024)).max(256),
    default: DEFAULT_ALLOWED_COMMANDS as string[],
    description:
      'Commands a stdio server may run: a name matches the basename of the command resolved against PATH, an absolute path matches exactly. Allowing node or python3 allows any script.',
  },
  'stdio.limits.dataMb': {
    schema: z.number().int().min(64).max(1_048_576),
    default: 4096,
    description: 'Data size (RLIMIT_DATA, in MiB) of each sandboxed stdio server process.',
  },
  'stdio.limits.openFiles': {
    schema: z.number().int().min(32).max(1_048_576),
    default: 4096,
    description: 'Open files (RLIMIT_NOFILE) of each sandboxed stdio server process.',
  },
  'stdio.limits.processes': {
    schema: z.number().int().min(8).max(1_000_000),
    default: 512,
    description:
      "Processes and threads (RLIMIT_NPROC) of each sandboxed stdio server's own uid (applied when the gateway runs as root).",
  },
  'oauth.dynamicRegistration': {
    schema: z.boolean(),
    default: true,
    description: 'Let OAuth clients register themselves at /register (RFC 7591).',
  },
  'oauth.clientMetadataDocuments': {
    schema: z.boolean(),
    default: true,
    description: 'Accept an https URL as an OAuth client_id and fetch its client metadata document.',
  },
  'oauth.accessTokenTtlSeconds': {
    schema: z.number().int().min(30).max(300),
    default: 300,
    description: 'Lifetime of an OAuth access token (at most 5 minutes; refresh tokens renew it).',
  },
  'oauth.refreshTokenTtlDays': {
    schema: z.number().int().min(1).max(365),
    default: 30,
    description: 'Lifetime of an OAuth refresh token; each use replaces it with a new one.',
  },
  'hub.toolView': {
    schema: toolViewValue,
    default: 'all',
    description:
      'What /mcp lists to an agent whose token sets no toolView: all (every tool), search (meta-tools to search, describe and call them) or toolset:<name>.',
  },
  'hub.search.recentTools': {
    schema: z.number().int().min(0).max(50),
    default: 0,
    description:
      'In search mode, list this many of the tools the agent called most recently beside the meta-tools (0: none).',
  },
} as const satisfies Record<string, { schema: z.ZodType; default: unknown; description: string }>;

export type SettingName = keyof typeof SETTING_KEYS;
export type Settings = { readonly [K in SettingName]: z.output<(typeof SETTING_KEYS)[K]['schema']> };

export const DEFAULT_SETTINGS: Settings = Object.freeze(
  Object.fromEntries(Object.entries(SETTING_KEYS).map(([key, def]) => [key, def.default])),
) as Settings;

export function isSettingName(key: string): key is SettingName {
  return Object.hasOwn(SETTING_KEYS, key);
}
