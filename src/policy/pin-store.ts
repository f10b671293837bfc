/**
 * Pins in the store. The first successful handshake pins every tool it sees;
 * later handshakes compare and never re-pin: a changed definition is
 * quarantined (`changed`), a tool that first appears later is quarantined
 * (`new`) unless the server trusts new tools, an oversized schema is
 * quarantined (`schema_too_large`), and so is one with a pattern the linear-time engine cannot run
 * (`unsafe_schema`), and a name listed more than once with different definitions (`duplicate`: which one a
 * call reaches is the upstream's choice). Only an operator's approval re-pins.
 */
import { createHash } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { GatehouseError } from '../errors.js';
import { nowIso, parseJson } from '../store/json.js';
import type { Database, ToolPinTable } from '../store/schema.js';
import {
  CURRENT_PIN_SCHEME,
  itemPinHash,
  type PinKind,
  type PinnableItem,
  pinnedItem,
  schemaRefusal,
  type ToolDefinition,
} from './pins.js';

/** `duplicate`: the upstream lists the name more than once, with different definitions. */
export type QuarantineReason = 'changed' | 'new' | 'schema_too_large' | 'unsafe_schema' | 'duplicate';

export interface PinChange {
  /** Set for every kind but `tool`. */
  kind?: PinKind;
  /** The item's name (a tool's or a prompt's). */
  tool: string;
  change: 'pinned' | 'quarantined' | 'released';
  reason?: QuarantineReason;
}

export interface PinView {
  kind: PinKind;
  /** The field-set version the pin compares on. */
  scheme: number;
  /** The item's name (a tool's or a prompt's). */
  tool: string;
  state: 'pinned' | 'quarantined';
  reason: QuarantineReason | null;
  pinHash: string | null;
  pendingHash: string | null;
  definition: ToolDefinition | null;
  pendingDefinition: ToolDefinition | null;
  firstSeenAt: string;
  updatedAt: string;
  approvedBy: string | null;
}

export function toPinView(row: ToolPinTable): PinView {
  return {
    kind: row.kind as PinKind,
    scheme: Number(row.scheme),
    tool: row.tool_name,
    state: row.state as PinView['state'],
    reason: (row.reason as QuarantineReason | null) ?? null,
    pinHash: row.pin_hash || null,
    pendingHash: row.pending_hash,
    definition: row.pin_hash ? parseJson<ToolDefinition | null>(row.definition, null) : null,
    pendingDefinition: parseJson<ToolDefinition | null>(row.pending_definition, null),
    firstSeenAt: row.first_seen_at,
    updatedAt: row.updated_at,
    approvedBy: row.approved_by,
  };
}

/**
 * Compares a handshake's items of one kind (tools by default, or prompts) with their pins and records what
 * changed, inside the caller's transaction. Each pin is compared on the field set of its own scheme.
 * `trustNewTools` lets new tools in unreviewed; it never applies to prompts.
 */
export async function reconcilePins(
  trx: Transaction<Database>,
  serverId: string,
  items: readonly (ToolDefinition | PinnableItem)[],
  options: { firstHandshake: boolean; trustNewTools: boolean; kind?: PinKind },
): Promise<PinChange[]> {
  const kind = options.kind ?? 'tool';
  const ofKind = kind === 'tool' ? {} : { kind };
  const at = nowIso();
  const existing = new Map(
    (
      await trx.selectFrom('tool_pins').selectAll().where('server_id', '=', serverId).where('kind', '=', kind).execute()
    ).map((r) => [r.tool_name, r]),
  );
  const changes: PinChange[] = [];
  for (const [name, copies] of byName(items as readonly PinnableItem[])) {
    const item = copies[0] as PinnableItem;
    const tool = { name };
    const row = existing.get(name);
    const scheme = row ? Number(row.scheme) : CURRENT_PIN_SCHEME;
    const definition = JSON.stringify(pinnedItem(item, kind, scheme));
    const hashes = [...new Set(copies.map((copy) => itemPinHash(copy, kind, scheme)))].sort();
    // Copies that differ are ambiguous (which one a call reaches is the upstream's choice): never pinned,
    // whatever was approved, until the upstream lists the name once. Identical copies are one item.
    const ambiguous = hashes.length > 1;
    // An ambiguous name's hash covers every copy: a change to any of them is a new pending definition.
    const hash = ambiguous
      ? createHash('sha256')
          .update(`duplicate\0${hashes.join(',')}`)
          .digest('hex')
      : (hashes[0] as string);
    // Only a tool's schemas are compiled and run: a prompt has none to refuse.
    const refused: QuarantineReason | null = ambiguous
      ? 'duplicate'
      : kind === 'tool'
        ? schemaRefusal(item as ToolDefinition)
        : null;
    if (!row) {
      const trusted = options.firstHandshake || (kind === 'tool' && options.trustNewTools);
      const quarantine: QuarantineReason | null = refused ?? (trusted ? null : 'new');
      await trx
        .insertInto('tool_pins')
        .values({
          server_id: serverId,
          kind,
          tool_name: tool.name,
          scheme,
          pin_hash: quarantine ? '' : hash,
          definition: quarantine ? 'null' : definition,
          state: quarantine ? 'quarantined' : 'pinned',
          reason: quarantine,
          pending_hash: quarantine ? hash : null,
          pending_definition: quarantine ? definition : null,
          first_seen_at: at,
          updated_at: at,
          approved_by: null,
        })
        .execute();
      changes.push(
        quarantine
          ? { ...ofKind, tool: tool.name, change: 'quarantined', reason: quarantine }
          : { ...ofKind, tool: tool.name, change: 'pinned' },
      );
      continue;
    }
    if (hash === row.pin_hash && !refused) {
      // Matches what was approved (again): nothing pending any more.
      if (row.state !== 'pinned') {
        await trx
          .updateTable('tool_pins')
          .set({ state: 'pinned', reason: null, pending_hash: null, pending_definition: null, updated_at: at })
          .where('server_id', '=', serverId)
          .where('kind', '=', kind)
          .where('tool_name', '=', tool.name)
          .execute();
        changes.push({ ...ofKind, tool: tool.name, change: 'released' });
      }
      continue;
    }
    if (row.state === 'quarantined' && row.pending_hash === hash && (!refused || row.reason === refused)) continue; // already waiting for review
    const reason: QuarantineReason = refused
      ? refused
      : row.pin_hash
        ? 'changed'
        : ((row.reason as QuarantineReason) ?? 'new');
    await trx
      .updateTable('tool_pins')
      .set({ state: 'quarantined', reason, pending_hash: hash, pending_definition: definition, updated_at: at })
      .where('server_id', '=', serverId)
      .where('kind', '=', kind)
      .where('tool_name', '=', tool.name)
      .execute();
    changes.push({ ...ofKind, tool: tool.name, change: 'quarantined', reason });
  }
  return changes;
}

/** Listed items by name, in the order first listed; a name listed more than once has every copy. */
function byName(items: readonly PinnableItem[]): Map<string, PinnableItem[]> {
  const names = new Map<string, PinnableItem[]>();
  for (const item of items) {
    const copies = names.get(item.name);
    if (copies) copies.push(item);
    else names.set(item.name, [item]);
  }
  return names;
}

/** A server's pins of every kind (tools first, then prompts, …), by name. */
export async function listPins(db: Kysely<Database>, serverId: string): Promise<PinView[]> {
  const rows = await db
    .selectFrom('tool_pins')
    .selectAll()
    .where('server_id', '=', serverId)
    .where('kind', '!=', 'override') // overrides ride beside the pins (src/overrides/store.ts)
    .orderBy('kind', 'desc')
    .orderBy('tool_name')
    .execute();
  return rows.map(toPinView);
}

/** Tool pin states keyed by tool name, for the verdicts of one server. */
export async function pinStates(db: Kysely<Database>, serverId: string): Promise<Map<string, PinView>> {
  return new Map((await listPins(db, serverId)).filter((p) => p.kind === 'tool').map((p) => [p.tool, p]));
}

export async function getPin(
  db: Kysely<Database>,
  serverId: string,
  tool: string,
  kind: PinKind = 'tool',
): Promise<PinView | undefined> {
  const row = await db
    .selectFrom('tool_pins')
    .selectAll()
    .where('server_id', '=', serverId)
    .where('kind', '=', kind)
    .where('tool_name', '=', tool)
    .executeTakeFirst();
  return row ? toPinView(row) : undefined;
}

/** One page of a server's pins, by tool name, with the total. */
export async function listPinsPage(
  db: Kysely<Database>,
  serverId: string,
  page: { limit: number; offset: number },
): Promise<{ pins: PinView[]; total: number }> {
  const rows = await db
    .selectFrom('tool_pins')
    .selectAll()
    .where('server_id', '=', serverId)
    .where('kind', '!=', 'override') // overrides ride beside the pins (src/overrides/store.ts)
    .orderBy('kind', 'desc')
    .orderBy('tool_name')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const { total } = await db
    .selectFrom('tool_pins')
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .where('server_id', '=', serverId)
    .where('kind', '!=', 'override')
    .executeTakeFirstOrThrow();
  return { pins: rows.map(toPinView), total: Number(total) };
}

/** Quarantined pins of every server, by server then kind and name, with the server's name: one page. */
export async function listQuarantinedPage(
  db: Kysely<Database>,
  page: { limit: number; offset: number },
): Promise<{ pins: (PinView & { serverId: string; serverName: string })[]; total: number }> {
  const rows = await db
    .selectFrom('tool_pins')
    .innerJoin('servers', 'servers.id', 'tool_pins.server_id')
    .selectAll('tool_pins')
    .select('servers.name as server_name')
    .where('tool_pins.state', '=', 'quarantined')
    .orderBy('tool_pins.server_id')
    .orderBy('tool_pins.kind', 'desc')
    .orderBy('tool_pins.tool_name')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const { total } = await db
    .selectFrom('tool_pins')
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .where('state', '=', 'quarantined')
    .executeTakeFirstOrThrow();
  return {
    pins: rows.map(({ server_name, ...row }) => ({
      ...toPinView(row),
      serverId: row.server_id,
      serverName: server_name,
    })),
    total: Number(total),
  };
}

export interface PinApproval {
  tool: string;
  /** The hash pinned before (null for a tool that was never pinned: `new`). */
  previousHash: string | null;
  pinHash: string;
  /** Why it had been quarantined. */
  reason: QuarantineReason | null;
}

/**
 * An operator's approval of a quarantined tool, inside the caller's transaction: the pending definition
 * becomes the pin. Refused (409) when nothing is pending or the schema is over the compile limits
 * (`conflict`), and when the pending hash is not the one the operator reviewed (`expectedHash`:
 * `pin.changed`, carrying the hash now pending).
 */
export async function approvePin(
  trx: Transaction<Database>,
  serverId: string,
  tool: string,
  options: { approvedBy: string; expectedHash: string; kind?: PinKind },
): Promise<PinApproval> {
  const kind = options.kind ?? 'tool';
  const row = await trx
    .selectFrom('tool_pins')
    .selectAll()
    .where('server_id', '=', serverId)
    .where('kind', '=', kind)
    .where('tool_name', '=', tool)
    .executeTakeFirst();
  if (!row) {
    throw new GatehouseError('not_found', `Server "${serverId}" has no ${kind} "${tool}".`, {
      server: serverId,
      tool,
      kind,
    });
  }
  if (row.state !== 'quarantined' || !row.pending_hash || !row.pending_definition) {
    throw new GatehouseError('conflict', `Tool "${tool}" has no pending definition to approve.`, {
      server: serverId,
      tool,
      state: row.state,
    });
  }
  if (options.expectedHash !== row.pending_hash) {
    throw new GatehouseError(
      'pin.changed',
      `Tool "${tool}" changed again since it was reviewed; review the new definition before approving.`,
      { server: serverId, tool, pendingHash: row.pending_hash },
    );
  }
  const pending = parseJson<ToolDefinition | null>(row.pending_definition, null);
  const refused = !pending ? 'schema_too_large' : kind === 'tool' ? schemaRefusal(pending) : null;
  if (refused === 'unsafe_schema') {
    throw new GatehouseError(
      'conflict',
      `Tool "${tool}" has a schema that cannot be checked safely (a pattern the linear-time engine cannot run, or a $ref loop); it cannot be approved.`,
      { server: serverId, tool, reason: 'unsafe_schema' },
    );
  }
  if (row.reason === 'duplicate') {
    throw new GatehouseError(
      'conflict',
      `"${tool}" is listed more than once by its server, with different definitions (which one a call reaches is the server's choice); it cannot be approved until the server lists it once.`,
      { server: serverId, tool, reason: 'duplicate' },
    );
  }
  if (!pending || row.reason === 'schema_too_large' || refused) {
    throw new GatehouseError(
      'conflict',
      `Tool "${tool}" has a schema over the size or depth limit; it cannot be approved.`,
      { server: serverId, tool, reason: 'schema_too_large' },
    );
  }
  const result = await trx
    .updateTable('tool_pins')
    .set({
      pin_hash: row.pending_hash,
      definition: row.pending_definition,
      state: 'pinned',
      reason: null,
      pending_hash: null,
      pending_definition: null,
      updated_at: nowIso(),
      approved_by: options.approvedBy,
    })
    .where('server_id', '=', serverId)
    .where('kind', '=', kind)
    .where('tool_name', '=', tool)
    .where('pending_hash', '=', row.pending_hash)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) {
    throw new GatehouseError('conflict', `Tool "${tool}" changed while it was being approved.`, {
      server: serverId,
      tool,
    });
  }
  return {
    tool,
    previousHash: row.pin_hash || null,
    pinHash: row.pending_hash,
    reason: (row.reason as QuarantineReason | null) ?? null,
  };
}
