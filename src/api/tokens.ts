/** Bearer tokens: create (shown once), list (never the token), update limits, revoke. */
import { z } from 'zod';
import type { RevocationDeps } from '../approvals/principals.js';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { GatehouseError } from '../errors.js';
import { checkRoleWithinOwner, type Principal, toolViewValue } from '../identity/index.js';
import { revokeToken } from '../identity/token-revocation.js';
import type { TokenRecord, TokenStore } from '../store/tokens.js';
import type { UserStore } from '../store/users.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

export const groupName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'group names are lower-case letters, digits, - and _');
const limitValue = z.number().int().min(1).max(1_000_000).nullable();
/** A token's own cap on live sessions (null: `hub.maxSessionsPerToken`). */
const sessionCap = z.number().int().min(1).max(10_000).nullable();
/** What the hub lists to the agent (null: the platform setting `hub.toolView`). */
const toolView = toolViewValue.nullable();

export const createBody = z.strictObject({
  role: z.enum(['admin', 'operator', 'agent', 'ops']),
  name: z.string().trim().min(1).max(100),
  groups: z.array(groupName).max(64).optional(),
  rateLimit: limitValue.optional(),
  maxConcurrent: limitValue.optional(),
  maxSessions: sessionCap.optional(),
  /** The user who owns it (default: the signed-in user, for an agent token an admin creates from a session). */
  userId: z.string().min(1).max(64).nullable().optional(),
  toolView: toolView.optional(),
});
const updateBody = z.strictObject({
  groups: z.array(groupName).max(64).optional(),
  rateLimit: limitValue.optional(),
  maxConcurrent: limitValue.optional(),
  maxSessions: sessionCap.optional(),
  toolView: toolView.optional(),
});
const idParams = z.strictObject({ id: z.string().min(1).max(64) });

export function publicToken(record: TokenRecord) {
  const { id, name, role, groups, rateLimit, maxConcurrent, maxSessions, toolView, source, createdAt, lastUsedAt } =
    record;
  return {
    id,
    name,
    role,
    groups,
    rateLimit,
    maxConcurrent,
    maxSessions,
    toolView,
    source,
    createdAt,
    lastUsedAt,
    userId: record.userId,
  };
}

/** Groups and a tool view shape what an agent sees on the hub: other roles carry neither. */
function agentOnly(body: { groups?: unknown; toolView?: unknown }, role: string): void {
  for (const field of ['groups', 'toolView'] as const) {
    if (body[field] !== undefined && body[field] !== null && role !== 'agent') {
      throw new GatehouseError('validation_error', `Only agent tokens carry ${field}.`, {
        issues: [{ path: `body.${field}`, message: `only agent tokens carry ${field}` }],
      });
    }
  }
}

/** A member's token, or an admin's any token: a member may hold only agent tokens of its own, within its groups. */
function checkMemberCreate(
  body: z.infer<typeof createBody>,
  principal: Principal | undefined,
): { userId: string; groups: string[] } | undefined {
  if (principal?.role !== 'member') return undefined;
  const user = principal.user;
  if (!user) throw new GatehouseError('forbidden', 'Only a signed-in person may create tokens here.');
  if (body.role !== 'agent') throw new GatehouseError('forbidden', 'A member may create agent tokens only.');
  if (body.userId !== undefined && body.userId !== user.id)
    throw new GatehouseError('forbidden', 'A member may create tokens for itself only.');
  for (const field of ['rateLimit', 'maxConcurrent', 'maxSessions'] as const) {
    if (body[field] !== undefined) throw new GatehouseError('forbidden', `Only an admin sets a token's ${field}.`);
  }
  const groups = body.groups ?? [...user.groups];
  const outside = groups.filter((g) => !user.groups.includes(g));
  if (outside.length > 0)
    throw new GatehouseError('forbidden', `A member's tokens stay within its groups (not ${outside.join(', ')}).`);
  return { userId: user.id, groups };
}

export function tokenRoutes(
  deps: { tokens: TokenStore; audit: AuditLog; events: EventHub; users?: UserStore } & RevocationDeps,
): RouteDeclaration[] {
  const { tokens, audit, events } = deps;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/tokens',
      summary:
        'Create a bearer token; the answer is the only time the token is shown (a member: agent tokens of its own).',
      scope: 'tokens',
      access: ['admin', 'member'],
      mcp: { exclude: 'an agent could mint itself credentials' },
      body: createBody,
      status: 201,
      async handler({ body: asked, principal }) {
        agentOnly(asked, asked.role);
        const member = checkMemberCreate(asked, principal);
        const body = member ? { ...asked, groups: member.groups } : asked;
        // Agent tokens created by a signed-in user belong to that user (unless the body names another owner).
        const userId =
          member?.userId ??
          (body.userId === undefined ? (body.role === 'agent' ? principal?.user?.id : undefined) : body.userId);
        if (userId && deps.users) {
          const owner = await deps.users.get(userId);
          if (!owner) {
            throw new GatehouseError('validation_error', `No user ${userId}.`, {
              issues: [{ path: 'body.userId', message: 'no such user' }],
            });
          }
          checkRoleWithinOwner(body.role, owner, 'body.role');
        }
        const { record, token } = await tokens.create({ ...body, userId: userId ?? null, source: 'api' });
        await audit.recordAdmin({
          action: 'token.create',
          actor: principal,
          data: { id: record.id, role: record.role },
        });
        await events.publish('token.changed', { id: record.id, change: 'created' });
        return { ...publicToken(record), token };
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/tokens',
      summary: 'List live tokens (never the tokens themselves); a member, the tokens it owns.',
      scope: 'tokens',
      access: ['admin', 'member'],
      mcp: { tool: 'token_list', tier: 'autonomousRead' },
      query: pageQuery,
      async handler({ query, principal }) {
        const mine = principal?.role === 'member' ? { userId: principal.user?.id ?? '' } : {};
        const { tokens: records, total } = await tokens.list(query, mine);
        return listAnswer('tokens', records.map(publicToken), total);
      },
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/tokens/:id',
      summary: "Change a token's groups, tool view, or its rate, concurrency and session limits.",
      scope: 'tokens',
      access: ['admin'],
      mcp: { exclude: 'an agent could widen its own limits or groups' },
      params: idParams,
      body: updateBody,
      async handler({ params, body, principal }) {
        const existing = await tokens.get(params.id);
        if (!existing) throw new GatehouseError('not_found', `No token ${params.id}.`);
        agentOnly(body, existing.role);
        const record = await tokens.update(params.id, body);
        await audit.recordAdmin({
          action: 'token.update',
          actor: principal,
          data: { id: params.id, fields: Object.keys(body) },
        });
        // The fields tell replicas what changed: new groups end the token's open 2025 sessions (ended-access.ts).
        await events.publish('token.changed', { id: params.id, change: 'updated', fields: Object.keys(body) });
        return publicToken(record as TokenRecord);
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/tokens/:id',
      summary:
        'Revoke a token; it is refused from the next request on, and its approvals that have not run are cancelled.',
      scope: 'tokens',
      access: ['admin', 'member'],
      mcp: { exclude: 'an agent could lock out its operators' },
      params: idParams,
      async handler({ params, principal }) {
        // A member revokes its own tokens; another's is answered as if it did not exist.
        if (principal?.role === 'member' && (await tokens.get(params.id))?.userId !== principal.user?.id)
          throw new GatehouseError('not_found', `No token ${params.id}.`);
        if (!(await revokeToken(deps, params.id, principal))) {
          throw new GatehouseError('not_found', `No token ${params.id}.`);
        }
        return { revoked: params.id };
      },
    }),
  ];
}
