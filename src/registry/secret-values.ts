/**
 * Header, env and auth values of a server record. A literal value is sealed
 * the moment it arrives and is shown back only as `{"set": true}`; an env
 * reference `{"env": "MCP_SECRET_X"}` is stored as it is and resolved when the
 * upstream is contacted. Only variables with the secret prefix can be named, so
 * Gatehouse's own settings are never resolvable.
 */
import { z } from 'zod';
import { SETTINGS } from '../config.js';
import { GatehouseError } from '../errors.js';
import { aadFor, type SealKey, seal, unseal } from '../secrets/seal.js';

export type StoredValue = { sealed: string } | { env: string };
export type ShownValue = { set: true } | { env: string };
export type SecretInput = string | { env: string };

export const envRefSchema = z.strictObject({
  env: z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/, 'not a variable name'),
});
export const secretInputSchema = z.union([z.string().max(16_384), envRefSchema]);

export interface RecordBinding {
  serverId: string;
  /** The URL or the command: a sealed value opens only for the record it was sealed for. */
  endpoint: string;
}

export function aad(binding: RecordBinding, field: string, name: string): Buffer {
  return aadFor([binding.serverId, binding.endpoint, field, name]);
}

/** Gatehouse's own settings (every `GATEHOUSE_*` variable and the aliases it reads): never resolvable, whatever the prefix. */
const OWN_SETTINGS: ReadonlySet<string> = new Set(
  Object.values(SETTINGS).flatMap((setting) => [setting.env, ...('aliases' in setting ? setting.aliases : [])]),
);

export function isOwnSetting(name: string): boolean {
  return name.startsWith('GATEHOUSE_') || OWN_SETTINGS.has(name);
}

export function assertEnvRef(name: string, prefix: string, path: string): void {
  if (!name.startsWith(prefix) || name.length === prefix.length) {
    throw new GatehouseError('mcp.secret_ref_refused', `${path}: env references must name a ${prefix}* variable.`, {
      issues: [{ path, message: `must name a ${prefix}* variable` }],
    });
  }
  // A broad prefix (GATEHOUSE_SECRET_ENV_PREFIX=G) must not reach the sealing key or any other setting.
  if (isOwnSetting(name)) {
    throw new GatehouseError('mcp.secret_ref_refused', `${path}: ${name} is a Gatehouse setting, never resolvable.`, {
      issues: [{ path, message: 'names a Gatehouse setting' }],
    });
  }
}

export function storeValue(
  key: SealKey,
  binding: RecordBinding,
  field: string,
  name: string,
  input: SecretInput,
  prefix: string,
): StoredValue {
  if (typeof input === 'string') return { sealed: seal(key, input, aad(binding, field, name)) };
  assertEnvRef(input.env, prefix, `${field}.${name}`);
  return { env: input.env };
}

export function showValue(value: StoredValue): ShownValue {
  return 'env' in value ? { env: value.env } : { set: true };
}

/** A value as given (before it is sealed), as an operator may see it: literals masked, references named. */
export function showInput(input: SecretInput | null): ShownValue | null {
  if (input === null) return null;
  return typeof input === 'string' ? { set: true } : { env: input.env };
}

export function showMap(values: Record<string, StoredValue>): Record<string, ShownValue> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [name, showValue(value)]));
}

/** The plain value for contacting the upstream. Never log or return it. */
export function openValue(
  key: SealKey,
  binding: RecordBinding,
  field: string,
  name: string,
  value: StoredValue,
  env: NodeJS.ProcessEnv,
  prefix: string,
): string {
  if ('sealed' in value) return unseal(key, value.sealed, aad(binding, field, name));
  assertEnvRef(value.env, prefix, `${field}.${name}`);
  const resolved = env[value.env];
  if (resolved === undefined) {
    throw new GatehouseError('validation_error', `${field}.${name} refers to ${value.env}, which is not set.`);
  }
  return resolved;
}

/**
 * What a server keeps of its credentials when its target (URL or command) changes: nothing. Sealed
 * values, env references and the bearer token were given for the old target; handing any of them
 * to a new one would let whoever re-points a server collect them. The one place this rule lives;
 * a credential the same change gives again is applied after it. The server's upstream OAuth grants,
 * registered clients and pending flows go in the same transaction (`dropServerGrants`, called by
 * `ServerStore.patchConfig` whenever this is).
 */
export function credentialsForNewTarget(): {
  headers: Record<string, StoredValue>;
  env: Record<string, StoredValue>;
  auth: { type: 'none' };
} {
  return { headers: {}, env: {}, auth: { type: 'none' } };
}
