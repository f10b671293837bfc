/** The audit trail over REST: `GET /api/audit` (filtered, paged) and `GET /api/mcp/clients` (clients seen). */
import { z } from 'zod';
import { type AuditEventView, AuditQuery } from '../audit/query.js';
import { CALL_VERDICTS } from '../policy/verdicts.js';
import type { Store } from '../store/db.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

/** An ISO-8601 time with a zone, normalized to the stored form (UTC, milliseconds) so text comparison is exact. */
const isoTime = z.iso
  .datetime({ offset: true })
  .transform((value) => new Date(value).toISOString())
  .describe('ISO-8601 time, e.g. 2026-01-31T12:00:00Z');

/** A name or id to filter by: printable text (a NUL is no id, and PostgreSQL refuses it in any text). */
const filterText = z
  .string()
  .min(1)
  .max(200)
  .refine(
    (value) => ![...value].some((char) => (char.codePointAt(0) ?? 0) < 0x20),
    'must not contain control characters',
  );

const auditQuery = pageQuery.extend({
  client: filterText.optional().describe('client (token) id or name'),
  server: filterText.optional(),
  verdict: z.enum(CALL_VERDICTS).optional(),
  kind: z.enum(['admin', 'call', 'ops']).optional(),
  since: isoTime.optional(),
  user: filterText.optional().describe('user id: that person’s activity'),
  trace: z
    .string()
    .regex(/^[0-9a-f]{32}$/)
    .optional()
    .describe('OpenTelemetry trace id (32 lowercase hex): the events of that trace'),
});

const clientsQuery = pageQuery.extend({ since: isoTime.optional() });

/** A call row of another client, for an agent's eyes: its arguments, result, asks and digest taken out. */
function withoutOthersPayload(event: AuditEventView, callerId: string): AuditEventView {
  if (event.kind !== 'call' || event.actorId === callerId) return event;
  const data = event.data as Record<string, unknown> | null;
  const kept =
    data && typeof data === 'object'
      ? Object.fromEntries(Object.entries(data).filter(([key]) => !PAYLOAD_KEYS.has(key)))
      : null;
  return { ...event, argsDigest: null, data: kept && Object.keys(kept).length > 0 ? kept : null };
}

const PAYLOAD_KEYS: ReadonlySet<string> = new Set(['arguments', 'result', 'asks', 'payloadError']);

/** `settle` resolves once every call row this process answered is in the store (the audit's journal). */
export function auditRoutes(deps: { store: Store; settle?: () => Promise<void> }): RouteDeclaration[] {
  const audit = new AuditQuery(deps.store);
  const settle = deps.settle ?? (async () => {});
  return [
    defineRoute({
      method: 'GET',
      url: '/api/audit',
      summary: 'Audit events, newest first: tool calls (verdict, outcome, latency, sizes) and control-plane changes.',
      scope: 'audit',
      access: ['admin', 'operator', 'member'],
      mcp: { tool: 'audit_list', tier: 'autonomousRead' },
      query: auditQuery,
      async handler({ query, principal }) {
        const { limit, offset, ...filter } = query;
        // A member sees its own activity only: its user id, never a name that happens to equal it.
        const own = principal?.role === 'member' ? { userId: principal.user?.id ?? principal.id } : {};
        await settle();
        const { events, total } = await audit.list({ ...filter, ...own }, { limit, offset });
        // An agent reading the trail (`mcp.scope.audit` on /mcp/admin) sees other clients' calls without what they
        // sent or got: no payload, and no digest, which a guess at low-entropy arguments (a PIN) would confirm.
        if (principal?.role === 'agent') {
          return listAnswer(
            'events',
            events.map((event) => withoutOthersPayload(event, principal.id)),
            total,
          );
        }
        return listAnswer('events', events, total);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/clients',
      summary: 'MCP clients seen in the audit trail, with last activity, call counts and the servers they used.',
      scope: 'servers',
      access: ['admin', 'operator'],
      mcp: { tool: 'mcp_client_list', tier: 'autonomousRead' },
      query: clientsQuery,
      async handler({ query }) {
        await settle();
        const { clients, total } = await audit.clients(query);
        return listAnswer('clients', clients, total);
      },
    }),
  ];
}
