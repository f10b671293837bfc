/**
 * Surface grants: how an MCP surface (the admin surface) runs a REST route
 * in-process as the calling agent. The surface issues a single-use,
 * unguessable nonce bound to the agent, the route's scope and the access level
 * it checked; the app's auth hook redeems it for that one injected request.
 * Agent tokens reach REST routes only this way.
 */
import { randomBytes } from 'node:crypto';
import type { Principal } from '../identity/index.js';
import type { Scope } from './route.js';

export const GRANT_HEADER = 'x-gatehouse-surface-grant';
const GRANT_TTL_MS = 30_000;

export interface SurfaceGrant {
  principal: Principal;
  scope: Scope;
  level: 'read' | 'write';
  /** The approval that authorised a gated call, for the audit trail. */
  approvalId?: string;
}

export class SurfaceGrants {
  private readonly issued = new Map<string, { grant: SurfaceGrant; expiresAt: number }>();

  issue(grant: SurfaceGrant): string {
    const nonce = randomBytes(32).toString('base64url');
    this.issued.set(nonce, { grant, expiresAt: Date.now() + GRANT_TTL_MS });
    if (this.issued.size > 1000) this.sweep();
    return nonce;
  }

  /** Single use: a redeemed or expired nonce is gone. */
  redeem(nonce: string): SurfaceGrant | undefined {
    const entry = this.issued.get(nonce);
    this.issued.delete(nonce);
    return entry && entry.expiresAt > Date.now() ? entry.grant : undefined;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [nonce, entry] of this.issued) if (entry.expiresAt <= now) this.issued.delete(nonce);
  }
}
