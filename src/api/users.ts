/** People over REST: `/api/users` (admin) and `/api/users/me` (whoever is signed in). */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { GatehouseError } from '../errors.js';
import { deleteUser, endUserAccess, type LifecycleDeps, takeLeftGroups } from '../identity/user-lifecycle.js';
import { USER_ROLES, type User } from '../identity/users.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';
import { groupName } from './tokens.js';

const userName = z.string().trim().min(1).max(100);
const email = z.string().trim().email().max(320).nullable();
const createBody = z.strictObject({
  name: userName,
  email: email.optional(),
  role: z.enum(USER_ROLES).default('member'),
  groups: z.array(groupName).max(64).optional(),
});
const updateBody = z.strictObject({
  name: userName.optional(),
  email: email.optional(),
  role: z.enum(USER_ROLES).optional(),
  groups: z.array(groupName).max(64).optional(),
  disabled: z.boolean().optional(),
});
const idParams = z.strictObject({ id: z.string().min(1).max(64) });

export function publicUser(user: User) {
  const { id, name, email: mail, role, groups, disabled, source, createdAt, updatedAt, lastSeenAt } = user;
  return { id, name, email: mail, role, groups, disabled, source, createdAt, updatedAt, lastSeenAt };
}

export function userRoutes(
  deps: LifecycleDeps & {
    audit: AuditLog;
    events: EventHub;
    /** An OIDC role map is set: the provider's groups decide its users' role and groups at every sign-in. */
    providerManaged?: boolean;
  },
): RouteDeclaration[] {
  const { users, tokens, audit, events } = deps;
  const nameFree = async (name: string, except?: string) => {
    const taken = await users.find(name);
    if (taken && taken.id !== except && taken.name === name) {
      throw new GatehouseError('user.name_taken', `A user named ${name} already exists.`, { name });
    }
  };
  return [
    defineRoute({
      method: 'GET',
      url: '/api/users/me',
      summary: 'Who is signed in: the principal (agent or session) and the person behind it, if any.',
      scope: 'platform',
      access: ['admin', 'operator', 'member', 'agent', 'ops'],
      mcp: { exclude: 'platform_auth_context answers who the agent is' },
      async handler({ principal }) {
        const p = principal as NonNullable<typeof principal>;
        const user = p.user ? await users.get(p.user.id) : undefined;
        return {
          principal: { id: p.id, name: p.name, role: p.role, groups: p.groups },
          user: user ? publicUser(user) : null,
          tokens: user ? (await tokens.ownedBy(user.id)).map((t) => ({ id: t.id, name: t.name, role: t.role })) : [],
        };
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/users',
      summary: 'List users (people who sign in and own agent tokens).',
      scope: 'tokens',
      access: ['admin'],
      mcp: { tool: 'user_list', tier: 'autonomousRead' },
      query: pageQuery,
      async handler({ query }) {
        const { users: found, total } = await users.list(query);
        return listAnswer('users', found.map(publicUser), total);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/users/:id',
      summary: 'One user, with the tokens they own.',
      scope: 'tokens',
      access: ['admin'],
      mcp: { tool: 'user_get', tier: 'autonomousRead' },
      params: idParams,
      async handler({ params }) {
        const user = await users.get(params.id);
        if (!user) throw new GatehouseError('not_found', `No user ${params.id}.`);
        const owned = await tokens.ownedBy(user.id);
        return { ...publicUser(user), tokens: owned.map((t) => ({ id: t.id, name: t.name, role: t.role })) };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/users',
      summary: 'Create a user (default role member); they sign in with an owned token or the OIDC provider.',
      scope: 'tokens',
      access: ['admin'],
      mcp: { exclude: 'an agent could make itself a person with a role' },
      body: createBody,
      status: 201,
      async handler({ body, principal }) {
        await nameFree(body.name);
        const user = await users.create({ ...body, source: 'api' });
        await audit.recordAdmin({ action: 'user.create', actor: principal, data: { id: user.id, role: user.role } });
        await events.publish('user.changed', { id: user.id, change: 'created' });
        return publicUser(user);
      },
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/users/:id',
      summary: "Change a user's name, email, role or groups, or disable them (ends sessions, tokens' use, approvals).",
      scope: 'tokens',
      access: ['admin'],
      mcp: { exclude: 'an agent could raise a person’s role or lock out its operators' },
      params: idParams,
      body: updateBody,
      async handler({ params, body, principal }) {
        const existing = await users.get(params.id);
        if (!existing) throw new GatehouseError('not_found', `No user ${params.id}.`);
        if (body.name !== undefined) await nameFree(body.name, existing.id);
        // An edit the next sign-in would silently undo is refused instead.
        if (
          deps.providerManaged &&
          existing.source === 'oidc' &&
          (body.role !== undefined || body.groups !== undefined)
        )
          throw new GatehouseError('user.provider_managed');
        const user = (await users.update(params.id, body)) as User;
        // Groups the person left leave their tokens too (a member's agents keep nothing their person lost).
        const narrowed = await takeLeftGroups(deps.tokens, user.id, existing.groups, user.groups);
        for (const id of narrowed) await events.publish('token.changed', { id, change: 'updated', fields: ['groups'] });
        let ended: Awaited<ReturnType<typeof endUserAccess>> | undefined;
        if (body.disabled === true && !existing.disabled) {
          ended = await endUserAccess(deps, user.id, principal, 'The user was disabled.');
        }
        await audit.recordAdmin({
          action: body.disabled === true && !existing.disabled ? 'user.disable' : 'user.update',
          actor: principal,
          data: {
            id: user.id,
            fields: Object.keys(body),
            ...(narrowed.length > 0 ? { narrowedTokens: narrowed } : {}),
            ...(ended ? { cancelled: ended.cancelledApprovals } : {}),
          },
        });
        // With its fields: a person given other groups or another role has what their agents hold open ended.
        await events.publish('user.changed', { id: user.id, change: 'updated', fields: Object.keys(body) });
        return { ...publicUser(user), ...(ended ? { cancelledApprovals: ended.cancelledApprovals } : {}) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/users/:id',
      summary: 'Delete a user: sessions end, the tokens they own are revoked, their pending approvals cancelled.',
      scope: 'tokens',
      access: ['admin'],
      mcp: { exclude: 'an agent could lock out its operators' },
      params: idParams,
      async handler({ params, principal }) {
        const done = await deleteUser(deps, params.id, principal);
        if (!done) throw new GatehouseError('not_found', `No user ${params.id}.`);
        await audit.recordAdmin({ action: 'user.delete', actor: principal, data: { id: params.id, ...done } });
        await events.publish('user.changed', { id: params.id, change: 'deleted' });
        return { deleted: params.id, revokedTokens: done.revokedTokens };
      },
    }),
  ];
}
