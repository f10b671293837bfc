/**
 * Reading the audit trail: filtered, paged event lists (newest first) and the
 * clients seen, derived from call events. Every query is bounded by its page;
 * the per-client server lists only for the clients of the page.
 */
import type { Store } from '../store/db.js';
import { parseJson } from '../store/json.js';
import type { AuditEventTable } from '../store/schema.js';

type AuditEventRow = Omit<AuditEventTable, 'id'> & { id: number };

export interface AuditFilter {
  /** A client (actor) id, or a token name (matches every token ever given that name). */
  client?: string | undefined;
  server?: string | undefined;
  verdict?: string | undefined;
  kind?: string | undefined;
  /** ISO-8601 time: events at or after it. */
  since?: string | undefined;
  /** A user id or name: events of that person (their agents' calls and their own changes). */
  user?: string | undefined;
  /** A user id, matched as an id only: the events of exactly that person (a member's own activity). */
  userId?: string | undefined;
  /** An OpenTelemetry trace id: the events of that trace (a call, and its approved execution). */
  trace?: string | undefined;
}

export interface PageOptions {
  limit: number;
  offset: number;
}

export interface AuditEventView {
  id: number;
  at: string;
  kind: string;
  action: string;
  actorId: string | null;
  actorName: string | null;
  /** The person the actor acted for, when known. */
  userId: string | null;
  userName: string | null;
  serverId: string | null;
  tool: string | null;
  verdict: string | null;
  approvalId: string | null;
  outcome: string | null;
  latencyMs: number | null;
  requestBytes: number | null;
  responseBytes: number | null;
  argsDigest: string | null;
  /** The call's OpenTelemetry trace id (tracing on), to find its trace in the tracing backend. */
  traceId: string | null;
  data: unknown;
}

export interface ClientServerView {
  id: string;
  calls: number;
  lastSeen: string;
}

export interface ClientView {
  id: string;
  name: string | null;
  /** The person this agent acted for (one entry per agent and user); null when nobody in particular. */
  user: { id: string; name: string | null } | null;
  /** The token's role; null for a client without a token record (e.g. `local`). */
  role: string | null;
  lastSeen: string;
  calls: number;
  /** The servers it called (most recent first, at most `MAX_SERVERS_PER_CLIENT`); unknown-server calls excluded. */
  servers: ClientServerView[];
}

export const MAX_SERVERS_PER_CLIENT = 50;

const numberOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

function toView(row: AuditEventRow): AuditEventView {
  return {
    id: Number(row.id),
    at: row.at,
    kind: row.kind,
    action: row.action,
    actorId: row.actor_id,
    actorName: row.actor_name,
    userId: row.user_id ?? null,
    userName: row.user_name ?? null,
    serverId: row.server_id,
    tool: row.tool,
    verdict: row.verdict,
    approvalId: row.approval_id,
    outcome: row.outcome,
    latencyMs: numberOrNull(row.latency_ms),
    requestBytes: numberOrNull(row.request_bytes),
    responseBytes: numberOrNull(row.response_bytes),
    argsDigest: row.args_digest,
    traceId: row.trace_id ?? null,
    data: parseJson<unknown>(row.data, null),
  };
}

export class AuditQuery {
  constructor(private readonly store: Store) {}

  /** Events matching every given filter, newest first, with the total that match. */
  async list(filter: AuditFilter, page: PageOptions): Promise<{ events: AuditEventView[]; total: number }> {
    const db = this.store.db;
    const clientIds = filter.client === undefined ? undefined : await this.clientIds(filter.client);
    let query = db.selectFrom('audit_events');
    if (clientIds) query = query.where('actor_id', 'in', clientIds);
    if (filter.server !== undefined) query = query.where('server_id', '=', filter.server);
    if (filter.verdict !== undefined) query = query.where('verdict', '=', filter.verdict);
    if (filter.kind !== undefined) query = query.where('kind', '=', filter.kind);
    if (filter.since !== undefined) query = query.where('at', '>=', filter.since);
    if (filter.user !== undefined) query = query.where('user_id', 'in', await this.userIds(filter.user));
    if (filter.userId !== undefined) query = query.where('user_id', '=', filter.userId);
    if (filter.trace !== undefined) query = query.where('trace_id', '=', filter.trace);
    const [rows, counted] = await Promise.all([
      query.selectAll().orderBy('at', 'desc').orderBy('id', 'desc').limit(page.limit).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
    ]);
    return { events: rows.map(toView), total: Number(counted.total) };
  }

  /** Clients that made calls (optionally since a time), most recently active first. */
  async clients(
    options: PageOptions & { since?: string | undefined },
  ): Promise<{ clients: ClientView[]; total: number }> {
    const db = this.store.db;
    let calls = db.selectFrom('audit_events').where('kind', '=', 'call').where('actor_id', 'is not', null);
    if (options.since !== undefined) calls = calls.where('at', '>=', options.since);

    // One entry per agent and the person it acted for (an agent acting for two users is two entries).
    const [rows, counted] = await Promise.all([
      calls
        .select((eb) => [
          'actor_id',
          'user_id',
          eb.fn.max('actor_name').as('actor_name'),
          eb.fn.max('user_name').as('user_name'),
          eb.fn.max('at').as('last_seen'),
          eb.fn.countAll<number>().as('calls'),
        ])
        .groupBy(['actor_id', 'user_id'])
        .orderBy('last_seen', 'desc')
        .orderBy('actor_id')
        .orderBy('user_id')
        .limit(options.limit)
        .offset(options.offset)
        .execute(),
      db
        .selectFrom(calls.select(['actor_id', 'user_id']).groupBy(['actor_id', 'user_id']).as('pairs'))
        .select((eb) => eb.fn.countAll<number>().as('total'))
        .executeTakeFirstOrThrow(),
    ]);
    const ids = [...new Set(rows.map((row) => row.actor_id as string))];
    if (ids.length === 0) return { clients: [], total: Number(counted.total) };
    const pairKey = (actor: unknown, user: unknown) => `${String(actor)}\u0000${user ?? ''}`;

    const [tokens, perServer] = await Promise.all([
      db.selectFrom('tokens').select(['id', 'name', 'role']).where('id', 'in', ids).execute(),
      calls
        .where('actor_id', 'in', ids)
        .where('server_id', 'is not', null)
        .where('verdict', '<>', 'unknown_server')
        .select((eb) => [
          'actor_id',
          'user_id',
          'server_id',
          eb.fn.countAll<number>().as('calls'),
          eb.fn.max('at').as('last_seen'),
        ])
        .groupBy(['actor_id', 'user_id', 'server_id'])
        .execute(),
    ]);
    const tokenById = new Map(tokens.map((t) => [t.id, t]));
    const serversByClient = new Map<string, ClientServerView[]>();
    for (const row of perServer) {
      const key = pairKey(row.actor_id, row.user_id);
      const list = serversByClient.get(key) ?? [];
      list.push({ id: row.server_id as string, calls: Number(row.calls), lastSeen: String(row.last_seen) });
      serversByClient.set(key, list);
    }
    const clients = rows.map((row): ClientView => {
      const id = row.actor_id as string;
      const token = tokenById.get(id);
      const servers = (serversByClient.get(pairKey(row.actor_id, row.user_id)) ?? [])
        .sort((a, b) => (a.lastSeen < b.lastSeen ? 1 : a.lastSeen > b.lastSeen ? -1 : a.id.localeCompare(b.id)))
        .slice(0, MAX_SERVERS_PER_CLIENT);
      return {
        id,
        name: token?.name ?? row.actor_name ?? null,
        user: row.user_id ? { id: row.user_id, name: (row.user_name as string | null) ?? null } : null,
        role: token?.role ?? null,
        lastSeen: String(row.last_seen),
        calls: Number(row.calls),
        servers,
      };
    });
    return { clients, total: Number(counted.total) };
  }

  /** The user ids a `user` filter means: the value itself, and the ids of users with that name. */
  private async userIds(user: string): Promise<string[]> {
    const named = await this.store.db.selectFrom('users').select('id').where('name', '=', user).execute();
    return [...new Set([user, ...named.map((u) => u.id)])];
  }

  /** The actor ids a `client` filter means: the value itself, and the ids of tokens with that name. */
  private async clientIds(client: string): Promise<string[]> {
    const named = await this.store.db.selectFrom('tokens').select('id').where('name', '=', client).execute();
    return [...new Set([client, ...named.map((t) => t.id)])];
  }
}
