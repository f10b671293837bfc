/**
 * Server records in the store. Secrets are sealed on the way in and shown as
 * `{"set": true}` on the way out; `connectionOf` is the one place they are
 * opened, to contact the upstream.
 */

import type { Transaction } from 'kysely';
import { GatehouseError } from '../errors.js';
import { safeEqual } from '../identity/index.js';
import { DEFAULT_TOOL_POLICY, type ToolPolicy } from '../policy/tool-policy.js';
import type { SealKey } from '../secrets/seal.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import type { Database, ServerTable } from '../store/schema.js';
import type { UpstreamTarget } from '../upstream/types.js';
import { dropServerGrants } from '../upstream-auth/grants.js';
import { type ArgsRequired, withConfigurationStatus } from './configuration.js';
import {
  credentialsForNewTarget,
  openValue,
  type RecordBinding,
  type SecretInput,
  type ShownValue,
  type StoredValue,
  showMap,
  showValue,
  storeValue,
} from './secret-values.js';

/** `sse`: a legacy HTTP+SSE upstream (the 2024-11-05 transport), a URL server like `streamable-http`. */
export type Transport = 'streamable-http' | 'sse' | 'stdio';
export type Status = 'connected' | 'failed' | 'unknown';

/** OAuth to the upstream (issue 18): `shared` is one grant for every agent, `per-user` each user's own. */
export interface OAuthSettings<Secret> {
  type: 'oauth';
  mode: 'shared' | 'per-user';
  grant: 'authorization_code' | 'client_credentials';
  /** A client the operator registered at the authorization server; else CIMD or DCR. */
  clientId?: string | undefined;
  clientSecret?: Secret | undefined;
  scopes?: string[] | undefined;
  /**
   * The authorization server (its metadata's `issuer`, exactly) this server's grants come from: a discovery
   * naming another is refused. Unset, the configured client is bound to the issuer it is first used at
   * (`upstream_oauth_pins`), so its secret never follows an upstream's metadata elsewhere.
   */
  issuer?: string | undefined;
}
export type StoredAuth = { type: 'none' } | { type: 'bearer'; token: StoredValue } | OAuthSettings<StoredValue>;
export type AuthInput =
  | { type: 'none' }
  | { type: 'bearer'; token: SecretInput }
  | (Omit<OAuthSettings<SecretInput>, 'grant'> & { grant?: OAuthSettings<SecretInput>['grant'] | undefined });
export type ShownAuth = { type: 'none' } | { type: 'bearer'; token: ShownValue } | OAuthSettings<ShownValue>;
/** A record's OAuth settings with the client secret opened, for the OAuth client only. Never log or return. */
export type OpenedOAuth = OAuthSettings<string>;

export interface DiscoveredTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

/** Per-server fields added by later issues (path sandbox, stdio lifecycle); kept in one JSON column. */
export interface ServerOptions {
  /** Variables the server's manifest says it needs (names only). */
  envRequired?: string[];
  /** Extra arguments its preset says it needs (see configuration.ts). */
  argsRequired?: ArgsRequired;
  pathArgs?: string[];
  workspaceRoots?: string[];
  lazyStart?: boolean;
  idleShutdownS?: number | null;
  /** stdio: the bubblewrap sandbox of its child (absent: on, network host). Admin-only to change. */
  sandbox?: ServerSandbox;
  /** A stdio server an operator stopped: it stays stopped when the gateway starts again, until started. */
  stoppedByOperator?: boolean;
}

/** A stdio server's sandbox: `mode: "off"` is the admin's escape hatch; `readOnlyPaths` widen what it sees. */
export interface ServerSandbox {
  mode?: 'on' | 'off';
  network?: 'host' | 'none';
  readOnlyPaths?: string[];
}

export interface NewServer {
  id: string;
  name: string;
  description?: string | null | undefined;
  transport: Transport;
  url?: string | null | undefined;
  command?: string | null | undefined;
  args?: string[] | undefined;
  headers?: Record<string, SecretInput> | undefined;
  env?: Record<string, SecretInput> | undefined;
  auth?: AuthInput | undefined;
  enabled?: boolean | undefined;
  privateNetwork?: boolean | undefined;
  trustNewTools?: boolean | undefined;
  exposure?: string[] | undefined;
  toolPolicy?: ToolPolicy | undefined;
  options?: ServerOptions | undefined;
  spec?: string | null | undefined;
  sourceKind: string;
  sourceUrl?: string | null | undefined;
  author?: string | null | undefined;
}

/** A sparse change: `null` removes a header or env key. */
export interface ConfigPatch {
  env?: Record<string, SecretInput | null> | undefined;
  headers?: Record<string, SecretInput | null> | undefined;
  enabled?: boolean | undefined;
  url?: string | undefined;
  command?: string | undefined;
  args?: string[] | undefined;
  auth?: AuthInput | undefined;
  privateNetwork?: boolean | undefined;
  trustNewTools?: boolean | undefined;
  options?: Partial<Record<keyof ServerOptions, unknown>> | undefined;
}

/** What the API shows: every secret masked. */
export interface ServerView extends ServerOptions {
  id: string;
  name: string;
  description: string | null;
  transport: Transport;
  url: string | null;
  command: string | null;
  args: string[];
  headers: Record<string, ShownValue>;
  env: Record<string, ShownValue>;
  auth: ShownAuth;
  enabled: boolean;
  privateNetwork: boolean;
  trustNewTools: boolean;
  exposure: string[];
  toolPolicy: ToolPolicy;
  policyVersion: number;
  status: Status;
  lastError: string | null;
  lastTestedAt: string | null;
  latencyMs: number | null;
  protocolEra: string | null;
  discoveredToolsCount: number;
  spec: string | null;
  sourceKind: string;
  sourceUrl: string | null;
  author: string | null;
  installedAt: string;
  updatedAt: string;
}

export interface ServerDetail extends ServerView {
  discoveredTools: DiscoveredTool[];
  discoveredPrompts: unknown[];
  discoveredResources: unknown[];
}

/** The opened connection facts for one upstream. Never log or return. */
export type Connection =
  | { transport: 'streamable-http' | 'sse'; url: string; headers: Record<string, string>; privateNetwork: boolean }
  | { transport: 'stdio'; command: string; args: string[]; env: Record<string, string> };

/**
 * What the upstream pool is handed for server `owner`'s URL: its URL, headers and (for HTTP+SSE) its
 * transport, owned by the record (so its connections end when the record stops wanting them).
 */
export function upstreamTargetOf(connection: Extract<Connection, { url: string }>, owner: string): UpstreamTarget {
  const { url, headers, transport } = connection;
  return transport === 'sse' ? { url, headers, transport, owner } : { url, headers, owner };
}

export class ServerStore {
  constructor(
    private readonly store: Store,
    private readonly key: SealKey,
    private readonly secretPrefix: string,
  ) {}

  async insert(input: NewServer): Promise<ServerDetail> {
    const at = nowIso();
    const binding = bindingOf(input.id, input.transport, input.url ?? null, input.command ?? null);
    const row: ServerTable = {
      id: input.id,
      name: input.name,
      description: input.description ?? null,
      transport: input.transport,
      url: input.url ?? null,
      command: input.command ?? null,
      args: JSON.stringify(input.args ?? []),
      headers: JSON.stringify(this.sealMap(binding, 'headers', input.headers ?? {})),
      env: JSON.stringify(this.sealMap(binding, 'env', input.env ?? {})),
      auth: JSON.stringify(this.sealAuth(binding, input.auth ?? { type: 'none' })),
      enabled: input.enabled === false ? 0 : 1,
      private_network: input.privateNetwork ? 1 : 0,
      trust_new_tools: input.trustNewTools ? 1 : 0,
      exposure: JSON.stringify(input.exposure ?? ['default']),
      tool_policy: JSON.stringify(input.toolPolicy ?? DEFAULT_TOOL_POLICY),
      options: JSON.stringify(input.options ?? {}),
      policy_version: 1,
      pinned_at: null,
      status: 'unknown',
      last_error: null,
      last_tested_at: null,
      latency_ms: null,
      protocol_era: null,
      discover: null,
      discovered_tools: '[]',
      discovered_prompts: '[]',
      discovered_resources: '[]',
      spec: input.spec ?? null,
      source_kind: input.sourceKind,
      source_url: input.sourceUrl ?? null,
      author: input.author ?? null,
      installed_at: at,
      updated_at: at,
    };
    const result = await this.store.db
      .insertInto('servers')
      .values(row)
      .onConflict((oc) => oc.column('id').doNothing())
      .executeTakeFirst();
    if (Number(result.numInsertedOrUpdatedRows ?? 0n) === 0) {
      throw new GatehouseError('mcp.already_installed', `An MCP server with id "${input.id}" is already installed.`, {
        id: input.id,
      });
    }
    await this.store.changed('servers');
    return toDetail(row);
  }

  async getRow(id: string): Promise<ServerTable> {
    const row = await this.store.db.selectFrom('servers').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw new GatehouseError('mcp.not_found', `No MCP server "${id}" is installed.`, { id });
    return row;
  }

  async get(id: string): Promise<ServerDetail> {
    return toDetail(await this.getRow(id));
  }

  async list(page: { limit: number; offset: number }): Promise<{ servers: ServerView[]; total: number }> {
    const rows = await this.store.db
      .selectFrom('servers')
      .selectAll()
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    const { total } = await this.store.db
      .selectFrom('servers')
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .executeTakeFirstOrThrow();
    return { servers: rows.map(toView), total: Number(total) };
  }

  /** Every record, for the hub's registry snapshot (bounded by what an operator installs). */
  async all(): Promise<ServerDetail[]> {
    const rows = await this.store.db.selectFrom('servers').selectAll().orderBy('id').execute();
    return rows.map(toDetail);
  }

  /** Remembers (or forgets) that an operator stopped a stdio server; no record event (it changes no config). */
  async setStoppedByOperator(id: string, stopped: boolean): Promise<void> {
    await this.store.db.transaction().execute(async (trx) => {
      const row = await trx.selectFrom('servers').select('options').where('id', '=', id).executeTakeFirst();
      if (!row) return;
      const options = parseJson<ServerOptions>(row.options, {});
      if ((options.stoppedByOperator ?? false) === stopped) return;
      const { stoppedByOperator: _, ...rest } = options;
      const next = stopped ? { ...rest, stoppedByOperator: true } : rest;
      await trx
        .updateTable('servers')
        .set({ options: JSON.stringify(next) })
        .where('id', '=', id)
        .execute();
    });
  }

  async remove(id: string): Promise<void> {
    const result = await this.store.db.transaction().execute(async (trx) => {
      const deleted = await trx.deleteFrom('servers').where('id', '=', id).executeTakeFirst();
      await dropServerGrants(trx, id);
      return deleted;
    });
    if (Number(result.numDeletedRows) === 0)
      throw new GatehouseError('mcp.not_found', `No MCP server "${id}" is installed.`, { id });
    await this.store.changed('servers');
  }

  async patchConfig(id: string, patch: ConfigPatch): Promise<ServerDetail> {
    let retargeted = false;
    return this.update(
      id,
      (row) => {
        const argsBefore = row.args;
        const endpointChanged =
          (patch.url !== undefined && patch.url !== row.url) ||
          (patch.command !== undefined && patch.command !== row.command);
        if (patch.url !== undefined) {
          if (row.transport === 'stdio') throw invalidField('url', 'only streamable-http and sse servers have a url');
          row.url = patch.url;
        }
        if (patch.command !== undefined) {
          if (row.transport !== 'stdio') throw invalidField('command', 'only stdio servers have a command');
          row.command = patch.command;
        }
        if (patch.args !== undefined) {
          if (row.transport !== 'stdio') throw invalidField('args', 'only stdio servers have args');
          row.args = JSON.stringify(patch.args);
        }
        const binding = bindingOf(row.id, row.transport as Transport, row.url, row.command);
        let headers = parseJson<Record<string, StoredValue>>(row.headers, {});
        let env = parseJson<Record<string, StoredValue>>(row.env, {});
        let auth = parseJson<StoredAuth>(row.auth, { type: 'none' });
        // Every credential was bound to the old target: dropped, unless this very change gives it again below.
        if (endpointChanged) {
          ({ headers, env, auth } = credentialsForNewTarget());
          retargeted = true;
        }
        headers = this.applySparse(binding, 'headers', headers, patch.headers);
        env = this.applySparse(binding, 'env', env, patch.env);
        if (patch.auth !== undefined) auth = this.sealAuth(binding, patch.auth);
        row.headers = JSON.stringify(headers);
        row.env = JSON.stringify(env);
        row.auth = JSON.stringify(auth);
        if (patch.enabled !== undefined) row.enabled = patch.enabled ? 1 : 0;
        if (patch.privateNetwork !== undefined) row.private_network = patch.privateNetwork ? 1 : 0;
        if (patch.trustNewTools !== undefined) row.trust_new_tools = patch.trustNewTools ? 1 : 0;
        if (patch.options !== undefined) {
          const options = parseJson<Record<string, unknown>>(row.options, {});
          for (const [key, value] of Object.entries(patch.options)) {
            if (value === null) delete options[key];
            else if (value !== undefined) options[key] = value;
          }
          row.options = JSON.stringify(options);
          row.policy_version += 1; // sandbox roots and path arguments are policy
        }
        if (endpointChanged) {
          row.status = 'unknown';
          row.policy_version += 1;
        }
        // What was learned about the old program (its protocol era, its discover result) says nothing about the new one.
        if (endpointChanged || (patch.args !== undefined && JSON.stringify(patch.args) !== argsBefore)) {
          row.protocol_era = null;
          row.discover = null;
        }
      },
      // OAuth grants were given for the old target too: they go in the same transaction.
      async (trx) => {
        if (retargeted) await dropServerGrants(trx, id);
      },
    );
  }

  async setToolPolicy(id: string, policy: ToolPolicy): Promise<ServerDetail> {
    return this.update(id, (row) => {
      row.tool_policy = JSON.stringify(policy);
      row.policy_version += 1;
    });
  }

  async setExposure(id: string, groups: string[]): Promise<ServerDetail> {
    return this.update(id, (row) => {
      row.exposure = JSON.stringify(groups);
      row.policy_version += 1;
    });
  }

  /** Read-modify-write of one record in a transaction; bumps `updated_at` and the servers version. */
  async update(
    id: string,
    change: (row: ServerTable) => void,
    inTransaction?: (trx: Transaction<Database>, row: ServerTable) => Promise<void>,
  ): Promise<ServerDetail> {
    const updated = await this.store.db.transaction().execute(async (trx) => {
      // The whole row is written back: on PostgreSQL it is locked as it is read, or a concurrent change (an
      // operator's disable during a background refresh) would be overwritten with the stale values read here.
      // SQLite's write transactions are serialized already (and it has no FOR UPDATE).
      const row = await trx
        .selectFrom('servers')
        .selectAll()
        .where('id', '=', id)
        .$if(this.store.kind === 'postgres', (query) => query.forUpdate())
        .executeTakeFirst();
      if (!row) throw new GatehouseError('mcp.not_found', `No MCP server "${id}" is installed.`, { id });
      change(row);
      row.updated_at = nowIso();
      const { id: _id, ...values } = row;
      await trx.updateTable('servers').set(values).where('id', '=', id).execute();
      if (inTransaction) await inTransaction(trx, row);
      return row;
    });
    await this.store.changed('servers');
    return toDetail(updated);
  }

  /** Opens the record's secrets to contact the upstream. The result must never be logged or returned. */
  connectionOf(row: ServerTable, env: NodeJS.ProcessEnv = process.env): Connection {
    const binding = bindingOf(row.id, row.transport as Transport, row.url, row.command);
    const open = (field: string, values: Record<string, StoredValue>) =>
      Object.fromEntries(
        Object.entries(values).map(([name, value]) => [
          name,
          openValue(this.key, binding, field, name, value, env, this.secretPrefix),
        ]),
      );
    const env_ = open('env', parseJson(row.env, {}));
    if (row.transport === 'stdio') {
      return { transport: 'stdio', command: row.command ?? '', args: parseJson<string[]>(row.args, []), env: env_ };
    }
    const headers = open('headers', parseJson(row.headers, {}));
    const auth = parseJson<StoredAuth>(row.auth, { type: 'none' });
    if (auth.type === 'bearer') {
      headers.Authorization = `Bearer ${openValue(this.key, binding, 'auth', 'token', auth.token, env, this.secretPrefix)}`;
    }
    const transport = row.transport === 'sse' ? 'sse' : 'streamable-http';
    return { transport, url: row.url ?? '', headers, privateNetwork: row.private_network === 1 };
  }

  /**
   * Whether the sealed value stored under `field.name` opens to `plaintext`, so declarative config can tell an
   * unchanged literal from a changed one without the value leaving this class. False for an env reference, a
   * missing value, or one that does not open (sealed for another endpoint).
   */
  equalsSealed(row: ServerTable, field: 'headers' | 'env' | 'auth', name: string, plaintext: string): boolean {
    let stored: StoredValue | undefined;
    if (field === 'auth') {
      const auth = parseJson<StoredAuth>(row.auth, { type: 'none' });
      stored =
        auth.type === 'bearer' && name === 'token'
          ? auth.token
          : auth.type === 'oauth' && name === 'clientSecret'
            ? auth.clientSecret
            : undefined;
    } else stored = parseJson<Record<string, StoredValue>>(row[field], {})[name];
    if (!stored || !('sealed' in stored)) return false;
    const binding = bindingOf(row.id, row.transport as Transport, row.url, row.command);
    try {
      return safeEqual(openValue(this.key, binding, field, name, stored, {}, this.secretPrefix), plaintext);
    } catch {
      return false;
    }
  }

  private sealMap(
    binding: RecordBinding,
    field: string,
    values: Record<string, SecretInput>,
  ): Record<string, StoredValue> {
    return Object.fromEntries(
      Object.entries(values).map(([name, input]) => [
        name,
        storeValue(this.key, binding, field, name, input, this.secretPrefix),
      ]),
    );
  }

  private applySparse(
    binding: RecordBinding,
    field: string,
    current: Record<string, StoredValue>,
    changes: Record<string, SecretInput | null> | undefined,
  ): Record<string, StoredValue> {
    if (!changes) return current;
    const next = { ...current };
    for (const [name, input] of Object.entries(changes)) {
      if (input === null) delete next[name];
      else next[name] = storeValue(this.key, binding, field, name, input, this.secretPrefix);
    }
    return next;
  }

  /** The record's OAuth settings with its client secret opened; undefined when it does not use OAuth. */
  oauthOf(row: ServerTable, env: NodeJS.ProcessEnv = process.env): OpenedOAuth | undefined {
    const auth = parseJson<StoredAuth>(row.auth, { type: 'none' });
    if (auth.type !== 'oauth') return undefined;
    const binding = bindingOf(row.id, row.transport as Transport, row.url, row.command);
    const { clientSecret, ...rest } = auth;
    return {
      ...rest,
      ...(clientSecret !== undefined && {
        clientSecret: openValue(this.key, binding, 'auth', 'clientSecret', clientSecret, env, this.secretPrefix),
      }),
    };
  }

  private sealAuth(binding: RecordBinding, auth: AuthInput): StoredAuth {
    if (auth.type === 'none') return { type: 'none' };
    if (auth.type === 'oauth') {
      const { clientSecret, grant, ...rest } = auth;
      return {
        ...rest,
        grant: grant ?? 'authorization_code',
        ...(clientSecret !== undefined && {
          clientSecret: storeValue(this.key, binding, 'auth', 'clientSecret', clientSecret, this.secretPrefix),
        }),
      };
    }
    return { type: 'bearer', token: storeValue(this.key, binding, 'auth', 'token', auth.token, this.secretPrefix) };
  }
}

function invalidField(field: string, message: string): GatehouseError {
  return new GatehouseError('validation_error', `${field}: ${message}.`, {
    issues: [{ path: `body.${field}`, message }],
  });
}

export function bindingOf(id: string, transport: Transport, url: string | null, command: string | null): RecordBinding {
  return { serverId: id, endpoint: transport === 'stdio' ? `stdio:${command ?? ''}` : `url:${url ?? ''}` };
}

function showAuth(auth: StoredAuth): ShownAuth {
  if (auth.type === 'bearer') return { type: 'bearer', token: showValue(auth.token) };
  if (auth.type === 'oauth') {
    const { clientSecret, ...rest } = auth;
    return { ...rest, ...(clientSecret !== undefined && { clientSecret: showValue(clientSecret) }) };
  }
  return { type: 'none' };
}

export function toView(row: ServerTable): ServerView {
  const auth = parseJson<StoredAuth>(row.auth, { type: 'none' });
  const options = parseJson<ServerOptions>(row.options, {});
  return withConfigurationStatus({
    ...options,
    id: row.id,
    name: row.name,
    description: row.description,
    transport: row.transport as Transport,
    url: row.url,
    command: row.command,
    args: parseJson<string[]>(row.args, []),
    headers: showMap(parseJson(row.headers, {})),
    env: showMap(parseJson(row.env, {})),
    auth: showAuth(auth),
    enabled: row.enabled === 1,
    privateNetwork: row.private_network === 1,
    trustNewTools: row.trust_new_tools === 1,
    exposure: parseJson<string[]>(row.exposure, ['default']),
    toolPolicy: { ...DEFAULT_TOOL_POLICY, ...parseJson<Partial<ToolPolicy>>(row.tool_policy, {}) },
    policyVersion: row.policy_version,
    status: row.status as Status,
    lastError: row.last_error,
    lastTestedAt: row.last_tested_at,
    latencyMs: row.latency_ms,
    protocolEra: row.protocol_era,
    discoveredToolsCount: parseJson<unknown[]>(row.discovered_tools, []).length,
    spec: row.spec,
    sourceKind: row.source_kind,
    sourceUrl: row.source_url,
    author: row.author,
    installedAt: row.installed_at,
    updatedAt: row.updated_at,
  });
}

export function toDetail(row: ServerTable): ServerDetail {
  return {
    ...toView(row),
    discoveredTools: parseJson<DiscoveredTool[]>(row.discovered_tools, []),
    discoveredPrompts: parseJson<unknown[]>(row.discovered_prompts, []),
    discoveredResources: parseJson<unknown[]>(row.discovered_resources, []),
  };
}
