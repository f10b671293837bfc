/**
 * MCP Apps UI resources (`ui://`) are pinned like tools: their content — the HTML an agent's host renders,
 * its MIME type and its `_meta.ui` (CSP, permissions) — is hashed on first sight (at a handshake, or the
 * first read through the hub) and every later read through the hub is checked against the pin. A read whose
 * content differs quarantines the resource (`changed`, the new content pending with its diff for review, the
 * `tool.quarantined` event and a `resource.quarantine` audit row) and is refused with `resource.quarantined`
 * until an operator approves the new content (`POST /api/mcp/servers/{id}/pins/{uri}/approve`, kind
 * `resource`). A read that matches the pin costs a hash and a map lookup; only a change writes to the store.
 */
import { ProtocolError } from '@modelcontextprotocol/server';
import { AuditLog } from '../../audit/log.js';
import type { EventHub } from '../../audit/stream.js';
import { ERROR_CATALOGUE } from '../../errors.js';
import { type PinChange, reconcilePins } from '../../policy/pin-store.js';
import { itemPinHash, uiResourceItem } from '../../policy/pins.js';
import type { ServerStore } from '../../registry/records.js';
import type { Store } from '../../store/db.js';
import type { HubServer } from './view.js';

export interface UiPinGuard {
  /**
   * Admits the contents a read of the `ui://` resource `uri` (the upstream's own URI) answered, or throws
   * the `resource.quarantined` protocol error. Pins it on first sight.
   */
  admit(server: HubServer, uri: string, contents: unknown): Promise<void>;
}

export function isUiUri(uri: string): boolean {
  return uri.startsWith('ui://');
}

export function createUiPinGuard(deps: { store: Store; records: ServerStore; events: EventHub }): UiPinGuard {
  const audit = new AuditLog(deps.store);
  return {
    async admit(server, uri, contents) {
      const item = uiResourceItem(uri, contents);
      if (!item) return; // nothing to render, nothing to pin
      const pin = server.uiPins.get(uri);
      const hash = pin ? itemPinHash(item, 'resource', pin.scheme) : undefined;
      if (pin?.state === 'pinned' && pin.pinHash === hash) return;
      // Already waiting for review with this very content: refused without touching the store again.
      if (pin?.state === 'quarantined' && pin.pendingHash === hash && pin.pinHash !== hash)
        throw refusal(server, uri, pin.reason);
      // New, changed, or waiting for review: compared (and recorded) in the store, as a handshake would.
      let changes: PinChange[] = [];
      let admitted = false;
      await deps.records.update(
        server.row.id,
        () => {},
        async (trx) => {
          changes = await reconcilePins(trx, server.row.id, [item], {
            firstHandshake: true,
            trustNewTools: false,
            kind: 'resource',
          });
          const row = await trx
            .selectFrom('tool_pins')
            .select(['state', 'pin_hash', 'scheme'])
            .where('server_id', '=', server.row.id)
            .where('kind', '=', 'resource')
            .where('tool_name', '=', uri)
            .executeTakeFirst();
          // Served only when the pin in force is this very content (first sight, released, or pinned meanwhile).
          admitted = row?.state === 'pinned' && row.pin_hash === itemPinHash(item, 'resource', Number(row.scheme));
          for (const change of changes.filter((c) => c.change === 'quarantined')) {
            await audit.recordAdmin(
              {
                action: 'resource.quarantine',
                actor: undefined,
                serverId: server.row.id,
                tool: uri,
                data: { reason: change.reason, kind: 'resource', seen: 'read' },
              },
              trx,
            );
          }
        },
      );
      for (const change of changes) {
        if (change.change === 'quarantined') {
          await deps.events.publish('tool.quarantined', {
            server: server.row.id,
            tool: uri,
            reason: change.reason,
            kind: 'resource',
          });
        }
      }
      if (admitted) return;
      throw refusal(server, uri, changes[0]?.reason ?? pin?.reason);
    },
  };
}

/** What an agent reading a quarantined UI resource gets: a protocol error naming why (no tool result to carry it). */
function refusal(server: HubServer, uri: string, why: string | null | undefined): ProtocolError {
  const reason = why ?? 'changed';
  const { mcp, message } = ERROR_CATALOGUE['resource.quarantined'];
  return new ProtocolError(mcp, `${message} (${reason})`, {
    code: 'resource.quarantined',
    server: server.row.id,
    uri,
    reason,
  });
}
