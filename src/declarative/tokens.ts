/**
 * Declarative tokens: named in the file, identified in the store by their hash. A config token whose hash changed
 * was rotated, so the old one is revoked; only `prune` revokes a config token the file no longer names. Tokens
 * from other sources (the bootstrap admin, the API, the CLI) are never changed.
 */
import { type RevocationDeps, revokePrincipal } from '../approvals/principals.js';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { GatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import type { Store } from '../store/db.js';
import type { TokenRecord, TokenStore } from '../store/tokens.js';
import { sameSet } from './compare.js';
import type { DeclaredToken } from './load.js';
import { formatPath } from './paths.js';
import type { KindReport } from './report.js';

export interface TokenDeps extends RevocationDeps {
  tokens: TokenStore;
  store: Store;
  audit: AuditLog;
  events: EventHub;
}

type TokenChanges = {
  groups?: string[];
  rateLimit?: number | null;
  maxConcurrent?: number | null;
  maxSessions?: number | null;
  toolView?: string | null;
};

export type TokenPlan =
  | { action: 'create'; index: number; token: DeclaredToken; revoke: TokenRecord[] }
  | { action: 'update'; index: number; token: DeclaredToken; id: string; changes: TokenChanges; revoke: TokenRecord[] }
  | { action: 'unchanged'; index: number; token: DeclaredToken };

export interface TokensPlan {
  entries: TokenPlan[];
  prune: TokenRecord[];
}

export async function planTokens(
  deps: Pick<TokenDeps, 'tokens' | 'store'>,
  declared: readonly DeclaredToken[],
  options: { prune: boolean },
): Promise<TokensPlan> {
  assertDistinctHashes(declared);
  const live = await deps.tokens.activeByHash();
  const configByName = new Map<string, Array<{ hash: string; record: TokenRecord }>>();
  for (const [hash, record] of live) {
    if (record.source !== 'config') continue;
    configByName.set(record.name, [...(configByName.get(record.name) ?? []), { hash, record }]);
  }
  const entries = declared.map((token, index): TokenPlan => {
    const at = formatPath(['tokens', index]);
    // The same name with another hash: the file rotated the token, so the old one goes.
    const revoke = (configByName.get(token.name) ?? []).filter((t) => t.hash !== token.hash).map((t) => t.record);
    const holder = live.get(token.hash);
    if (!holder) return { action: 'create', index, token, revoke };
    if (holder.source !== 'config' || holder.name !== token.name) {
      throw conflict(
        `${at}: this token is already registered as "${holder.name}" (${holder.source}); issue a new one.`,
      );
    }
    if (holder.role !== token.role) {
      throw conflict(`${at}.role: a token's role cannot change (it is ${holder.role}); issue a new token.`);
    }
    const changes: TokenChanges = {};
    if (token.groups && !sameSet(token.groups, holder.groups)) changes.groups = token.groups;
    if (token.rateLimit !== undefined && token.rateLimit !== holder.rateLimit) changes.rateLimit = token.rateLimit;
    if (token.maxConcurrent !== undefined && token.maxConcurrent !== holder.maxConcurrent) {
      changes.maxConcurrent = token.maxConcurrent;
    }
    if (token.maxSessions !== undefined && token.maxSessions !== holder.maxSessions) {
      changes.maxSessions = token.maxSessions;
    }
    if (token.toolView !== undefined && token.toolView !== holder.toolView) changes.toolView = token.toolView;
    if (Object.keys(changes).length === 0 && revoke.length === 0) return { action: 'unchanged', index, token };
    return { action: 'update', index, token, id: holder.id, changes, revoke };
  });
  await assertNotRevoked(deps.store, entries);
  const names = new Set(declared.map((t) => t.name));
  const prune = options.prune
    ? [...configByName.entries()].filter(([name]) => !names.has(name)).flatMap(([, held]) => held.map((t) => t.record))
    : [];
  return { entries, prune };
}

export async function applyTokens(
  deps: TokenDeps,
  plan: TokensPlan,
  actor: Principal,
  report: KindReport,
): Promise<void> {
  const { tokens, audit, events } = deps;
  const revoke = async (record: TokenRecord) => {
    if (!(await tokens.revoke(record.id))) return;
    await audit.recordAdmin({ action: 'token.revoke', actor, data: { id: record.id, source: 'config' } });
    await revokePrincipal(deps, record.id, actor, 'The token was revoked (configuration).');
    await events.publish('token.changed', { id: record.id, change: 'revoked' });
  };
  for (const step of plan.entries) {
    const { token } = step;
    if (step.action === 'unchanged') {
      report.unchanged.push(token.name);
      continue;
    }
    if (step.action === 'create') {
      // Created before the rotated-out token is revoked, so a failure leaves the old one working.
      if (!(await createToken(deps, step.index, token, actor))) {
        report.unchanged.push(token.name);
        continue;
      }
      (step.revoke.length > 0 ? report.updated : report.created).push(token.name);
    } else {
      if (Object.keys(step.changes).length > 0) {
        await tokens.update(step.id, step.changes);
        await audit.recordAdmin({
          action: 'token.update',
          actor,
          data: { id: step.id, fields: Object.keys(step.changes) },
        });
        // With its fields: a token given other groups has its open 2025 sessions ended on every replica.
        await events.publish('token.changed', { id: step.id, change: 'updated', fields: Object.keys(step.changes) });
      }
      report.updated.push(token.name);
    }
    for (const record of step.revoke) await revoke(record);
  }
  for (const record of plan.prune) {
    await revoke(record);
    report.pruned.push(record.name);
  }
}

/** One token under two names: the second create would fail on the unique hash, after the first was written. */
function assertDistinctHashes(declared: readonly DeclaredToken[]): void {
  const first = new Map<string, number>();
  for (const [index, token] of declared.entries()) {
    const seen = first.get(token.hash);
    if (seen === undefined) first.set(token.hash, index);
    else {
      throw conflict(
        `${formatPath(['tokens', index, 'hash'])}: the same token as ${formatPath(['tokens', seen])}; ` +
          'each entry needs a token of its own.',
      );
    }
  }
}

/** Hashes stay unique after a revocation, so a revoked token cannot be created again: refused before any write. */
async function assertNotRevoked(store: Store, entries: readonly TokenPlan[]): Promise<void> {
  const creates = entries.filter((step) => step.action === 'create');
  if (creates.length === 0) return;
  const hashes = creates.map((step) => step.token.hash);
  const rows = await store.db
    .selectFrom('tokens')
    .select('hash')
    .where('hash', 'in', hashes)
    .where('revoked_at', 'is not', null)
    .execute();
  const revoked = new Set(rows.map((row) => row.hash));
  const step = creates.find((c) => revoked.has(c.token.hash));
  if (step) throw unregistrable(step.index);
}

function unregistrable(index: number, cause?: unknown): GatehouseError {
  return conflict(
    `${formatPath(['tokens', index])}: this token cannot be registered (it was revoked, or is held by another ` +
      'record); issue a new one.',
    cause,
  );
}

/** False when another replica applying the same file created it first. */
async function createToken(deps: TokenDeps, index: number, token: DeclaredToken, actor: Principal): Promise<boolean> {
  let record: TokenRecord;
  try {
    ({ record } = await deps.tokens.create({ ...token, source: 'config' }));
  } catch (error) {
    const holder = (await deps.tokens.activeByHash()).get(token.hash);
    if (holder?.source === 'config' && holder.name === token.name) return false;
    // Hashes are unique, revoked tokens included: a revoked token cannot come back.
    throw unregistrable(index, error);
  }
  await deps.audit.recordAdmin({
    action: 'token.create',
    actor,
    data: { id: record.id, role: record.role, source: 'config' },
  });
  await deps.events.publish('token.changed', { id: record.id, change: 'created' });
  return true;
}

function conflict(message: string, cause?: unknown): GatehouseError {
  return new GatehouseError('conflict', message, undefined, cause === undefined ? undefined : { cause });
}
