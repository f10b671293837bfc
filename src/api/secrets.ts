/**
 * Sealing-key rotation over REST (admins only; mirrors `POST /api/oauth/keys/rotate`): which keys the
 * stored values are sealed with, and the re-seal that moves every one to the current key. Keys come from
 * `GATEHOUSE_SECRET_KEY` (current) and `GATEHOUSE_SECRET_KEY_PREVIOUS` (open only); these routes name keys
 * by kid, never a key or a value.
 */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import { inventory, resealAll } from '../secrets/reseal.js';
import type { SealKey } from '../secrets/seal.js';
import type { Store } from '../store/db.js';
import { defineRoute, type RouteDeclaration } from './route.js';

export function secretsRoutes(deps: { store: Store; key: SealKey; audit: AuditLog }): RouteDeclaration[] {
  const { store, key, audit } = deps;
  return [
    defineRoute({
      method: 'GET',
      url: '/api/secrets/keys',
      summary:
        'The sealing keys of this gateway (by kid: current and previous) and how many stored values each sealed; retirable is true once nothing needs a previous key.',
      scope: 'system',
      access: ['admin'],
      mcp: { exclude: 'sealing-key rotation is an admin operation on the store, not an agent operation' },
      handler: () => inventory(store, key),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/secrets/rotate',
      summary:
        'Re-seals every sealed value at rest (server headers, env and auth, upstream OAuth grants and clients, signing keys) with the current key, in batches; run after starting every replica with a new GATEHOUSE_SECRET_KEY and the old one in GATEHOUSE_SECRET_KEY_PREVIOUS.',
      scope: 'system',
      access: ['admin'],
      body: z.strictObject({ batchSize: z.number().int().min(1).max(1000).optional() }).optional(),
      mcp: { exclude: 'sealing-key rotation is an admin operation on the store, not an agent operation' },
      handler: async ({ body, principal }) => {
        const report = await resealAll(store, key, body?.batchSize);
        await audit.recordAdmin({
          action: 'secrets.rotate',
          actor: principal,
          data: {
            kid: key.kid,
            resealed: report.resealed,
            alreadyCurrent: report.alreadyCurrent,
            changedMeanwhile: report.changedMeanwhile,
            failed: report.failed,
            retirable: report.inventory.retirable,
          },
        });
        return report;
      },
    }),
  ];
}
