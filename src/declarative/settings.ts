/** Declarative settings: only keys whose value differs are written, so a second apply writes nothing. */
import { isDeepStrictEqual } from 'node:util';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import type { Principal } from '../identity/index.js';
import type { SettingsService } from '../settings/service.js';
import type { KindReport } from './report.js';

export interface SettingsDeps {
  settings: SettingsService;
  audit: AuditLog;
  events: EventHub;
}

/** The keys to write: compared with what every request sees now (stored value or default). */
export async function planSettings(
  deps: SettingsDeps,
  declared: Record<string, unknown>,
): Promise<{ changes: Record<string, unknown>; unchanged: string[] }> {
  const current = (await deps.settings.current()) as Readonly<Record<string, unknown>>;
  const changes: Record<string, unknown> = {};
  const unchanged: string[] = [];
  for (const [key, value] of Object.entries(declared)) {
    if (isDeepStrictEqual(current[key], value)) unchanged.push(key);
    else changes[key] = value;
  }
  return { changes, unchanged };
}

export async function applySettings(
  deps: SettingsDeps,
  plan: { changes: Record<string, unknown>; unchanged: string[] },
  actor: Principal,
  report: KindReport,
): Promise<void> {
  report.unchanged.push(...plan.unchanged);
  const keys = Object.keys(plan.changes);
  if (keys.length === 0) return;
  await deps.settings.patch(plan.changes, actor.id);
  await deps.audit.recordAdmin({ action: 'settings.update', actor, data: { changes: plan.changes } });
  await deps.events.publish('settings.changed', { keys });
  report.updated.push(...keys);
}
