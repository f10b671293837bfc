/**
 * Declarative servers: each entry is compared with the installed record field by field, and only what differs is
 * written, through the registry (so every change has its audit and stream events, and nothing else does).
 *
 * An entry manages the fields it states: a field it leaves out keeps its installed value, and a map it states
 * (headers, env) is the whole map. A literal secret is compared with the sealed one by opening it inside the
 * server store, never here.
 */
import { isDeepStrictEqual } from 'node:util';
import { GatehouseError, isGatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import { assertCommandAllowed } from '../policy/commands.js';
import type { ToolPolicy } from '../policy/tool-policy.js';
import { hasUrlCredentials } from '../registry/manifest.js';
import { type ConfigPatch, type ServerStore, toDetail } from '../registry/records.js';
import type { SecretInput, ShownValue } from '../registry/secret-values.js';
import type { Registry } from '../registry/service.js';
import type { ServerTable } from '../store/schema.js';
import { sameSet } from './compare.js';
import { formatPath } from './paths.js';
import type { KindReport } from './report.js';
import type { ServerEntry } from './schema.js';

export type ServerDiff =
  | { action: 'unchanged'; entry: ServerEntry }
  | { action: 'update'; entry: ServerEntry; patch: ConfigPatch; toolPolicy?: ToolPolicy; exposure?: string[] };
export type ServerPlan = { action: 'create'; entry: ServerEntry } | ServerDiff;

export interface ServersPlan {
  entries: ServerPlan[];
  /** Installed ids the file omits, removed only with `prune`. */
  prune: string[];
  warnings: string[];
}

export interface ServersPlanOptions {
  prune: boolean;
  /** `stdio.allowedCommands` as the file's own settings leave it: those are written before the servers. */
  allowedCommands: readonly string[];
}

export async function planServers(
  registry: Registry,
  entries: readonly ServerEntry[],
  options: ServersPlanOptions,
): Promise<ServersPlan> {
  const warnings: string[] = [];
  const plans: ServerPlan[] = [];
  for (const [index, entry] of entries.entries()) {
    const at = formatPath(['servers', index]);
    const row = await rowOf(registry.records, entry.id);
    const plan: ServerPlan = row ? diffServer(registry.records, entry, row, at, warnings) : { action: 'create', entry };
    assertAccepted(plan, at, options.allowedCommands);
    plans.push(plan);
  }
  const declared = new Set(entries.map((e) => e.id));
  const prune = options.prune ? (await registry.records.all()).map((s) => s.id).filter((id) => !declared.has(id)) : [];
  return { entries: plans, prune, warnings };
}

export async function applyServers(
  registry: Registry,
  plan: ServersPlan,
  actor: Principal,
  report: KindReport,
): Promise<void> {
  report.warnings.push(...plan.warnings);
  for (const [index, step] of plan.entries.entries()) {
    const at = formatPath(['servers', index]);
    const diff =
      step.action === 'create' ? await installOrDiff(registry, step.entry, actor, at, report.warnings) : step;
    if (!diff) report.created.push(step.entry.id);
    else if (diff.action === 'unchanged') report.unchanged.push(step.entry.id);
    else {
      const { entry, patch, toolPolicy, exposure } = diff;
      if (Object.keys(patch).length > 0) await registry.configure(entry.id, patch, actor);
      if (toolPolicy) await registry.setToolPolicy(entry.id, toolPolicy, actor);
      if (exposure) await registry.setExposure(entry.id, exposure, actor);
      report.updated.push(entry.id);
    }
  }
  for (const id of plan.prune) {
    try {
      await registry.uninstall(id, actor);
      report.pruned.push(id);
    } catch (error) {
      // Another replica pruning with the same file got there first.
      if (!isGatehouseError(error) || error.code !== 'mcp.not_found') throw error;
    }
  }
}

/**
 * Installs the entry (undefined), or, when another replica applying the same file installed it first, the diff
 * against what that replica installed.
 */
async function installOrDiff(
  registry: Registry,
  entry: ServerEntry,
  actor: Principal,
  at: string,
  warnings: string[],
): Promise<ServerDiff | undefined> {
  try {
    const { sandbox, pathArgs, workspaceRoots, lazyStart, idleShutdownS, ...fields } = entry;
    const options = definedOnly({ sandbox, pathArgs, workspaceRoots, lazyStart, idleShutdownS });
    await registry.install(
      {
        ...fields,
        description: entry.description ?? null,
        sourceKind: 'config',
        ...(Object.keys(options).length > 0 && { options }),
      },
      actor,
    );
    return undefined;
  } catch (error) {
    if (!isGatehouseError(error) || error.code !== 'mcp.already_installed') throw error;
    return diffServer(registry.records, entry, await registry.records.getRow(entry.id), at, warnings);
  }
}

async function rowOf(records: ServerStore, id: string): Promise<ServerTable | undefined> {
  try {
    return await records.getRow(id);
  } catch (error) {
    if (isGatehouseError(error) && error.code === 'mcp.not_found') return undefined;
    throw error;
  }
}

/**
 * The registry's refusals of an install or a configure, checked before anything of the file is written: the
 * URL or command each step would send (an unchanged one is not sent, so not checked, as the registry does).
 */
function assertAccepted(plan: ServerPlan, at: string, allowedCommands: readonly string[]): void {
  if (plan.action === 'unchanged') return;
  const { url, command } = plan.action === 'create' ? plan.entry : plan.patch;
  if (url && hasUrlCredentials(url)) throw urlCredentialsRefused(`${at}.url`);
  if (command !== undefined && plan.entry.transport === 'stdio') {
    named(`${at}.command`, () => assertCommandAllowed(command, allowedCommands));
  }
}

/** The registry's message and reason for credentials in a URL (registry/service.ts), with the file's path. */
function urlCredentialsRefused(path: string): GatehouseError {
  const message =
    'Credentials in the URL are refused; give them as a header or bearer auth instead (those are sealed).';
  return new GatehouseError('validation_error', `${path}: ${message}`, {
    issues: [{ path, message }],
    reason: 'credentials_in_url',
  });
}

/** Runs a check, naming the path into the file in the typed error it throws. */
function named(path: string, check: () => void): void {
  try {
    check();
  } catch (error) {
    if (!isGatehouseError(error)) throw error;
    const details = { ...error.details, issues: [{ path, message: error.message }] };
    throw new GatehouseError(error.code, `${path}: ${error.message}`, details, { cause: error });
  }
}

/** What must change for the installed record to match the entry; `at` is the entry's path, for messages. */
export function diffServer(
  records: ServerStore,
  entry: ServerEntry,
  row: ServerTable,
  at: string,
  warnings: string[],
): ServerDiff {
  const current = toDetail(row);
  if (entry.transport !== current.transport) {
    throw new GatehouseError(
      'conflict',
      `${at}.transport: "${entry.id}" is installed as ${current.transport}; a config file cannot change a ` +
        `server's transport (uninstall it first).`,
      { issues: [{ path: `${at}.transport`, message: `installed as ${current.transport}` }] },
    );
  }
  for (const field of ['name', 'description'] as const) {
    if (entry[field] !== undefined && entry[field] !== current[field]) {
      warnings.push(
        `${at}.${field}: differs from the installed ${field}, which is kept (the registry cannot change it).`,
      );
    }
  }

  const patch: ConfigPatch = {};
  let endpointChanged = false;
  if (entry.transport !== 'stdio') {
    if (entry.url !== current.url) {
      patch.url = entry.url;
      endpointChanged = true;
    }
  } else {
    if (entry.command !== current.command) {
      patch.command = entry.command;
      endpointChanged = true;
    }
    // The command and its arguments are one invocation: a stated command without args means none.
    const args = entry.args ?? [];
    if (!isDeepStrictEqual(args, current.args)) patch.args = args;
  }

  // A literal is sent again when the endpoint changes: sealed values are bound to the old one and dropped.
  const keep = (field: 'headers' | 'env' | 'auth', name: string, stored: ShownValue | undefined, wanted: SecretInput) =>
    stored !== undefined &&
    (typeof wanted === 'string'
      ? !endpointChanged && 'set' in stored && records.equalsSealed(row, field, name, wanted)
      : 'env' in stored && stored.env === wanted.env);
  const dropped = (values: Record<string, ShownValue>) => Object.values(values).some((v) => 'set' in v);

  for (const field of ['headers', 'env'] as const) {
    const wanted = entry[field];
    const stored = current[field];
    if (wanted === undefined) {
      if (endpointChanged && dropped(stored)) warnings.push(droppedWarning(at, field));
      continue;
    }
    const changes: Record<string, SecretInput | null> = {};
    for (const [name, value] of Object.entries(wanted)) {
      if (!keep(field, name, stored[name], value)) changes[name] = value;
    }
    for (const name of Object.keys(stored)) if (!Object.hasOwn(wanted, name)) changes[name] = null;
    if (Object.keys(changes).length > 0) patch[field] = changes;
  }

  if (entry.auth !== undefined) {
    const wanted = entry.auth;
    const have = current.auth;
    let same: boolean;
    if (wanted.type === 'none') same = have.type === 'none';
    else if (wanted.type === 'bearer') same = have.type === 'bearer' && keep('auth', 'token', have.token, wanted.token);
    else {
      // OAuth: the same settings, and the same client secret (sealed or referenced) when one is given.
      const { clientSecret, ...plain } = wanted;
      same =
        have.type === 'oauth' &&
        !endpointChanged &&
        isDeepStrictEqual(oauthPlain({ grant: 'authorization_code', ...plain }), oauthPlain(have)) &&
        (clientSecret === undefined
          ? have.clientSecret === undefined
          : keep('auth', 'clientSecret', have.clientSecret, clientSecret));
    }
    if (!same) patch.auth = wanted;
  } else if (endpointChanged && current.auth.type === 'bearer' && dropped({ token: current.auth.token })) {
    warnings.push(droppedWarning(at, 'auth'));
  }

  for (const flag of ['enabled', 'privateNetwork', 'trustNewTools'] as const) {
    if (entry[flag] !== undefined && entry[flag] !== current[flag]) patch[flag] = entry[flag];
  }

  // A stated sandbox is the whole sandbox; an option the entry leaves out is not managed.
  const options: NonNullable<ConfigPatch['options']> = {};
  if (entry.sandbox !== undefined && !isDeepStrictEqual(entry.sandbox, current.sandbox ?? {})) {
    options.sandbox = entry.sandbox;
  }
  for (const field of OPTION_FIELDS) {
    const wanted = entry[field];
    if (wanted !== undefined && !isDeepStrictEqual(wanted, current[field])) Object.assign(options, { [field]: wanted });
  }
  if (Object.keys(options).length > 0) patch.options = options;

  const toolPolicy =
    entry.toolPolicy && !isDeepStrictEqual(entry.toolPolicy, current.toolPolicy) ? entry.toolPolicy : undefined;
  const exposure = entry.exposure && !sameSet(entry.exposure, current.exposure) ? entry.exposure : undefined;
  if (Object.keys(patch).length === 0 && !toolPolicy && !exposure) return { action: 'unchanged', entry };
  return {
    action: 'update',
    entry,
    patch,
    ...(toolPolicy ? { toolPolicy } : {}),
    ...(exposure ? { exposure } : {}),
  };
}

/** The options a config file states beside the manifest (`serverOptionFields`). */
const OPTION_FIELDS = ['pathArgs', 'workspaceRoots', 'lazyStart', 'idleShutdownS'] as const;

function definedOnly<T extends Record<string, unknown>>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as Partial<T>;
}

function droppedWarning(at: string, field: string): string {
  return `${at}.${field}: sealed values were bound to the old endpoint and are dropped; state them in the file to keep them.`;
}

/** The non-secret OAuth settings, for comparing a file's entry with a record. */
function oauthPlain(auth: {
  mode: string;
  grant?: string;
  clientId?: string | undefined;
  scopes?: string[] | undefined;
  issuer?: string | undefined;
}) {
  return {
    mode: auth.mode,
    grant: auth.grant,
    clientId: auth.clientId ?? null,
    scopes: auth.scopes ?? null,
    // The authorization server the client is bound to: a file that changes only it is a change.
    issuer: auth.issuer ?? null,
  };
}
