/** OAuth events in the audit trail (`kind: oauth`): who, which client, which resource, and the outcome (an RFC code or `ok`). */
import type { AuditLog } from '../audit/log.js';
import { nowIso } from '../store/json.js';

export interface OAuthAuditEvent {
  action: string;
  outcome: string;
  subject?: string | undefined;
  subjectName?: string | undefined;
  clientId?: string | undefined;
  resource?: string | undefined;
  data?: Record<string, unknown>;
}

export type OAuthAuditor = (event: OAuthAuditEvent) => void;

export function oauthAuditor(audit: AuditLog): OAuthAuditor {
  return (event) => {
    void audit.enqueue({
      at: nowIso(),
      kind: 'oauth',
      action: event.action,
      actor_id: event.subject ?? null,
      actor_name: event.subjectName ?? null,
      server_id: null,
      tool: null,
      verdict: null,
      approval_id: null,
      outcome: event.outcome,
      latency_ms: null,
      request_bytes: null,
      response_bytes: null,
      args_digest: null,
      // Client ids are public; codes, tokens and verifiers never appear here.
      data: JSON.stringify({
        ...(event.clientId ? { client: event.clientId.slice(0, 300) } : {}),
        ...(event.resource ? { resource: event.resource.slice(0, 300) } : {}),
        ...event.data,
      }),
    });
  };
}
