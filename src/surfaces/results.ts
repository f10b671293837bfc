/**
 * The MCP-facing result shapes every Gatehouse surface shares (hal0's
 * contract): a refusal the agent should read is a tool result with
 * `isError: true` and `{"status": "error", "error": {code, message}}`; a gated
 * call answers `{"status": "pending_approval", "approval_id", "detail"}`.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { ERROR_CATALOGUE, type GatehouseError } from '../errors.js';

function jsonResult(body: Record<string, unknown>, isError: boolean): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(body) }],
    structuredContent: body,
    ...(isError ? { isError } : {}),
  };
}

/** Details an agent may read: reasons and hints, never internals. */
const AGENT_DETAILS = ['reason', 'retryAfterS', 'issues', 'path', 'limit', 'connectUrl'];

export function errorResult(error: GatehouseError): CallToolResult {
  const details = Object.fromEntries(
    Object.entries(error.details ?? {}).filter(([key]) => AGENT_DETAILS.includes(key)),
  );
  return jsonResult({ status: 'error', error: { code: error.code, message: error.message, ...details } }, true);
}

export function pendingApprovalResult(approvalId: string, detail: string): CallToolResult {
  return jsonResult({ status: 'pending_approval', approval_id: approvalId, detail }, false);
}

export function jsonToolResult(body: Record<string, unknown>): CallToolResult {
  return jsonResult(body, false);
}

/** What a caller gets for a tool it may not see: exactly what a tool that does not exist gets. */
export function unknownTool(name: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${name} not found`);
}

/** Whether a catalogue error is reported as a tool result (else it is a protocol error). */
export function isResultError(error: GatehouseError): boolean {
  return ERROR_CATALOGUE[error.code].mcp === 'result';
}
