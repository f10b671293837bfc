/**
 * The workspace sandbox of tool arguments (`policy/paths.ts`) for what else an agent hands a server through the
 * hub: resource URIs (read, subscribed, listened to), prompt and completion arguments.
 */
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { findGatehouseError } from '../../errors.js';
import { assertPathsInside, type PathPolicy } from '../../policy/paths.js';

/** Refuses a path outside the roots (`file:` URIs anywhere) as invalid params, the sandbox's code in `data`. */
export function assertInsideWorkspace(policy: PathPolicy, values: Record<string, unknown>): void {
  try {
    assertPathsInside(policy, values);
  } catch (error) {
    const refused = findGatehouseError(error);
    if (!refused) throw error;
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, `${refused.code}: ${refused.message}`, {
      code: refused.code,
    });
  }
}

/** Whether a resource URI is one its server may be asked for: a `file:` URI only inside the workspace roots. */
export function uriInsideWorkspace(policy: PathPolicy, uri: string): boolean {
  try {
    assertPathsInside(policy, { uri });
    return true;
  } catch {
    return false;
  }
}
