/**
 * The MCP config entry each client needs to reach the hub, and how its file is shaped.
 *
 * Where the token goes, per client:
 * - Claude Code (`.mcp.json`) expands `${VAR}` in headers, Cursor (`mcp.json`) expands `${env:VAR}`: the file holds
 *   a reference to an environment variable (`GATEHOUSE_TOKEN` unless `--token-env`), never the token, so it may be
 *   committed with a project.
 * - VS Code (`.vscode/mcp.json`) prompts for it: an `inputs` entry `{type: "promptString", password: true}` referenced
 *   as `${input:<id>}`; VS Code keeps the answer in its secret storage.
 * - LM Studio (`mcp.json`, Cursor's notation) documents no interpolation, and Claude Desktop
 *   (`claude_desktop_config.json`) launches stdio servers only — it starts `gatehouse stdio`, which reads
 *   `GATEHOUSE_TOKEN` from the `env` block of its entry. For these two the token is in the file in clear, so `connect`
 *   refuses to write such a file inside a git work tree unless `--allow-workspace`.
 */

export const CLIENT_IDS = ['claude-code', 'cursor', 'vscode', 'lmstudio', 'claude-desktop'] as const;
export type ClientId = (typeof CLIENT_IDS)[number];

/** What stands in the file where a clear-text token goes until one is given. */
export const TOKEN_PLACEHOLDER = '<gatehouse agent token>';

export interface WiringInput {
  /** The hub endpoint, e.g. `http://127.0.0.1:8080/mcp`. */
  hubUrl: string;
  /** The entry's name under the servers key. */
  name: string;
  /** A token to write in clear (clients with `secret: 'clear'` only); otherwise the placeholder. */
  token?: string | undefined;
  /** The environment variable a `reference` client reads the token from. */
  tokenEnv: string;
  /** What Claude Desktop runs: by default Node's absolute path, or what `--command` gives. */
  command: string;
  /** The arguments before `stdio` (by default the absolute path of the CLI's entry file). */
  commandArgs: string[];
}

export type JsonPath = (string | number)[];

export interface ClientSpec {
  id: ClientId;
  label: string;
  /** `jsonc` files may hold comments and trailing commas; `json` files must be strict JSON (the client parses them so). */
  format: 'json' | 'jsonc';
  serversKey: 'mcpServers' | 'servers';
  /** `reference`: the file names a variable or input; `clear`: the token itself is in the file. */
  secret: 'reference' | 'clear';
  /** Where the file usually is, for messages. */
  usualPath: string;
  entry(input: WiringInput): Record<string, unknown>;
  /** Within the entry: where the clear-text token is (clients with `secret: 'clear'`). */
  secretPath?: JsonPath;
  /** Entry keys of the other transport, removed from an existing entry so the client is not confused. */
  conflicting: string[];
  /** VS Code's `inputs` element for the token. */
  input?(input: WiringInput): { id: string } & Record<string, unknown>;
  /**
   * What to tell the user about the token after printing or writing: `token` is a token created now, `inEntry`
   * whether the entry holds a real token (clear-text clients).
   */
  tokenNote(input: WiringInput, token: string | undefined, inEntry: boolean): string;
}

const bearerPlaceholder = `Bearer ${TOKEN_PLACEHOLDER}`;
const inputId = (name: string) => `${name}-token`;

function claudeDesktopConfigPath(): string {
  if (process.platform === 'darwin') return '~/Library/Application Support/Claude/claude_desktop_config.json';
  if (process.platform === 'win32') return '%APPDATA%\\Claude\\claude_desktop_config.json';
  return '~/.config/Claude/claude_desktop_config.json';
}

const exportNote = (input: WiringInput, token: string | undefined, who: string) =>
  token
    ? `Set ${input.tokenEnv} in the environment ${who} starts from (shown once; keep it safe):\n\n  export ${input.tokenEnv}=${token}\n`
    : `${who[0]?.toUpperCase()}${who.slice(1)} reads the agent token from ${input.tokenEnv}: set it where ${who} starts ` +
      '(create one with `gatehouse token create --role agent --name …`, or rerun with --token-name).';

const clearNote = (token: string | undefined, inEntry: boolean, where: string) =>
  inEntry
    ? `The ${token ? 'new ' : ''}agent token is in ${where}.`
    : `Replace ${TOKEN_PLACEHOLDER} in ${where} with an agent token (\`gatehouse token create --role agent --name …\`), ` +
      'or rerun with --token-name to create one.';

export const CLIENTS: Record<ClientId, ClientSpec> = {
  'claude-code': {
    id: 'claude-code',
    label: 'Claude Code',
    format: 'json',
    serversKey: 'mcpServers',
    secret: 'reference',
    usualPath: '.mcp.json (project root)',
    entry: (i) => ({ type: 'http', url: i.hubUrl, headers: { Authorization: `Bearer \${${i.tokenEnv}}` } }),
    conflicting: ['command', 'args', 'env'],
    tokenNote: (i, token) => exportNote(i, token, 'Claude Code'),
  },
  cursor: {
    id: 'cursor',
    label: 'Cursor',
    format: 'json',
    serversKey: 'mcpServers',
    secret: 'reference',
    usualPath: '~/.cursor/mcp.json (or .cursor/mcp.json in a project)',
    entry: (i) => ({ url: i.hubUrl, headers: { Authorization: `Bearer \${env:${i.tokenEnv}}` } }),
    conflicting: ['command', 'args', 'env'],
    tokenNote: (i, token) => exportNote(i, token, 'Cursor'),
  },
  vscode: {
    id: 'vscode',
    label: 'VS Code',
    format: 'jsonc',
    serversKey: 'servers',
    secret: 'reference',
    usualPath: '.vscode/mcp.json (workspace)',
    entry: (i) => ({
      type: 'http',
      url: i.hubUrl,
      headers: { Authorization: `Bearer \${input:${inputId(i.name)}}` },
    }),
    conflicting: ['command', 'args', 'env', 'envFile'],
    input: (i) => ({
      type: 'promptString',
      id: inputId(i.name),
      description: 'Gatehouse agent token',
      password: true,
    }),
    tokenNote: (_i, token) =>
      token
        ? `VS Code asks for the token when it first starts the server; paste this one (shown once; keep it safe):\n\n  ${token}\n`
        : 'VS Code asks for an agent token when it first starts the server (create one with ' +
          '`gatehouse token create --role agent --name …`, or rerun with --token-name).',
  },
  lmstudio: {
    id: 'lmstudio',
    label: 'LM Studio',
    format: 'json',
    serversKey: 'mcpServers',
    secret: 'clear',
    usualPath: '~/.lmstudio/mcp.json (Program tab → Install → Edit mcp.json)',
    entry: (i) => ({ url: i.hubUrl, headers: { Authorization: i.token ? `Bearer ${i.token}` : bearerPlaceholder } }),
    secretPath: ['headers', 'Authorization'],
    conflicting: ['command', 'args', 'env'],
    tokenNote: (_i, token, inEntry) => clearNote(token, inEntry, 'the entry (headers.Authorization)'),
  },
  'claude-desktop': {
    id: 'claude-desktop',
    label: 'Claude Desktop',
    format: 'json',
    serversKey: 'mcpServers',
    secret: 'clear',
    usualPath: claudeDesktopConfigPath(),
    entry: (i) => ({
      command: i.command,
      args: [...i.commandArgs, 'stdio', '--url', i.hubUrl],
      env: { GATEHOUSE_TOKEN: i.token ?? TOKEN_PLACEHOLDER },
    }),
    secretPath: ['env', 'GATEHOUSE_TOKEN'],
    conflicting: ['url', 'headers', 'type'],
    tokenNote: (_i, token, inEntry) =>
      `${clearNote(token, inEntry, 'the entry (env.GATEHOUSE_TOKEN)')} Claude Desktop has no secret input, so the token sits in ` +
      'its config file; restart Claude Desktop to pick the entry up.',
  },
};

export function isClientId(value: string): value is ClientId {
  return (CLIENT_IDS as readonly string[]).includes(value);
}

/** True when `value` (a clear-text token slot) holds no real token yet. */
export function isPlaceholder(value: unknown): boolean {
  return typeof value !== 'string' || value.includes(TOKEN_PLACEHOLDER) || value.trim() === '' || value === 'Bearer';
}

/** The entry as the client's file would hold it (VS Code: with its input), for printing or copying. */
export function snippetOf(spec: ClientSpec, input: WiringInput): string {
  const doc: Record<string, unknown> = {};
  if (spec.input) doc.inputs = [spec.input(input)];
  doc[spec.serversKey] = { [input.name]: spec.entry(input) };
  return JSON.stringify(doc, null, 2);
}
