/**
 * Tool pins over REST: the review (a field-by-field diff of a quarantined tool and
 * flags for hidden content) and the operator's approval that re-pins it.
 */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { GatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import {
  approvePin,
  getPin,
  listPinsPage,
  listQuarantinedPage,
  type PinApproval,
  type PinView,
} from '../policy/pin-store.js';
import type { PinKind } from '../policy/pins.js';
import { type DiffEntry, definitionDiff, type HiddenContentFlag, hiddenContentFlags } from '../policy/review.js';
import { serverIdSchema } from '../registry/ids.js';
import type { Registry } from '../registry/service.js';
import type { Store } from '../store/db.js';
import { listAnswer, pageQuery } from './lists.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;

const idParams = z.strictObject({ id: serverIdSchema });
/** `{tool}` names a tool, a prompt, or a UI resource by its `ui://` URI (percent-encoded in the path). */
const toolParams = z.strictObject({ id: serverIdSchema, tool: z.string().min(1).max(2048) });
const approveBody = z.strictObject({
  /** The pending hash the operator reviewed (required): a definition that changed again since is refused (409). */
  pendingHash: z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 hex digest'),
  /** What `{tool}` names: a tool (default), a prompt, or an MCP Apps UI resource (`ui://` URI). */
  kind: z.enum(['tool', 'prompt', 'resource']).optional(),
});

export interface PinReview extends PinView {
  /** For a quarantined tool: pinned → pending, field by field (every field `added` for a new tool). */
  diff: DiffEntry[] | null;
  /** Hidden content in the definition under review: the pending one when quarantined, else the pinned one. */
  flags: HiddenContentFlag[];
}

export function reviewOf(pin: PinView): PinReview {
  const quarantined = pin.state === 'quarantined';
  const underReview = quarantined ? pin.pendingDefinition : pin.definition;
  return {
    ...pin,
    diff: quarantined ? definitionDiff(pin.definition, pin.pendingDefinition) : null,
    flags: underReview ? hiddenContentFlags(underReview) : [],
  };
}

export interface PinRouteDeps {
  store: Store;
  audit: AuditLog;
  events: EventHub;
  registry: Registry;
}

export function pinRoutes({ store, audit, events, registry }: PinRouteDeps): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/api/mcp/pins/quarantined',
      summary:
        "Every server's quarantined tools, prompts and UI resources in one list (each with its server's id and name, the diff and hidden-content flags): the approvals inbox reads it in one request.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_pins_quarantined', tier: 'autonomousRead' },
      query: pageQuery,
      async handler({ query }) {
        const { pins, total } = await listQuarantinedPage(store.db, query);
        return listAnswer(
          'pins',
          pins.map((p) => ({ ...reviewOf(p), serverId: p.serverId, serverName: p.serverName })),
          total,
        );
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers/:id/pins',
      summary:
        "A server's pins (tools, prompts and ui:// UI resources, each with its kind); quarantined ones carry a field-by-field diff and hidden-content flags.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_pins', tier: 'autonomousRead' },
      params: idParams,
      query: pageQuery,
      async handler({ params, query }) {
        await registry.records.getRow(params.id); // 404 mcp.not_found
        const { pins, total } = await listPinsPage(store.db, params.id, query);
        return listAnswer('pins', pins.map(reviewOf), total);
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/mcp/servers/:id/pins/:tool/approve',
      summary:
        "Approve a quarantined tool's (prompt's, UI resource's) new definition, named by the pendingHash the operator reviewed (409 pin.changed when it changed again): it becomes the pin, and approvals bound to the old one end.",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_pin_approve', tier: 'gated' },
      params: toolParams,
      body: approveBody,
      async handler({ params, body, principal }) {
        if (!principal) throw new GatehouseError('unauthorized');
        const kind = body.kind ?? 'tool';
        const approved = await approveAndBump(registry, params.id, params.tool, principal, body.pendingHash, kind);
        await audit.recordAdmin({
          action: `${kind}.approve`,
          actor: principal,
          serverId: params.id,
          tool: params.tool,
          data: {
            pinHash: approved.pinHash,
            previousHash: approved.previousHash,
            reason: approved.reason,
            policyVersion: approved.policyVersion,
            ...(kind === 'tool' ? {} : { kind }),
          },
        });
        const label = kind === 'tool' ? 'Tool' : kind === 'prompt' ? 'Prompt' : 'UI resource';
        await registry.serverEvent(params.id, 'pins', `${label} ${params.tool} approved by ${principal.name}.`, {
          tool: params.tool,
          pinHash: approved.pinHash,
          ...(kind === 'tool' ? {} : { kind }),
        });
        await events.publish('tool.approved', {
          server: params.id,
          tool: params.tool,
          pinHash: approved.pinHash,
          approvedBy: principal.name,
          ...(kind === 'tool' ? {} : { kind }),
        });
        const pin = await getPin(store.db, params.id, params.tool, kind);
        return { approved: params.tool, policyVersion: approved.policyVersion, pin: pin ? reviewOf(pin) : null };
      },
    }),
  ];
}

/**
 * Re-pins and bumps the server's policy version in one transaction, so pending approvals bound to the old
 * pin or policy go `out_of_scope` when they would run, and the hub's caches see the change.
 */
async function approveAndBump(
  registry: Registry,
  serverId: string,
  tool: string,
  principal: Principal,
  expectedHash: string,
  kind: PinKind,
): Promise<PinApproval & { policyVersion: number }> {
  let approval: PinApproval | undefined;
  const updated = await registry.records.update(
    serverId,
    (row) => {
      row.policy_version += 1;
    },
    async (trx) => {
      approval = await approvePin(trx, serverId, tool, { approvedBy: principal.id, expectedHash, kind });
    },
  );
  if (!approval) throw new GatehouseError('internal_error');
  return { ...approval, policyVersion: updated.policyVersion };
}
