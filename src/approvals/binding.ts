/**
 * The hub's re-check before an approved call runs: is it still the call that was
 * approved? The server must still exist and be enabled, its policy version (tool
 * policy, exposure, sandbox, endpoint, re-pins all bump it) must be the one bound
 * at request time, the tool must still be pinned with the same hash, and the
 * policy must still let the tool run at all; the server must be the one the call was asked of (not one
 * installed again under its id), and the requester must still reach it (its groups). Surfaces may add their
 * own checks.
 */
import type { Kysely } from 'kysely';
import { classifyTool, DEFAULT_TOOL_POLICY, type ToolPolicy } from '../policy/tool-policy.js';
import { parseJson } from '../store/json.js';
import type { Database } from '../store/schema.js';
import { requesterGroups } from './principals.js';
import type { RecheckOutcome } from './queue.js';
import type { ApprovalView } from './types.js';

export async function checkHubBinding(db: Kysely<Database>, approval: ApprovalView): Promise<RecheckOutcome> {
  if (!approval.serverId) return { ok: false, reason: 'The approval names no server.' };
  const server = await db
    .selectFrom('servers')
    .select(['enabled', 'policy_version', 'tool_policy', 'exposure', 'installed_at'])
    .where('id', '=', approval.serverId)
    .executeTakeFirst();
  if (!server) return { ok: false, reason: `Server "${approval.serverId}" was uninstalled.` };
  if (server.enabled !== 1) return { ok: false, reason: `Server "${approval.serverId}" was disabled.` };
  // Uninstalled and installed again (at another URL, perhaps) since the call was asked: the id is all they share.
  if (server.installed_at > approval.createdAt) {
    return { ok: false, reason: `Server "${approval.serverId}" was installed again after the call was asked.` };
  }
  // The requester must still reach the server: a token given other groups, or a person who left the group
  // their OAuth grant used, has no call run there that it could no longer make.
  const groups = await requesterGroups(db, approval.requester.id);
  const exposure = parseJson<string[]>(server.exposure, ['default']);
  if (groups !== undefined && !groups.some((group) => exposure.includes(group))) {
    return { ok: false, reason: `The requester no longer reaches server "${approval.serverId}" (its groups changed).` };
  }
  if (approval.policyVersion !== null && Number(server.policy_version) !== approval.policyVersion) {
    return { ok: false, reason: `The policy of server "${approval.serverId}" changed after the call was approved.` };
  }
  const policy = { ...DEFAULT_TOOL_POLICY, ...parseJson<Partial<ToolPolicy>>(server.tool_policy, {}) };
  const verdict = classifyTool(policy, approval.tool);
  if (verdict === 'blocked' || verdict === 'excluded') {
    return { ok: false, reason: `Tool "${approval.tool}" is now ${verdict} by policy.` };
  }
  if (approval.pinHash !== null) {
    const pin = await db
      .selectFrom('tool_pins')
      .select(['state', 'pin_hash'])
      .where('server_id', '=', approval.serverId)
      .where('kind', '=', 'tool')
      .where('tool_name', '=', approval.tool)
      .executeTakeFirst();
    if (pin?.state !== 'pinned' || pin.pin_hash !== approval.pinHash) {
      return { ok: false, reason: `Tool "${approval.tool}" changed after the call was approved.` };
    }
  }
  return { ok: true };
}
