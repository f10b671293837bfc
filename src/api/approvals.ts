/** The approval queue over REST: operators list, read and decide; the decision answers before the call runs. */
import { z } from 'zod';
import type { ApprovalQueue } from '../approvals/queue.js';
import { APPROVAL_STATUSES, type ApprovalView, summariseApproval } from '../approvals/types.js';
import { GatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import { agentContext, inSpan, withContext } from '../telemetry/tracing.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const DECIDERS = ['admin', 'operator'] as const;

const idParams = z.strictObject({ id: z.string().min(1).max(64) });
const listQuery = pageQuery.extend({ status: z.enum(APPROVAL_STATUSES).optional() });
/** The body is optional: `POST …/approve` with no body decides without a reason. */
const decisionBody = z.strictObject({ reason: z.string().max(2000).optional() }).optional();

const reasonOf = (body: { reason?: string | undefined } | undefined): string | undefined =>
  body?.reason?.trim() || undefined;

/** Routes with an access list always have a principal; this keeps the type honest without `!`. */
function signedIn(principal: Principal | undefined): Principal {
  if (!principal) throw new GatehouseError('unauthorized');
  return principal;
}

/**
 * What a reader may see of an approval: operators (and admins) the whole card; an agent reading through
 * the admin surface's approvals read scope its own approvals whole, everyone else's summarised.
 */
function visibleTo(principal: Principal | undefined, approval: ApprovalView) {
  const reader = signedIn(principal);
  if ((DECIDERS as readonly string[]).includes(reader.role) || approval.requester.id === reader.id) return approval;
  return summariseApproval(approval);
}

/** The two decisions share one declaration: same access, same body, same answer. */
const DECISIONS = [
  {
    decision: 'approve',
    summary: 'Approve a pending call; it runs once, in the background, right after this answer (`approved`).',
  },
  { decision: 'reject', summary: 'Reject a pending call with an optional reason the agent will read.' },
] as const;

export interface ApprovalRouteDeps {
  queue: ApprovalQueue;
}

export function approvalRoutes({ queue }: ApprovalRouteDeps): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/api/approvals',
      summary:
        "Approvals, newest first, optionally by status (pending, approved, executed, …); results left out. An agent sees other requesters' approvals summarised (tool, times, state).",
      scope: 'approvals',
      access: DECIDERS,
      mcp: { tool: 'approval_list', tier: 'autonomousRead' },
      query: listQuery,
      async handler({ query, principal }) {
        const { approvals, total } = await queue.list(query);
        return listAnswer(
          'approvals',
          approvals.map((a) => visibleTo(principal, a)),
          total,
        );
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/approvals/:id',
      summary:
        "One approval card: requester, tool, the arguments exactly as they will be sent, detail, outcome (another requester's approval is summarised for an agent).",
      scope: 'approvals',
      access: DECIDERS,
      mcp: { tool: 'approval_get', tier: 'autonomousRead' },
      params: idParams,
      handler: async ({ params, principal }) => visibleTo(principal, await queue.get(params.id)),
    }),
    ...DECISIONS.map(({ decision, summary }) =>
      defineRoute({
        method: 'POST',
        url: `/api/approvals/:id/${decision}`,
        summary,
        scope: 'approvals',
        access: DECIDERS,
        mcp: { exclude: 'an agent could approve its own requests' },
        params: idParams,
        body: decisionBody,
        // Traced (tracing on), under the caller's `traceparent` header: the approved call's execution links to it.
        handler: ({ params, body, principal, request }) =>
          withContext(agentContext(request.headers, undefined), () =>
            inSpan(`approvals/${decision}`, 'server', { 'gatehouse.approval.id': params.id }, () =>
              queue.decide(params.id, decision, signedIn(principal), reasonOf(body)),
            ),
          ),
      }),
    ),
  ];
}
