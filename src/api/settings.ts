/** Platform settings: read by admins and operators, changed by admins only, in force on the next request. */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { SETTING_KEYS } from '../settings/keys.js';
import type { SettingsService } from '../settings/service.js';
import { defineRoute, type RouteDeclaration } from './route.js';

export function settingsRoutes(deps: {
  settings: SettingsService;
  audit: AuditLog;
  events: EventHub;
}): RouteDeclaration[] {
  const { settings, audit, events } = deps;
  return [
    defineRoute({
      method: 'GET',
      url: '/api/settings',
      summary: 'Every platform setting with its current value.',
      scope: 'settings',
      access: ['admin', 'operator'],
      mcp: { tool: 'settings_get', tier: 'autonomousRead' },
      handler: async () => ({
        settings: await settings.current(),
        descriptions: Object.fromEntries(Object.entries(SETTING_KEYS).map(([k, d]) => [k, d.description])),
      }),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/settings',
      summary: 'Change settings: `{"<key>": value, ...}`; every key is validated, unknown keys are refused.',
      scope: 'settings',
      access: ['admin'],
      mcp: { exclude: 'an agent could widen its own scopes' },
      body: z.record(z.string(), z.unknown()),
      async handler({ body, principal }) {
        const updated = await settings.patch(body, principal?.id ?? null);
        await audit.recordAdmin({ action: 'settings.update', actor: principal, data: { changes: body } });
        await events.publish('settings.changed', { keys: Object.keys(body) });
        return { settings: updated };
      },
    }),
  ];
}
