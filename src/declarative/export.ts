/**
 * The registry written back out as a `gatehouse.yaml` that `--config` accepts. It is built from the masked views
 * the API shows, so no secret can leave: a sealed value becomes an env reference `{env: MCP_SECRET_<ID>_<NAME>}`
 * for the operator to set, an existing reference is kept, and a comment lists every variable. Toolsets go
 * with them (the file's `toolsets:`, as `--config` takes them), so a registry and its toolsets travel together.
 */
import { Document } from 'yaml';
import type { ServerDetail, ShownAuth } from '../registry/records.js';
import type { ShownValue } from '../registry/secret-values.js';
import type { Toolset } from '../toolsets/model.js';
import { formatPath, type PathSegment } from './paths.js';

export interface ExportedVariable {
  name: string;
  /** Where the file uses it (`servers[0].headers.Authorization`). */
  path: string;
  /** True when the value was sealed in the store: the operator supplies it from wherever they keep it. */
  sealed: boolean;
}

export interface ExportResult {
  yaml: string;
  variables: ExportedVariable[];
}

/** Env reference names are at most 128 characters (`envRefSchema`). */
const MAX_ENV_NAME = 128;

export function exportServers(
  servers: readonly ServerDetail[],
  options: { secretEnvPrefix: string; exportedAt?: Date; toolsets?: readonly Toolset[] },
): ExportResult {
  // Existing references are taken first, so a generated name never shadows one.
  const taken = new Set<string>();
  for (const server of servers) for (const [, value] of secretsOf(server)) if ('env' in value) taken.add(value.env);
  const fresh = (base: string) => {
    let name = base.slice(0, MAX_ENV_NAME);
    for (let n = 2; taken.has(name); n++) name = `${base.slice(0, MAX_ENV_NAME - `_${n}`.length)}_${n}`;
    taken.add(name);
    return name;
  };

  const variables: ExportedVariable[] = [];
  const entries = servers.map((server, index) => {
    const refs = new Map<string, { env: string }>();
    for (const [path, value] of secretsOf(server)) {
      const at = formatPath(['servers', index, ...path]);
      const sealed = !('env' in value);
      const name =
        'env' in value ? value.env : fresh(`${options.secretEnvPrefix}${envPart(server.id)}_${envPart(path)}`);
      variables.push({ name, path: at, sealed });
      refs.set(path.join('\0'), { env: name });
    }
    const refMap = (field: 'headers' | 'env', values: Record<string, ShownValue>) =>
      Object.fromEntries(Object.keys(values).map((name) => [name, refs.get(`${field}\0${name}`)]));

    const entry: Record<string, unknown> = { id: server.id, name: server.name };
    if (server.description) entry.description = server.description;
    entry.transport = server.transport;
    if (server.transport !== 'stdio') {
      entry.url = server.url;
      if (Object.keys(server.headers).length > 0) entry.headers = refMap('headers', server.headers);
      entry.auth = exportedAuth(server.auth, refs);
    } else {
      entry.command = server.command;
      entry.args = server.args;
      if (server.sandbox && Object.keys(server.sandbox).length > 0) entry.sandbox = server.sandbox;
    }
    if (Object.keys(server.env).length > 0) entry.env = refMap('env', server.env);
    // The path sandbox and the lifecycle, as the file takes them (left out when never set).
    for (const field of ['workspaceRoots', 'pathArgs', 'lazyStart', 'idleShutdownS'] as const) {
      const value = server[field];
      if (value !== undefined && value !== null) entry[field] = value;
    }
    entry.enabled = server.enabled;
    entry.privateNetwork = server.privateNetwork;
    entry.trustNewTools = server.trustNewTools;
    entry.exposure = server.exposure;
    entry.toolPolicy = server.toolPolicy;
    return entry;
  });

  // A toolset holds no secret: its name, description and `{server, tool}` entries (by upstream name).
  const toolsets = (options.toolsets ?? []).map((toolset) => ({
    name: toolset.name,
    ...(toolset.description ? { description: toolset.description } : {}),
    tools: toolset.tools.map((entry) => ({ server: entry.server, tool: entry.tool })),
  }));
  const doc = new Document({ servers: entries, ...(toolsets.length > 0 ? { toolsets } : {}) });
  doc.commentBefore = header(variables, options.exportedAt ?? new Date());
  return { yaml: doc.toString({ lineWidth: 0 }), variables };
}

/** Every secret-bearing value of a server with its path inside the entry. */
function secretsOf(server: ServerDetail): Array<[PathSegment[], ShownValue]> {
  const values: Array<[PathSegment[], ShownValue]> = [];
  for (const field of ['headers', 'env'] as const) {
    for (const [name, value] of Object.entries(server[field])) values.push([[field, name], value]);
  }
  if (server.auth.type === 'bearer') values.push([['auth', 'token'], server.auth.token]);
  if (server.auth.type === 'oauth' && server.auth.clientSecret !== undefined) {
    values.push([['auth', 'clientSecret'], server.auth.clientSecret]);
  }
  return values;
}

/** A server's upstream auth as the file states it: its secret (a bearer token, a client secret) a reference. */
function exportedAuth(auth: ShownAuth, refs: Map<string, { env: string }>): Record<string, unknown> {
  if (auth.type === 'bearer') return { type: 'bearer', token: refs.get('auth\0token') };
  if (auth.type !== 'oauth') return { type: 'none' };
  const { clientSecret, ...settings } = auth;
  return {
    ...Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined)),
    ...(clientSecret !== undefined ? { clientSecret: refs.get('auth\0clientSecret') } : {}),
  };
}

/**
 * `my-server` → `MY_SERVER`, `['headers', 'X-Api-Key']` → `X_API_KEY`, `['auth', 'token']` → `AUTH_TOKEN`,
 * `['auth', 'clientSecret']` → `AUTH_CLIENT_SECRET`.
 */
function envPart(value: string | PathSegment[]): string {
  const text =
    typeof value === 'string'
      ? value
      : value[0] === 'auth'
        ? value[1] === 'clientSecret'
          ? 'auth_client_secret'
          : 'auth_token'
        : String(value[1]);
  return text.toUpperCase().replace(/[^A-Z0-9]/g, '_');
}

function header(variables: ExportedVariable[], at: Date): string {
  const lines = [
    ` Gatehouse servers and toolsets, exported ${at.toISOString()}. Apply with: gatehouse serve --config <this file>`,
    ' Secrets are env references, never values.',
  ];
  if (variables.length === 0) lines.push(' No variables to set.');
  else {
    lines.push(' Set these variables where gatehouse serve runs:');
    const width = Math.max(...variables.map((v) => v.name.length));
    for (const v of variables) {
      const note = v.sealed ? 'was sealed in the store' : 'already an env reference';
      lines.push(`   ${v.name.padEnd(width)}  ${v.path} (${note})`);
    }
  }
  return lines.join('\n');
}
