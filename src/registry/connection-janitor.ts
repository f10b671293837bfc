/**
 * Ends the pooled upstream connections a server record no longer wants, when the record changes — not when
 * they idle out (`poolIdleMs`, five minutes by default). A removed or disabled server, or one whose URL,
 * headers, transport or network setting changed, hears nothing more from this gateway: no call, and no 2025
 * session's GET stream reconnecting with the old credentials. A change that keeps the connection (a tool
 * policy, an override) closes nothing. Every replica hears the record's `server.changed` and ends its own.
 */
import { findGatehouseError } from '../errors.js';
import { parseJson } from '../store/json.js';
import type { ServerTable } from '../store/schema.js';
import type { UpstreamPool } from '../upstream/index.js';
import { type NormalizedTarget, normalizeTarget } from '../upstream/target.js';
import { type ServerStore, type StoredAuth, upstreamTargetOf } from './records.js';

/** What the record wants now: its normalized target and network, or nothing (removed, disabled, stdio, unopenable). */
interface Wanted {
  target: NormalizedTarget;
  privateNetwork: boolean;
  /** An OAuth server's connections carry each caller's grant as `authorization`: any grant's may stay. */
  oauth: boolean;
}

function wantedOf(records: ServerStore, row: ServerTable | undefined): Wanted | undefined {
  if (row?.enabled !== 1 || row.transport === 'stdio') return undefined;
  try {
    const connection = records.connectionOf(row);
    if (connection.transport === 'stdio') return undefined;
    return {
      target: normalizeTarget(upstreamTargetOf(connection, row.id)),
      privateNetwork: connection.privateNetwork,
      oauth: parseJson<StoredAuth>(row.auth, { type: 'none' }).type === 'oauth',
    };
  } catch {
    // Its credentials cannot be opened (an environment reference gone): nothing can be kept for it.
    return undefined;
  }
}

/** Same URL, transport and headers; for an OAuth server, whatever grant's `authorization` each carries. */
function sameConnection(a: NormalizedTarget, b: NormalizedTarget, oauth: boolean): boolean {
  if (a.url !== b.url || a.transport !== b.transport) return false;
  const names = (t: NormalizedTarget) =>
    Object.keys(t.headers)
      .filter((name) => !(oauth && name === 'authorization'))
      .sort();
  const namesA = names(a);
  const namesB = names(b);
  return (
    namesA.length === namesB.length &&
    namesA.every((name, i) => name === namesB[i] && a.headers[name] === b.headers[name])
  );
}

/**
 * Ends server `id`'s pooled connections that its record (read now) no longer wants, in every pool; answers how
 * many were ended. A store failure is thrown: the caller logs it, and the connections idle out as before.
 */
export async function endUnwantedConnections(
  id: string,
  records: ServerStore,
  pools: ReadonlyMap<boolean, UpstreamPool>,
): Promise<number> {
  const row = await records.getRow(id).catch((error: unknown) => {
    if (findGatehouseError(error)?.code === 'mcp.not_found') return undefined;
    throw error;
  });
  const wanted = wantedOf(records, row);
  let ended = 0;
  for (const [privateNetwork, pool] of pools) {
    ended += pool.closeOwner(
      id,
      (target) =>
        wanted !== undefined &&
        wanted.privateNetwork === privateNetwork &&
        sameConnection(target, wanted.target, wanted.oauth),
    );
  }
  return ended;
}
